"""resize_token_embeddings: the input embedding (transformers' code) and our output heads follow the
new vocabulary, old words keep their rows, new ones start from the mean row, ties survive."""

from __future__ import annotations

import pytest
import torch

from hf_nlm import (
    AWDLSTMConfig,
    AWDLSTMForCausalLM,
    HLBLConfig,
    HLBLForCausalLM,
    LBLConfig,
    LBLForCausalLM,
    NPLMConfig,
    NPLMForCausalLM,
    StorySeq2SeqConfig,
    StorySeq2SeqForConditionalGeneration,
)
from hf_nlm.heads import tree_config_fields
from hf_nlm.trees import balanced_tree

V = 40

MODELS = {
    "nplm": lambda: NPLMForCausalLM(
        NPLMConfig(vocab_size=V, context_size=2, embedding_size=6, hidden_size=5)
    ),
    "nplm_split": lambda: NPLMForCausalLM(
        NPLMConfig(vocab_size=V, context_size=2, embedding_size=6, hidden_size=5, head="split",
                   cutoffs=[8, 20])
    ),
    "lbl": lambda: LBLForCausalLM(LBLConfig(vocab_size=V, context_size=2, hidden_size=6)),
    "awd_lstm": lambda: AWDLSTMForCausalLM(
        AWDLSTMConfig(vocab_size=V, embedding_size=6, hidden_size=7, num_hidden_layers=2)
    ),
}


def snapshot(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_grow_keeps_old_rows_and_starts_new_words_at_the_mean(name, tmp_path):
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    tied = model.lm_head.weight is model.get_input_embeddings().weight
    old = snapshot(model)
    model.resize_token_embeddings(V + 3)

    assert model.config.vocab_size == V + 3
    assert (model.lm_head.weight is model.get_input_embeddings().weight) == tied
    emb = model.get_input_embeddings().weight
    assert emb.shape[0] == V + 3
    emb_name = next(k for k, v in model.state_dict().items() if v.data_ptr() == emb.data_ptr())
    torch.testing.assert_close(emb[:V], old[emb_name], rtol=0, atol=0)
    for part in ("weight", "bias"):
        new = getattr(model.lm_head, part)
        torch.testing.assert_close(new[:V], old[f"lm_head.{part}"], rtol=0, atol=0)
        if part == "bias" or not tied:  # a tied weight's new rows are the embedding's (transformers' init)
            expected = old[f"lm_head.{part}"].mean(0).expand_as(new[V:])
            torch.testing.assert_close(new[V:], expected)

    x = torch.randint(0, V + 3, (2, 6))
    with torch.no_grad():
        logits = model(x).logits
    assert logits.shape == (2, 6, V + 3)
    log_probs = torch.log_softmax(logits.float(), -1)
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(2, 6))
    model.train()
    model(x, labels=x).loss.backward()  # trains with the new words as targets

    model.eval().save_pretrained(tmp_path)
    reloaded = type(model).from_pretrained(tmp_path).eval()
    with torch.no_grad():
        torch.testing.assert_close(reloaded(x).logits, model(x).logits)


def test_shrink_cuts_the_last_words():
    torch.manual_seed(0)
    model = MODELS["nplm"]().eval()
    old = snapshot(model)
    model.resize_token_embeddings(V - 5)
    assert model.lm_head.weight.shape[0] == model.lm_head.bias.shape[0] == V - 5
    torch.testing.assert_close(model.lm_head.weight, old["lm_head.weight"][: V - 5], rtol=0, atol=0)


def test_heads_that_cannot_follow_refuse_clearly():
    split = MODELS["nplm_split"]()
    with pytest.raises(ValueError, match="last cut-off is 20"):
        split.resize_token_embeddings(15)
    tree = balanced_tree(V)
    hlbl = HLBLForCausalLM(HLBLConfig(vocab_size=V, context_size=2, hidden_size=6,
                                      **tree_config_fields(tree)), tree=tree)
    with pytest.raises(ValueError, match="tree"):
        hlbl.resize_token_embeddings(V + 1)
    assert hlbl.get_input_embeddings().weight.shape[0] == V  # refused before anything changed


def test_untied_seq2seq_grows_both_embeddings_and_its_head(tmp_path):
    """The story seq2seq with separate source and decoder embeddings: both follow, as the head does."""
    torch.manual_seed(0)
    model = StorySeq2SeqForConditionalGeneration(
        StorySeq2SeqConfig(vocab_size=V, embedding_size=6, hidden_size=8, tie_word_embeddings=False)
    ).eval()
    old = snapshot(model)
    model.resize_token_embeddings(V + 3)

    for name in ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"):
        new = model.state_dict()[name]
        assert new.shape[0] == V + 3, name
        torch.testing.assert_close(new[:V], old[name], rtol=0, atol=0)
        torch.testing.assert_close(new[V:], old[name].mean(0).expand_as(new[V:]), rtol=0, atol=1e-3)
    assert model.model.encoder.embed_tokens is not model.model.decoder.embed_tokens

    x = torch.randint(0, V + 3, (2, 5))
    with torch.no_grad():
        logits = model(input_ids=x, decoder_input_ids=x).logits
    assert logits.shape == (2, 5, V + 3)
    model.save_pretrained(tmp_path)
    reloaded = StorySeq2SeqForConditionalGeneration.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        torch.testing.assert_close(reloaded(input_ids=x, decoder_input_ids=x).logits, logits)
