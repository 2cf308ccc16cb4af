"""Numerals in the data (Spithourakis & Riedel 2018): the recogniser's policy, the words-and-numerals
vocabulary with its two unknown tokens on every encoding path, saving and loading, decoding, and
the per-token numeral fields through streams, blocks, columns, shards and ``datasets.map``."""

from __future__ import annotations

import copy
import logging
import math
import pickle
import unicodedata

import datasets
import pytest
import torch
from transformers import AutoConfig, AutoTokenizer, GenerationConfig, PretrainedConfig, pipeline

import hf_nlm
from hf_nlm import NPLMConfig, NPLMForCausalLM
from hf_nlm.data import IGNORE_INDEX, StreamBatches, group_into_blocks, stream_columns, tokenize_stream
from hf_nlm.tokenization import (
    NUMERAL_FILL,
    NumeracyTokenizerFast,
    parse_numeral,
    register_numeracy_tokenizer,
    train_numeracy_tokenizer,
)
from hf_nlm.tokenization.numerals import (
    DIGIT_END,
    DIGIT_PAD,
    DIGITS_WIDTH,
    MAX_NUMERAL_LENGTH,
    decode_digits,
    encode_digits,
    numeracy_normalizer,
    numeracy_pre_tokenizer,
)

# ----------------------------------------------------------------------------- the policy table

# text -> its tokens, and for each numeral token (canonical, value, precision); None for a word.
POLICY = {
    "12": [("12", ("12", 12.0, 0))],
    "2.50": [("2.50", ("2.50", 2.5, 2))],
    "00012.500": [("00012.500", ("00012.500", 12.5, 3))],
    ".5": [(".5", (".5", 0.5, 1))],
    "1,200": [("1,200", ("1200", 1200.0, 0))],
    "1,234,567.25": [("1,234,567.25", ("1234567.25", 1234567.25, 2))],
    "1,2,3": [("1", ("1", 1.0, 0)), (",", None), ("2", ("2", 2.0, 0)), (",", None), ("3", ("3", 3.0, 0))],
    "1,2345": [("1", ("1", 1.0, 0)), (",", None), ("2345", ("2345", 2345.0, 0))],
    "-5": [("-5", ("-5", -5.0, 0))],
    "−5": [("−5", ("-5", -5.0, 0))],
    "+5": [("+5", ("5", 5.0, 0))],
    "-0": [("-0", ("-0", 0.0, 0))],
    "(-3.5)": [("(", None), ("-3.5", ("-3.5", -3.5, 1)), (")", None)],
    "10-20": [("10", ("10", 10.0, 0)), ("-", None), ("20", ("20", 20.0, 0))],
    "2019-01-05": [("2019", ("2019", 2019.0, 0)), ("-", None), ("01", ("01", 1.0, 0)), ("-", None),
                   ("05", ("05", 5.0, 0))],
    "10:30": [("10", ("10", 10.0, 0)), (":", None), ("30", ("30", 30.0, 0))],
    "1989": [("1989", ("1989", 1989.0, 0))],
    "5%": [("5", ("5", 5.0, 0)), ("%", None)],
    "$5.00": [("$", None), ("5.00", ("5.00", 5.0, 2))],
    "5.": [("5", ("5", 5.0, 0)), (".", None)],
    "３": [("３", ("3", 3.0, 0))],
    "1st": [("1st", None)],
    "2nd": [("2nd", None)],
    "5kg": [("5kg", None)],
    "COVID-19": [("COVID-19", None)],
    "x-5": [("x-5", None)],
    "1e400": [("1e400", None)],
    "NaN": [("NaN", None)],
    "inf": [("inf", None)],
    "1.2.3": [("1.2.3", None)],
    "٣": [("٣", None)],
    "cat, 3.": [("cat,", None), ("3", ("3", 3.0, 0)), (".", None)],
    "": [],
}


def pieces(text: str) -> list[str]:
    """The tokens the tokenizer's pipeline cuts ``text`` into, as written in ``text``."""
    normal = numeracy_normalizer().normalize_str(text)
    assert len(normal) == len(text), "NFKC changed the length: the offsets below would not map back"
    return [text[start:end] for _, (start, end) in numeracy_pre_tokenizer().pre_tokenize_str(normal)]


