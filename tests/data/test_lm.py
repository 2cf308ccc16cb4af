"""Word-level vocabularies, token streams, blocks and evaluate_lm against brute force."""

import math

import pytest
import torch
from transformers import AutoTokenizer

from hf_nlm import NPLMConfig, NPLMForCausalLM
from hf_nlm.data import LMBlockDataset, build_lm_dataset, group_into_blocks, tokenize_corpus
from hf_nlm.evaluation import evaluate_lm
from hf_nlm.tokenization import train_word_level_tokenizer


def test_word_level_vocabulary_is_frequency_sorted_with_cutoff(toy_texts):
    tok = train_word_level_tokenizer(toy_texts, min_frequency=2)
    vocab = tok.get_vocab()
    # counts: the 7, cat 3, dog 3, on 3, sat 2, mat 2, a 2, saw 2; log 1 (dropped)
    words = sorted((w for w in vocab if w not in ("<unk>", "<eos>")), key=vocab.get)
    assert words == ["the", "cat", "dog", "on", "a", "mat", "sat", "saw"]
    assert vocab["<unk>"] == 0 and vocab["<eos>"] == 1
    assert tok.eos_token_id == tok.bos_token_id == tok.pad_token_id == 1
    assert tok("the log")["input_ids"] == [vocab["the"], 0]


def test_word_level_lowercase_max_size_and_literal_unk():
    tok = train_word_level_tokenizer(["The THE the <unk> b b c"], lowercase=True, max_vocab_size=4)
    assert set(tok.get_vocab()) == {"<unk>", "<eos>", "the", "b"}
    assert tok("THE <unk> c")["input_ids"] == [2, 0, 0]


def test_word_level_decode_round_trip_and_save_load(tmp_path, toy_texts):
    tok = train_word_level_tokenizer(toy_texts)
    ids = tok("the dog saw the cat")["input_ids"]
    assert tok.decode(ids).strip() == "the dog saw the cat"
    # A continuation decoded on its own brings its leading space (pipeline appends it to the prompt).
    assert "the dog" + tok.decode(ids[2:]) == "the dog saw the cat"
    tok.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    assert again("the dog saw the cat")["input_ids"] == ids
    assert again.eos_token_id == 1


@pytest.mark.parametrize("kw, msg", [({"min_frequency": 0}, "min_frequency"),
                                     ({"max_vocab_size": 2}, "max_vocab_size")])
def test_word_level_bad_arguments(kw, msg, toy_texts):
    with pytest.raises(ValueError, match=msg):
        train_word_level_tokenizer(toy_texts, **kw)


def test_word_level_empty_text():
    with pytest.raises(ValueError, match="empty"):
        train_word_level_tokenizer(["", "   "])


def test_stream_appends_eos_and_counts_words(toy_texts):
    tok = train_word_level_tokenizer(toy_texts)
    ids, num_words = tokenize_corpus(toy_texts[:2], tok)
    expected = tok(toy_texts[0])["input_ids"] + [1] + tok(toy_texts[1])["input_ids"] + [1]
    assert ids.tolist() == expected
    assert num_words == 6 + 6 + 2


def test_blocks_cover_every_token_once_with_full_context():
    ids = torch.arange(10, 27)
    for block_size in (1, 3, 5, 17, 40):
        for context in (1, 2, 4):
            blocks = group_into_blocks(ids, block_size, context, bos_token_id=1)
            inp, lab = blocks["input_ids"], blocks["labels"]
            assert inp.shape[1] == block_size + context
            assert sorted(lab[lab != -100].tolist()) == ids.tolist()
            # Each labelled token is preceded in its block by the stream's previous `context` tokens.
            stream = [1] * context + ids.tolist()
            for b in range(inp.shape[0]):
                for t in range(inp.shape[1]):
                    if lab[b, t] != -100:
                        pos = stream.index(int(lab[b, t]))
                        assert inp[b, t - context : t].tolist() == stream[pos - context : pos]


def test_block_dataset_batches_by_fancy_indexing():
    data = LMBlockDataset(group_into_blocks(torch.arange(2, 30), 4, 2, 1))
    batch = data.__getitems__([3, 0])
    assert torch.equal(batch["input_ids"][1], data[0]["input_ids"])
    with pytest.raises(ValueError):
        group_into_blocks(torch.tensor([], dtype=torch.long), 4, 2, 1)


def brute_force_nll(model, ids: list[int], bos: int) -> float:
    """Score every token from its own n-1 previous tokens, one forward per token."""
    n_1 = model.config.context_size
    stream = [bos] * n_1 + ids
    total = 0.0
    with torch.no_grad():
        for pos in range(n_1, len(stream)):
            context = torch.tensor([stream[pos - n_1 : pos]])
            logp = torch.log_softmax(model(context).logits[0, -1], -1)
            total -= logp[stream[pos]].item()
    return total


def test_evaluate_lm_equals_brute_force_for_any_block_size(toy_texts):
    tok = train_word_level_tokenizer(toy_texts[1:3])  # 'mat' is out of vocabulary: scored as <unk>
    torch.manual_seed(0)
    model = NPLMForCausalLM(NPLMConfig(vocab_size=len(tok), context_size=3, embedding_size=5,
                                       hidden_size=4)).eval()
    ids, num_words = tokenize_corpus(toy_texts, tok)
    expected = brute_force_nll(model, ids.tolist(), tok.bos_token_id) / ids.numel()
    for block_size, batch_size in [(1, 7), (4, 3), (100, 2)]:
        r = evaluate_lm(model, toy_texts, tok, block_size=block_size, batch_size=batch_size)
        assert r["num_tokens"] == ids.numel() == num_words
        assert r["loss"] == pytest.approx(expected, rel=1e-5)
        assert r["perplexity"] == pytest.approx(math.exp(expected), rel=1e-5)
    assert r["num_unk"] == int((ids == 0).sum()) == 2


def test_evaluate_lm_rejects_a_datasetdict(toy_texts):
    from datasets import Dataset, DatasetDict

    tok = train_word_level_tokenizer(toy_texts)
    model = NPLMForCausalLM(NPLMConfig(vocab_size=len(tok), context_size=2, embedding_size=3, hidden_size=2))
    dd = DatasetDict({"test": Dataset.from_dict({"text": toy_texts})})
    with pytest.raises(TypeError, match="one split"):
        evaluate_lm(model, dd, tok)
    with pytest.raises(KeyError, match="sentence"):
        evaluate_lm(model, dd["test"], tok, text_column="sentence")
    assert (evaluate_lm(model, dd["test"], tok)["num_tokens"]
            == build_lm_dataset(toy_texts, tok, 8, 2)[1]["num_tokens"])
