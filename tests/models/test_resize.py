"""resize_token_embeddings: the input embedding (transformers' code) and our output heads follow the
new vocabulary, old words keep their rows, new ones start from the mean row, ties survive; a split head cut
past a cut-off drops its emptied clusters, a tree head gives new words leaves and removes cut words'
leaves."""

from __future__ import annotations

import math

import pytest
import torch
from test_contract_heads import multi_code_tree

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
from hf_nlm.trees import balanced_tree, huffman_tree

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


def full_log_probs(model, x: torch.LongTensor) -> torch.Tensor:
    with torch.no_grad():
        logits = model(x).logits
    return logits if model.lm_head.returns_log_probs else torch.log_softmax(logits, -1)


def test_split_head_cut_past_a_cutoff_drops_the_emptied_clusters(tmp_path):
    """cutoffs [8, 20]: cut to 15 words, the last cluster goes with its tombstone; cut to 5, only the head
    cluster is left (a full softmax over the first 5 words' rows, no tombstone)."""
    torch.manual_seed(0)
    model = MODELS["nplm_split"]().eval()
    old = snapshot(model)
    x = torch.randint(0, 5, (2, 6))
    model.resize_token_embeddings(15)
    head = model.lm_head
    assert model.config.cutoffs == head.cutoffs == [8]
    torch.testing.assert_close(head.tombstone_weight, old["lm_head.tombstone_weight"][:1], rtol=0, atol=0)
    torch.testing.assert_close(head.weight, old["lm_head.weight"][:15], rtol=0, atol=0)
    got = full_log_probs(model, x)
    torch.testing.assert_close(got.exp().sum(-1), torch.ones(2, 6))  # brute force
    model.save_pretrained(tmp_path / "15")
    torch.testing.assert_close(full_log_probs(type(model).from_pretrained(tmp_path / "15").eval(), x), got)

    model.resize_token_embeddings(5)
    assert model.config.cutoffs == head.cutoffs == [] and head.tombstone_weight.shape[0] == 0
    # What is left is the softmax over the first 5 rows.
    with torch.no_grad():
        hidden = model.model(x).last_hidden_state
        expected = torch.log_softmax(hidden @ old["lm_head.weight"][:5].T + old["lm_head.bias"][:5], -1)
    torch.testing.assert_close(full_log_probs(model, x), expected)
    model.save_pretrained(tmp_path / "5")
    reloaded = type(model).from_pretrained(tmp_path / "5").eval()
    torch.testing.assert_close(full_log_probs(reloaded, x), expected)


def hlbl(tree) -> HLBLForCausalLM:
    torch.manual_seed(0)
    return HLBLForCausalLM(HLBLConfig(vocab_size=tree.vocab_size, context_size=2, hidden_size=6,
                                      **tree_config_fields(tree)), tree=tree).eval()


@pytest.mark.parametrize("tree", [balanced_tree(V), huffman_tree(list(range(V, 0, -1))), multi_code_tree()],
                         ids=["balanced", "huffman", "multi-code"])
@pytest.mark.parametrize("size", [V + 1, V + 9, 5, 2])
@pytest.mark.parametrize("mean_resizing", [True, False])
def test_tree_head_follows_a_resized_vocabulary(tree, size, mean_resizing, tmp_path):
    """The tree head resized by resize_token_embeddings: a distribution over the new vocabulary (summed by
    brute force); a new word's node starts at q = 0 and b = -log |V| (0 without mean resizing), so only the
    words whose leaves were split move, by log(|V| / (|V| + 1)) (log 1/2) per split; cut words' nodes
    collapse and the node vectors kept keep their rows; the config records the new tree's shape, and the
    model loads back identical."""
    if size > tree.vocab_size and tree.vocab_size != V:
        size = tree.vocab_size + size - V  # the multi-code tree has 5 words
    model = hlbl(tree)
    old_vocab = tree.vocab_size
    x = torch.randint(0, min(size, old_vocab), (2, 6))
    before = full_log_probs(model, x)
    old_tree = model.lm_head.tree()
    new_tree, origin = old_tree.resized(size)
    old_weight = model.lm_head.weight.detach().clone()
    model.resize_token_embeddings(size, mean_resizing=mean_resizing)
    head = model.lm_head
    assert head.tree() == new_tree and head.vocab_size == model.config.vocab_size == size
    assert {k: getattr(model.config, k) for k in tree_config_fields(new_tree)} == tree_config_fields(new_tree)
    kept = torch.as_tensor(origin) >= 0
    torch.testing.assert_close(head.weight[kept], old_weight[torch.as_tensor(origin)[kept]], rtol=0, atol=0)
    assert not head.weight[~kept].any()
    after = full_log_probs(model, x)
    assert after.shape[-1] == size
    torch.testing.assert_close(after.exp().sum(-1), torch.ones(2, 6))  # brute force over the vocabulary
    if size > old_vocab:
        shift = after[..., :old_vocab] - before
        moved = math.log(old_vocab / (old_vocab + 1)) if mean_resizing else math.log(0.5)
        # Each split of a word's leaf multiplies its probability by the factor (a leaf split once already
        # may be split again when more words come than the tree has shallowest leaves).
        splits = shift / moved
        if tree.max_codes == 1:
            assert ((splits - splits.round()).abs() < 1e-4).all() and (splits.round() >= 0).all()
        else:  # a word with several codes moves by less when one of its leaves is split
            assert (shift < 1e-5).all()
        # a word that kept its leaf kept its probability, and each new word took a leaf
        assert int((shift.abs() > 1e-5).any(0).any(0).sum()) <= size - old_vocab
    model.save_pretrained(tmp_path)
    reloaded = HLBLForCausalLM.from_pretrained(tmp_path).eval()
    assert reloaded.lm_head.tree() == new_tree
    torch.testing.assert_close(full_log_probs(reloaded, x), after, rtol=0, atol=0)
    model.train()
    y = torch.randint(0, size, (2, 6))
    model(y, labels=y).loss.backward()  # trains with the new words as targets


def test_tree_head_refuses_fewer_than_two_words():
    model = hlbl(balanced_tree(V))
    with pytest.raises(ValueError, match="at least 2 words"):
        model.resize_token_embeddings(1)
    assert model.get_input_embeddings().weight.shape[0] == V  # refused before anything changed


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