def described(token: str):
    numeral = parse_numeral(token)
    return None if numeral is None else (numeral.canonical, numeral.value, numeral.precision)


@pytest.mark.parametrize("text", list(POLICY))
def test_policy_table(text):
    expected = POLICY[text]
    assert pieces(text) == [token for token, _ in expected]
    assert [described(token) for token in pieces(text)] == [numeral for _, numeral in expected]
    for token, numeral in expected:
        if numeral is not None:
            assert parse_numeral(token).text == token  # the exact original string is kept


def test_bad_inputs_are_words_or_numerals_never_errors():
    assert parse_numeral("") is None
    assert parse_numeral(" 5") is None  # one token has no whitespace
    assert math.copysign(1.0, parse_numeral("-0").value) == 1.0  # 0.0, not -0.0
    assert parse_numeral("-0.00").value == 0.0 and parse_numeral("-0.00").precision == 2
    huge = "9" * 300
    assert parse_numeral(huge) is None and pieces(huge) == [huge]  # a word, not inf
    longest = "9" * MAX_NUMERAL_LENGTH
    assert parse_numeral(longest).value == float(longest) and parse_numeral(longest + "9") is None
    assert parse_numeral("-" + "9" * (MAX_NUMERAL_LENGTH - 1)) is not None  # the sign is one of the symbols
    assert parse_numeral("-" + "9" * MAX_NUMERAL_LENGTH) is None
    assert parse_numeral("1,000," + "0" * 60) is None
    for word in ("1,2,3", "1e400", "NaN", "nan", "inf", "-inf", "1st", "12.", "1,23", "--5", "٣", "five"):
        assert parse_numeral(word) is None, word
    assert parse_numeral("１２．５").canonical == "12.5"  # full-width digits and point (NFKC)


def test_every_piece_is_a_numeral_or_a_word_and_numerals_are_finite():
    text = (
        "On 2019-01-05 at 10:30, 1,200 (−3.5%) of 9,87,654 x-5 -7 COVID-19 1.2.3 5. $5.00 1st "
        "+4 [-0] {.25} 1,234,56 1,234.5.6 ３４ 1e400 x=-5 a.5 1/2 " + "9" * 300
    )
    for token in pieces(text):
        numeral = parse_numeral(token)
        if numeral is not None:
            assert math.isfinite(numeral.value) and len(numeral.canonical) <= MAX_NUMERAL_LENGTH
            assert decode_digits(encode_digits(numeral.canonical)) == numeral.canonical
            # The value is the canonical string's number, which is the written one without commas.
            assert numeral.value == float(unicodedata.normalize("NFKC", token).replace(",", "")
                                          .replace("−", "-"))


def test_digit_alphabet_is_unchanged():
    assert encode_digits("-2.5", width=6) == [11, 2, 10, 5, DIGIT_END, DIGIT_PAD]
    assert (DIGIT_END, DIGIT_PAD, DIGITS_WIDTH) == (12, 13, 25)


# ----------------------------------------------------------------------------- the vocabulary

RANKING = ["a b 1 1", "b 1 2.5 c", "1 b"]  # 1: 4, b: 3, then 2.5, a, c once each


def test_vocabulary_is_frequency_ranked_with_alphabetical_ties_after_the_specials():
    tokenizer = train_numeracy_tokenizer(RANKING)
    vocab = tokenizer.get_vocab()
    assert sorted(vocab, key=vocab.get) == ["<unk_word>", "<eos>", "<unk_num>", "1", "b", "2.5", "a", "c"]
    assert (tokenizer.unk_token, tokenizer.eos_token, tokenizer.bos_token, tokenizer.pad_token) == (
        "<unk_word>", "<eos>", "<eos>", "<eos>")
    assert (tokenizer.unk_word_token_id, tokenizer.eos_token_id, tokenizer.unk_num_token_id) == (0, 1, 2)
    assert tokenizer.numeral_vocab == {"1": 3, "2.5": 5, "<unk_num>": 2}


