"""Tests of the BPE and WordPiece tokenizers of hf_nlm.tokenization.subword."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from hf_nlm.tokenization.subword import train_bpe_tokenizer, train_wordpiece_tokenizer

CORPUS = [
    "The company said its profit rose 3.5% to $1,234 million in 1989.",
    "Shares fell 42 cents to $18.50 , while the index lost -0.7 points.",
    '"We expect growth," the chairman said ; analysts weren\'t so sure.',
    "the <unk> of the year was (roughly) 12,000 units , up from 9,870.",
    "In 2024 the rate was 1/3 of what it was in 1999: about 0.33 .",
    "Profit, revenue and shares: all rose in the third quarter!",
]
TRAIN = CORPUS * 4

TRAINERS = {"bpe": train_bpe_tokenizer, "wordpiece": train_wordpiece_tokenizer}


def normalise(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module", params=sorted(TRAINERS))
def kind(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def tokenizer(kind) -> PreTrainedTokenizerFast:
    return TRAINERS[kind](TRAIN, vocab_size=150, show_progress=False)


def alphabet(texts: list[str]) -> set[str]:
    return {char for text in texts for char in text if not char.isspace()}


def test_special_token_convention(tokenizer):
    assert isinstance(tokenizer, PreTrainedTokenizerFast)
    assert tokenizer.convert_tokens_to_ids(["<unk>", "<eos>"]) == [0, 1]
    assert tokenizer.unk_token_id == 0
    assert tokenizer.eos_token_id == tokenizer.bos_token_id == tokenizer.pad_token_id == 1
    # Encoding adds nothing: the LM data code appends <eos> itself.
    assert tokenizer.encode("") == []
    ids = tokenizer.encode("the profit")
    assert 1 not in ids and tokenizer.convert_ids_to_tokens(ids)[0] != "<eos>"
    assert tokenizer.encode("the profit <eos>")[-1] == 1


@pytest.mark.parametrize(
    "text",
    [
        "The company said its profit rose 3.5% to $1,234 million in 1989.",
        "  shares   rose\t42 cents ,\n to $18.50 (roughly) !  ",
        '"We expect 12,000 units," analysts said; 0.33 -0.7 1/3 in 2024: weren\'t',
        "9870 1999 . , ; : ! ( ) $ %",
    ],
)
def test_decode_inverts_encode_up_to_whitespace(tokenizer, text):
    assert tokenizer.decode(tokenizer.encode(text)).lstrip() == normalise(text)


def test_literal_special_tokens_keep_their_ids_and_decode_as_words(tokenizer):
    text = "the <unk> of the year <eos> profit"
    ids = tokenizer.encode(text)
    assert ids.count(0) == 1 and ids.count(1) == 1
    assert tokenizer.decode(ids).lstrip() == text
    assert tokenizer.decode(ids, skip_special_tokens=True).lstrip() == "the of the year profit"


def test_pieces_never_cross_whitespace(tokenizer):
    # Pre-tokenization splits on whitespace, so a line encodes as its words encoded one by one.
    for line in CORPUS:
        by_word = [i for word in line.split() for i in tokenizer.encode(word)]
        assert tokenizer.encode(line) == by_word


def test_subwords_are_learned(tokenizer, kind):
    tokens = tokenizer.tokenize("the profit rose")
    marker = "\u2581" if kind == "bpe" else ""
    assert f"{marker}the" in tokens  # a frequent word is one piece
    assert len(tokens) < len("theprofitrose")


def test_vocab_size_is_respected(kind):
    for vocab_size in (110, 150, 200):
        tokenizer = TRAINERS[kind](TRAIN, vocab_size=vocab_size, show_progress=False)
        assert len(tokenizer) == len(tokenizer.get_vocab()) == vocab_size
        assert sorted(tokenizer.get_vocab().values()) == list(range(vocab_size))


def test_alphabet_only_vocabulary_when_nothing_is_frequent_enough(kind):
    # No pair occurs 10**6 times: the vocabulary is the special tokens plus the characters,
    # BPE adding its word marker and WordPiece a "##" copy of every character.
    tokenizer = TRAINERS[kind](TRAIN, vocab_size=1000, min_frequency=10**6, show_progress=False)
    chars = alphabet(TRAIN)
    expected = {"<unk>", "<eos>"} | chars | ({"\u2581"} if kind == "bpe" else {f"##{c}" for c in chars})
    assert set(tokenizer.get_vocab()) == expected


def test_unknown_characters_become_unk(tokenizer, kind):
    ids = tokenizer.encode("profit ü rose")
    assert ids.count(0) == 1
    assert tokenizer.decode(ids).lstrip() == "profit <unk> rose"
    inside_word = tokenizer.encode("profüt")
    if kind == "wordpiece":
        assert inside_word == [0]  # WordPiece gives up on the whole word
    else:
        assert 0 in inside_word and len(inside_word) > 1  # BPE keeps the known characters


def test_lowercase(kind):
    tokenizer = TRAINERS[kind](TRAIN, vocab_size=150, lowercase=True, show_progress=False)
    assert all(token == token.lower() for token in tokenizer.get_vocab())
    assert tokenizer.encode("THE Profit Rose") == tokenizer.encode("the profit rose")
    assert tokenizer.decode(tokenizer.encode("The  Company said 3.5%")).lstrip() == "the company said 3.5%"


def test_training_is_deterministic(kind, tokenizer):
    # Many merges tie in count on this repetitive corpus; ties must not be broken by hash order.
    again = [TRAINERS[kind](TRAIN, vocab_size=150, show_progress=False) for _ in range(3)]
    from_generator = TRAINERS[kind]((line for line in TRAIN), vocab_size=150, show_progress=False)
    for other in [*again, from_generator]:
        assert other.get_vocab() == tokenizer.get_vocab()
        assert other.backend_tokenizer.to_str() == tokenizer.backend_tokenizer.to_str()


def test_save_pretrained_and_auto_tokenizer_round_trip(tokenizer, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tokenizer.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    texts = [*CORPUS, "the <unk> profit <eos> ü 3.14"]
    assert reloaded(texts)["input_ids"] == tokenizer(texts)["input_ids"]
    assert reloaded.get_vocab() == tokenizer.get_vocab()
    special_ids = (reloaded.unk_token_id, reloaded.eos_token_id, reloaded.bos_token_id, reloaded.pad_token_id)
    assert special_ids == (0, 1, 1, 1)
    ids = reloaded.encode(CORPUS[0])
    assert reloaded.decode(ids) == tokenizer.decode(ids)
    assert tokenizer.decode(ids).lstrip() == normalise(CORPUS[0])
    short, long = "the profit", CORPUS[0]
    batch = reloaded([short, long], padding=True)
    num_short = len(reloaded.encode(short))
    assert batch["input_ids"][0][num_short:] == [1] * (len(batch["input_ids"][1]) - num_short)  # <eos> pads
    assert batch["attention_mask"][0][num_short:] == [0] * (len(batch["input_ids"][1]) - num_short)


@pytest.mark.parametrize("vocab_size", [2, 10])
def test_too_small_vocab_size_is_an_error(kind, vocab_size):
    with pytest.raises(ValueError, match="vocab_size"):
        TRAINERS[kind](TRAIN, vocab_size=vocab_size, show_progress=False)


def test_too_small_vocab_size_error_names_the_minimum(kind):
    num_chars = len(alphabet(TRAIN))
    minimum = 2 + num_chars + 1 if kind == "bpe" else 2 + 2 * num_chars  # specials + chars + ▁ or ##chars
    with pytest.raises(ValueError, match=f"vocab_size >= {minimum}"):
        TRAINERS[kind](TRAIN, vocab_size=minimum - 1, show_progress=False)
    assert len(TRAINERS[kind](TRAIN, vocab_size=minimum, show_progress=False)) == minimum


@pytest.mark.parametrize("texts", [[], ["", "   ", "\n\t"]])
def test_empty_training_text_is_an_error(kind, texts):
    with pytest.raises(ValueError, match="empty"):
        TRAINERS[kind](texts, vocab_size=100, show_progress=False)


def test_bad_arguments(kind):
    with pytest.raises(TypeError, match="not a single string"):
        TRAINERS[kind]("the profit rose", vocab_size=100)
    with pytest.raises(ValueError, match="min_frequency"):
        TRAINERS[kind](TRAIN, vocab_size=100, min_frequency=0)


def test_a_continuation_decoded_alone_appends_to_its_prompt(tokenizer):
    # pipeline("text-generation") returns prompt_text + decode(new ids): the space must come with the new ids.
    prompt, full = "the company", "the company said profit rose"
    n = len(tokenizer.encode(prompt))
    ids = tokenizer.encode(full)
    assert prompt + tokenizer.decode(ids[n:]) == normalise(full)