def test_top_k_cut_counts_the_specials_and_min_frequency():
    top = train_numeracy_tokenizer(RANKING, max_vocab_size=6)
    assert len(top) == 6 and list(top.get_vocab()) != [] and "a" not in top.get_vocab()
    assert top("a 2.5 c 7 1")["input_ids"] == [0, 5, 0, 2, 3]
    frequent = train_numeracy_tokenizer(RANKING, min_frequency=2)
    assert sorted(frequent.get_vocab(), key=frequent.get_vocab().get)[3:] == ["1", "b"]
    assert frequent("2.5 a")["input_ids"] == [2, 0]
    with pytest.raises(ValueError, match="special tokens"):
        train_numeracy_tokenizer(RANKING, max_vocab_size=3)
    with pytest.raises(ValueError, match="empty"):
        train_numeracy_tokenizer(["", "   "])


def test_lowercase_and_nfkc_apply_when_counting_and_encoding():
    tokenizer = train_numeracy_tokenizer(["The 3 cats", "the ３ dogs"], lowercase=True)
    vocab = tokenizer.get_vocab()
    # twice each, "3" < "the"
    assert vocab["3"] == 3 and vocab["the"] == 4 and "The" not in vocab and "３" not in vocab
    assert tokenizer("THE ３ Cats")["input_ids"] == [4, 3, vocab["cats"]]


# ----------------------------------------------------------------------------- OOV words vs OOV numerals

TRAIN = [
    "the price rose 5 % to $ 12.50 in 2019 .",
    "the price fell 5 % to $ 3 in 2018 .",
    "the cat sat on 2 mats",
]
PROMPT = "the zebra paid 7,000 or 5 or -3 , then ３ and 1e400"
# the, <unk_word> (zebra), <unk_word> (paid), <unk_num> (7,000), <unk_word> (or), 5, <unk_word>,
# <unk_num> (-3), <unk_word> (","), <unk_word> (then), 3 (３ after NFKC), <unk_word> (and), <unk_word> (1e400)


@pytest.fixture(scope="module")
def tokenizer() -> NumeracyTokenizerFast:
    return train_numeracy_tokenizer(TRAIN)


def expected_ids(tokenizer, text: str) -> list[int]:
    """Brute force: every token's text on its own, looked up in the vocabulary."""
    vocab = tokenizer.get_vocab()
    out = []
    for token in pieces(text):
        key = unicodedata.normalize("NFKC", token)
        if key in vocab:
            out.append(vocab[key])
        else:
            out.append(tokenizer.unk_num_token_id if parse_numeral(token) else tokenizer.unk_word_token_id)
    return out


def test_prompt_expectation_is_hand_worked(tokenizer):
    v = tokenizer.get_vocab()
    assert expected_ids(tokenizer, PROMPT) == [v["the"], 0, 0, 2, 0, v["5"], 0, 2, 0, 0, v["3"], 0, 0]


def test_every_encoding_path_gives_unk_num_for_unknown_numerals(tokenizer):
    want = expected_ids(tokenizer, PROMPT)
    assert tokenizer(PROMPT)["input_ids"] == want
    assert tokenizer.encode(PROMPT) == want
    assert tokenizer([PROMPT, "zebra 99"])["input_ids"] == [want, [0, 2]]
    with_offsets = tokenizer(PROMPT, return_offsets_mapping=True)
    assert with_offsets["input_ids"] == want
    assert [PROMPT[a:b] for a, b in with_offsets["offset_mapping"]] == pieces(PROMPT)
    assert tokenizer(PROMPT, return_tensors="pt")["input_ids"].tolist() == [want]
    padded = tokenizer([PROMPT, "zebra 99"], padding=True, return_tensors="np")["input_ids"]
    assert padded.tolist() == [want, [0, 2] + [tokenizer.pad_token_id] * (len(want) - 2)]
    left = tokenizer(["zebra 99", PROMPT], padding=True, padding_side="left")["input_ids"]
    assert left[0][-2:] == [0, 2] and left[1] == want
    assert tokenizer(PROMPT.split(), is_split_into_words=True)["input_ids"] == want
    assert tokenizer("zebra 99", "4 mats")["input_ids"] == [0, 2, 2, tokenizer.get_vocab()["mats"]]
    overflow = tokenizer([PROMPT], max_length=4, truncation=True, stride=0, return_overflowing_tokens=True)
    assert [i for row in overflow["input_ids"] for i in row] == want
    assert tokenizer.tokenize("zebra 99") == ["<unk_word>", "<unk_num>"]
    assert tokenizer.convert_tokens_to_ids(["zebra", "99", "5"]) == [0, 2, tokenizer.get_vocab()["5"]]
    assert tokenizer._encode_without_added_tokens(PROMPT) == want
    assert tokenizer("")["input_ids"] == [] and tokenizer(["", PROMPT])["input_ids"] == [[], want]


def tiny_nplm(tokenizer, favourite: int) -> NPLMForCausalLM:
    """A model that always predicts ``favourite`` (its output bias dwarfs everything else), searched plainly:
    transformers' generation config for its config, without the package's settings (no repeated 3-gram, no
    ``<unk>``), which would refuse the favourite the test asks for."""
    torch.manual_seed(0)
    model = NPLMForCausalLM(NPLMConfig(vocab_size=len(tokenizer), context_size=2, embedding_size=4,
                                       hidden_size=4))
    model.generation_config = GenerationConfig.from_model_config(model.config)
    with torch.no_grad():
        model.lm_head.bias.fill_(-100.0)
        model.lm_head.bias[favourite] = 100.0
    return model.eval()


def test_pipeline_encodes_unknown_numerals_and_shows_generated_unknowns(tokenizer):
    # A copy: the pipeline sets its tokenizer's padding side, which the module's other tests read.
    tokenizer = copy.deepcopy(tokenizer)
    for favourite, shown in ((tokenizer.unk_num_token_id, "<unk_num>"),
                             (tokenizer.unk_word_token_id, "<unk_word>")):
        generator = pipeline("text-generation", model=tiny_nplm(tokenizer, favourite), tokenizer=tokenizer)
        assert generator.preprocess(PROMPT)["input_ids"].tolist() == [expected_ids(tokenizer, PROMPT)]
        out = generator(PROMPT, max_new_tokens=2, do_sample=False, return_full_text=False)
        assert out[0]["generated_text"] == f" {shown} {shown}"


def test_decode_shows_both_unknown_tokens_and_drops_other_specials(tokenizer):
    ids = tokenizer.encode("the zebra 99") + [tokenizer.eos_token_id]
    assert tokenizer.decode(ids) == " the <unk_word> <unk_num> <eos>"
    assert tokenizer.decode(ids, skip_special_tokens=True) == " the <unk_word> <unk_num>"
    assert tokenizer.batch_decode([ids], skip_special_tokens=True) == [" the <unk_word> <unk_num>"]
    assert tokenizer.convert_ids_to_tokens(ids, skip_special_tokens=True) == ["the", "<unk_word>",
                                                                              "<unk_num>"]
    # unknowns re-encode as themselves
    assert tokenizer.encode(tokenizer.decode(ids, skip_special_tokens=True)) == ids[:-1]


# ----------------------------------------------------------------------------- save, load, pickle


def test_save_and_load_through_auto_tokenizer_offline(tokenizer, tmp_path):
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert type(loaded) is NumeracyTokenizerFast and loaded.token_features is tokenizer.token_features
    assert loaded.get_vocab() == tokenizer.get_vocab() and loaded.numeral_vocab == tokenizer.numeral_vocab
    assert loaded(PROMPT)["input_ids"] == tokenizer(PROMPT)["input_ids"]
    assert loaded.decode([0, 2, 1], skip_special_tokens=True) == " <unk_word> <unk_num>"
    assert hf_nlm.tokenization.NumeracyTokenizerFast is NumeracyTokenizerFast


class NumeracyDummyConfig(PretrainedConfig):
    model_type = "numeracy-dummy-for-tests"


def test_registration_with_a_model_config_class(tokenizer, tmp_path):
    AutoConfig.register(NumeracyDummyConfig.model_type, NumeracyDummyConfig, exist_ok=True)
    register_numeracy_tokenizer(NumeracyDummyConfig)
    NumeracyDummyConfig().save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert type(loaded) is NumeracyTokenizerFast
    assert loaded("zebra 99")["input_ids"] == [0, 2]


def test_pickle_and_deepcopy_keep_the_behaviour(tokenizer):
    for clone in (pickle.loads(pickle.dumps(tokenizer)), copy.deepcopy(tokenizer)):
        assert type(clone) is NumeracyTokenizerFast
        assert clone(PROMPT)["input_ids"] == tokenizer(PROMPT)["input_ids"]
        assert clone.token_features is tokenizer.token_features


# ----------------------------------------------------------------------------- numeral fields in the data

TEXTS = [
    "the price rose 5 % to $ 12.50 in 2019 .",
    "",
    "the zebra paid 7,000 or -3 on 2019-01-05 at 10:30",
    "３ cats and 00012.500 mats , 1st of 1,2,3 and 1e400",
    "the price fell 5 % to $ 3",
]


def brute_force(tokenizer) -> dict[str, torch.Tensor]:
    """The stream built token by token, every token's fields from its own text: then <eos> and the fills."""
    rows = {name: [] for name in ("input_ids", *NUMERAL_FILL)}
    for line in TEXTS:
        for token, token_id in zip(pieces(line), expected_ids(tokenizer, line), strict=True):
            numeral = parse_numeral(token)
            rows["input_ids"].append(token_id)
            rows["numeral_mask"].append(numeral is not None)
            rows["numeral_value"].append(numeral.value if numeral else 0.0)
            rows["numeral_precision"].append(numeral.precision if numeral else 0)
            rows["digit_ids"].append(encode_digits(numeral.canonical) if numeral
                                     else [DIGIT_PAD] * DIGITS_WIDTH)
        rows["input_ids"].append(tokenizer.eos_token_id)
        for name, fill in NUMERAL_FILL.items():
            rows[name].append([fill] * DIGITS_WIDTH if name == "digit_ids" else fill)
    dtypes = {"input_ids": torch.long, "numeral_mask": torch.bool, "numeral_value": torch.float64,
              "numeral_precision": torch.long, "digit_ids": torch.int8}
    return {name: torch.tensor(values, dtype=dtypes[name]) for name, values in rows.items()}


def padded(values: torch.Tensor, front: int, back: int, fill) -> torch.Tensor:
    return torch.cat([values.new_full((front, *values.shape[1:]), fill), values,
                      values.new_full((back, *values.shape[1:]), fill)])


@pytest.fixture(scope="module")
def data_tokenizer() -> NumeracyTokenizerFast:
    return train_numeracy_tokenizer(TEXTS, min_frequency=2)  # 7,000, -3, 12.50, ... are <unk_num>


def test_stream_fields_match_a_brute_force_over_the_text(data_tokenizer):
    stream, _ = tokenize_stream(TEXTS, data_tokenizer)
    expected = brute_force(data_tokenizer)
    assert set(stream) == set(expected)
    for name, values in expected.items():
        assert stream[name].dtype == values.dtype and torch.equal(stream[name], values), name
    ids = stream["input_ids"]
    assert ((ids == data_tokenizer.unk_num_token_id).sum() >= 5
            and (ids == data_tokenizer.unk_word_token_id).any())
    # An <unk_num> kept its value: the fields came from the text, not the id.
    unknown = ids == data_tokenizer.unk_num_token_id
    assert stream["numeral_mask"][unknown].all() and -3.0 in stream["numeral_value"][unknown].tolist()
    # A token is a numeral exactly when its id is one of the numeral vocabulary's.
    numeral_ids = torch.tensor(sorted(data_tokenizer.numeral_vocab.values()))
    assert torch.equal(stream["numeral_mask"], torch.isin(ids, numeral_ids))


@pytest.mark.parametrize("block_size, context_size", [(1, 2), (4, 1), (7, 3)])
def test_fields_stay_aligned_through_blocks(data_tokenizer, block_size, context_size):
    stream, _ = tokenize_stream(TEXTS, data_tokenizer)
    blocks = group_into_blocks(stream, block_size, context_size, data_tokenizer.eos_token_id,
                               fill=NUMERAL_FILL)
    expected = brute_force(data_tokenizer)
    n, width = len(expected["input_ids"]), context_size + block_size
    tail = blocks["input_ids"].shape[0] * block_size - n
    for name, fill in NUMERAL_FILL.items():
        full = padded(expected[name], context_size, tail, fill)
        want = torch.stack([full[b * block_size : b * block_size + width]
                            for b in range(len(blocks["labels"]))])
        assert torch.equal(blocks[name], want), name
    targets = blocks["labels"] != IGNORE_INDEX
    assert torch.equal(blocks["labels"][targets], expected["input_ids"])
    for name in NUMERAL_FILL:
        assert torch.equal(blocks[name][targets], expected[name]), name


@pytest.mark.parametrize("num_columns", [1, 3])
def test_fields_stay_aligned_through_stream_columns(data_tokenizer, num_columns):
    stream, _ = tokenize_stream(TEXTS, data_tokenizer)
    columns = stream_columns(stream, num_columns, data_tokenizer.eos_token_id, fill=NUMERAL_FILL)
    expected = brute_force(data_tokenizer)
    n, length = len(expected["input_ids"]), columns.length
    for name, fill in NUMERAL_FILL.items():
        want = padded(expected[name], 0, num_columns * length - n, fill).view(num_columns, length,
                                                                              *expected[name].shape[1:])
        assert torch.equal(columns.extras[name], want), name
    chunk = columns.chunk(2, 5)
    keep = chunk["shift_labels"] != IGNORE_INDEX
    targets = torch.arange(num_columns * length).view(num_columns, length)[:, 2:7][keep]
    assert torch.equal(chunk["shift_labels"][keep], expected["input_ids"][targets])
    for name in NUMERAL_FILL:
        assert torch.equal(chunk[name][keep], expected[name][targets]), name


#: Lines for encoding in slices: numerals and words, lines without a numeral, lines without a token.
SLICED_TEXTS = ["", *TEXTS, "   ", "no numeral in this line", "", "", "1989 and 42", "words only"]


@pytest.mark.parametrize("add_eos", [True, False])
@pytest.mark.parametrize("slice_lines", [1, 2, 3, 4, 7])
def test_stream_encoded_in_slices_equals_the_stream_encoded_at_once(data_tokenizer, slice_lines, add_eos):
    """Slices of lines (what bounds the memory of encoding a long split) give the stream of one pass over
    every line, value for value and dtype for dtype, wherever the slices start: on an empty line, a run of
    empty lines (a slice without any token), a line without numerals; with and without the <eos> rows."""
    whole, words = tokenize_stream(SLICED_TEXTS, data_tokenizer, add_eos=add_eos,
                                   slice_lines=len(SLICED_TEXTS))
    sliced, sliced_words = tokenize_stream(SLICED_TEXTS, data_tokenizer, add_eos=add_eos,
                                           slice_lines=slice_lines)
    assert sliced_words == words and set(sliced) == set(whole) == {"input_ids", *NUMERAL_FILL}
    for name, values in whole.items():
        assert sliced[name].dtype == values.dtype and torch.equal(sliced[name], values), name
    if add_eos:  # the <eos> rows hold the fill values
        eos = whole["input_ids"] == data_tokenizer.eos_token_id
        assert int(eos.sum()) == len(SLICED_TEXTS)
        assert (whole["digit_ids"][eos] == DIGIT_PAD).all() and not whole["numeral_mask"][eos].any()


def test_stream_in_slices_matches_the_brute_force(data_tokenizer):
    stream, _ = tokenize_stream(TEXTS, data_tokenizer, slice_lines=2)
    for name, values in brute_force(data_tokenizer).items():
        assert stream[name].dtype == values.dtype and torch.equal(stream[name], values), name


@pytest.mark.parametrize("slice_lines", [1, 2, 5])
def test_stream_without_any_token_is_the_same_in_slices(data_tokenizer, slice_lines):
    """No line has a token: the fields' rows have no known shape, each is one fill value per <eos>."""
    blank = ["", "   ", "", "\t"]
    whole, _ = tokenize_stream(blank, data_tokenizer, slice_lines=len(blank))
    sliced, _ = tokenize_stream(blank, data_tokenizer, slice_lines=slice_lines)
    assert whole["input_ids"].tolist() == [data_tokenizer.eos_token_id] * len(blank)
    for name, values in whole.items():
        assert sliced[name].dtype == values.dtype and torch.equal(sliced[name], values), name
    assert whole["digit_ids"].tolist() == [DIGIT_PAD] * len(blank)


def test_slice_lines_must_be_positive(data_tokenizer):
    with pytest.raises(ValueError, match="slice_lines"):
        tokenize_stream(TEXTS, data_tokenizer, slice_lines=0)


def test_two_process_shards_are_the_columns_of_one(data_tokenizer):
    stream, _ = tokenize_stream(TEXTS, data_tokenizer)
    eos = data_tokenizer.eos_token_id
    one = StreamBatches(stream, eos, 4, bptt=3, fill=NUMERAL_FILL)
    two = [StreamBatches(stream, eos, 2, 3, 2, p, fill=NUMERAL_FILL) for p in range(2)]
    for whole, *shares in zip(one.epoch(0), *(t.epoch(0) for t in two), strict=True):
        for name in ("input_ids", "shift_labels", *NUMERAL_FILL):
            assert torch.equal(torch.cat([share[0][name] for share in shares]), whole[0][name]), name
    usable = len(stream["input_ids"]) - one.num_dropped
    expected = brute_force(data_tokenizer)
    for name in NUMERAL_FILL:
        assert torch.equal(one.columns.extras[name].flatten(0, 1), expected[name][:usable]), name


class _Messages(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def map_hash_failures(dataset, function) -> tuple[datasets.Dataset, list[str]]:
    """``dataset.map(function, batched=True)`` and the "couldn't be hashed" messages the datasets library
    logged meanwhile (a warning the first time in a process, at INFO level afterwards: both are caught)."""
    handler, logger = _Messages(), logging.getLogger("datasets")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        mapped = dataset.map(function, batched=True, remove_columns=["text"])
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return mapped, [m for m in handler.messages if "couldn't be hashed" in m]


def test_datasets_map_fingerprints_the_tokenizer_and_keeps_the_fields(data_tokenizer):
    tokenizer = data_tokenizer

    def encode(batch):
        encoded = tokenizer(batch["text"], return_offsets_mapping=True)
        rows = [tokenizer.token_features(t, s)
                for t, s in zip(batch["text"], encoded["offset_mapping"], strict=True)]
        return {"input_ids": encoded["input_ids"],
                **{name: [row[name] for row in rows] for name in NUMERAL_FILL}}

    dataset = datasets.Dataset.from_dict({"text": TEXTS})
    mapped, failures = map_hash_failures(dataset, encode)
    assert failures == []
    again, _ = map_hash_failures(dataset, encode)
    assert again._fingerprint == mapped._fingerprint  # a deterministic hash, not a random one
    expected = brute_force(tokenizer)
    tokens = expected["input_ids"] != tokenizer.eos_token_id  # the brute force's rows without the <eos> ones
    for name in ("input_ids", *NUMERAL_FILL):
        got = torch.tensor([token for row in mapped[name] for token in row], dtype=expected[name].dtype)
        assert torch.equal(got, expected[name][tokens]), name

    # The check can fail: a transform that cannot be pickled (it uses a generator) is reported.
    counter = (i for i in range(10**6))

    def unhashable(batch):
        next(counter)
        return encode(batch)

    first, failures = map_hash_failures(dataset, unhashable)
    second, _ = map_hash_failures(dataset, unhashable)
    assert failures and first._fingerprint != second._fingerprint


def test_characters_nfkc_would_expand_keep_their_own_text():
    """``½`` is one word (NFKC would make it three pieces, ``1 ⁄ 2``, all pointing at one character,
    so the numeral fields and OOV types would be read from the wrong text)."""
    tokenizer = train_numeracy_tokenizer(["1 and 2 are numbers"])
    text = "½ of 1 and ２"
    encoded = tokenizer(text, return_offsets_mapping=True)
    assert [text[a:b] for a, b in encoded["offset_mapping"]] == ["½", "of", "1", "and", "２"]
    assert tokenizer.convert_ids_to_tokens(encoded["input_ids"]) == ["<unk_word>", "<unk_word>", "1", "and",
                                                                     "2"]
    features = tokenizer.token_features(text, encoded["offset_mapping"])
    assert features["numeral_mask"].tolist() == [False, False, True, False, True]
