"""Decoded text reads like the text that was encoded: the word-level and numeracy tokenizers cut punctuation
off words, and their decoder (hf_nlm.tokenization.detokenizer) puts the spaces back as English writes them;
BPE and WordPiece cut only at whitespace and give the text back as it was; a word-level tokenizer of text
tokenized already decodes to its tokens joined by spaces. Every decode starts with a space (a continuation
decoded alone appends to its prompt), so ``decode(encode(raw)) == " " + raw``, except a text whose ids start
at a sentence boundary (``<eos>``)."""

from __future__ import annotations

import pytest
import torch
from tokenizers import Regex, Tokenizer, decoders
from transformers import AutoTokenizer, pipeline

from hf_nlm import NPLMConfig, NPLMForCausalLM
from hf_nlm.tokenization import (
    train_bpe_tokenizer,
    train_numeracy_tokenizer,
    train_word_level_tokenizer,
    train_wordpiece_tokenizer,
)
from hf_nlm.tokenization.decoding import decode_generated
from hf_nlm.tokenization.detokenizer import word_decoder
from hf_nlm.tokenization.word_level import NLMTokenizerFast

#: Raw English that every tokenizer gives back as written.
RAW = [
    'He said "no," and left.',
    "It isn't the company's fault (or is it?).",
    "Sales rose 5.5% to $1,200.5 million in the U.S. last year; the rest [about 20%] went abroad!",
    "'Hello,' she said: 'it's fine.' They're sure we'll win, aren't they?",
    'The "best" plan -- she wrote -- was {A} or "B."',
    "Prices fell 3% in 1990, 12% in 1991 and 0.5% in 1992.",
]
#: Raw English where the word-level tokenizer keeps what the numeracy tokenizer cuts (a plural possessive,
#: an opening quote on its word).
WORD_LEVEL_RAW = ["The workers' union said 'no' to the 10-20 plan, didn't it?"]
#: ... and what the numeracy tokenizer cuts and joins again: numerals inside words and ranges.
NUMERACY_RAW = ["The mid-1990s saw 10-20 cases at 10:30 and/or 1/2 of the e-mails, e.g. COVID-19."]


def numeracy(texts):
    return train_numeracy_tokenizer(texts, split_punctuation=True)


TRAINERS = {
    "word_level": (lambda texts: train_word_level_tokenizer(texts, split_punctuation=True), WORD_LEVEL_RAW),
    "numeracy": (numeracy, NUMERACY_RAW),
    "bpe": (lambda texts: train_bpe_tokenizer(texts, vocab_size=300, min_frequency=1, show_progress=False),
            WORD_LEVEL_RAW + NUMERACY_RAW),
    "wordpiece": (lambda texts: train_wordpiece_tokenizer(texts, vocab_size=300, min_frequency=1,
                                                          show_progress=False),
                  WORD_LEVEL_RAW + NUMERACY_RAW),
}


@pytest.mark.parametrize("kind", list(TRAINERS))
def test_decode_gives_back_the_raw_text(kind):
    train, extra = TRAINERS[kind]
    texts = RAW + extra
    tokenizer = train(texts)
    for raw in texts:
        ids = tokenizer.encode(raw, add_special_tokens=False)
        assert tokenizer.unk_token_id not in ids
        assert tokenizer.decode(ids) == " " + raw


@pytest.mark.parametrize("kind", ["word_level", "numeracy"])
def test_the_punctuation_is_cut_from_the_words(kind):
    """The round trip above is no identity: the pre-tokenizer does cut the punctuation off."""
    tokenizer = TRAINERS[kind][0](RAW)
    tokens = tokenizer.tokenize(RAW[0])
    assert tokens[:4] == ["He", "said", '"', "no"] and tokens[-2:] == ["left", "."]


@pytest.mark.parametrize("tokens, text", [
    # Brown: `` and '' are double quotes, ' opens and closes single ones, -- is a dash; clitics stay on words
    ("`` we will not wait , '' the president said .", "``we will not wait,'' the president said."),
    ("more ' pro ' than ' con ' -- `` It's ' See Joe ' ''", "more 'pro' than 'con' -- ``It's 'See Joe'''"),
    # Penn Treebank: clitics are tokens
    ("it is n't the company 's fault ; they 're sure ( 5 % ) .",
     "it isn't the company's fault; they're sure (5%)."),
    ('he said " yes " and " no " : $ 5', 'he said "yes" and "no": $5'),
])
def test_tokenized_text_reads_as_running_text_with_the_word_decoder(tokens, text):
    """word_decoder() reads tokenized text as running text, for a user who sets it on such a tokenizer."""
    assert word_decoder().decode(tokens.split()) == " " + text


PTB = ["no it was n't black monday",
       "but while the new york stock exchange did n't fall apart friday as the dow jones industrial average "
       "plunged N points most of it in the final hour it barely managed to stay this side of chaos",
       "it is n't the company 's fault ; they 're sure ( 5 % ) .",
       "`` we will not wait , '' the president said $ 5 -- and <unk> left ."]


def test_a_tokenizer_of_tokenized_text_decodes_to_what_encodes_to_the_same_ids(tmp_path):
    """Penn Treebank is tokenized already (split_punctuation=False): decoding joins the tokens with single
    spaces, so generated text can be fed back, after a save and reload too (the decoder is in
    tokenizer.json)."""
    tokenizer = train_word_level_tokenizer(PTB, split_punctuation=False)
    tokenizer.save_pretrained(tmp_path)
    for loaded in (tokenizer, AutoTokenizer.from_pretrained(tmp_path),
                   NLMTokenizerFast.from_pretrained(tmp_path)):
        for text in PTB:
            ids = loaded.encode(text, add_special_tokens=False)
            decoded = loaded.decode(ids)
            assert decoded == " " + text, \
                f"{type(loaded).__name__}: decode(encode({text!r})) gave {decoded!r}"
            assert loaded.encode(decoded, add_special_tokens=False) == ids, \
                f"{type(loaded).__name__}: {decoded!r} encodes to other ids than it was decoded from"
    assert Tokenizer.from_file(str(tmp_path / "tokenizer.json")).decode(ids, skip_special_tokens=False) == \
        " " + PTB[-1]


def test_a_raw_text_tokenizer_keeps_its_readable_decoder():
    tokenizer = train_word_level_tokenizer(["Nation, said 'no'."] + RAW, split_punctuation=True)
    assert tokenizer.tokenize("Nation,") == ["Nation", ","]
    assert tokenizer.decode(tokenizer.encode("the Nation, it isn't (or is it?).")) == \
        " the Nation, it isn't (or is it?)."


def test_a_text_that_starts_at_a_sentence_boundary_has_no_space_around_it():
    """generate() output that starts with <eos> (an empty prompt, or one that starts a sentence) decodes
    without the space a continuation has in front; no decoded text ends with a space."""
    for tokenizer in (train_word_level_tokenizer(PTB),
                      train_word_level_tokenizer(RAW, split_punctuation=True), numeracy(RAW)):
        eos = tokenizer.eos_token_id
        words = [i for i in tokenizer.encode("it is n't the company", add_special_tokens=False)
                 if i not in tokenizer.all_special_ids]
        assert tokenizer.decode([eos, *words, eos], skip_special_tokens=True) == \
            tokenizer.decode(words).strip()
        assert not tokenizer.decode([eos, *words, eos], skip_special_tokens=True).startswith(" ")
        assert not tokenizer.decode([eos, *words, eos]).startswith(" ")
        assert not tokenizer.decode([eos, *words, eos]).endswith(" ")
        assert tokenizer.batch_decode([[eos, *words]], skip_special_tokens=True) == \
            [tokenizer.decode(words).strip()]
        # a continuation, as pipeline("text-generation") decodes it, keeps its space in front
        assert tokenizer.decode(words, skip_special_tokens=True).startswith(" ")


def test_a_quote_opens_or_closes_by_its_parity():
    decoder = word_decoder()
    for n in range(1, 7):  # n quoted words: every odd quote opens, every even one closes
        tokens = ["a", '"', "b", '"'] * n
        assert decoder.decode(tokens) == ' a "b"' * n
        assert decoder.decode(tokens[:-1]) == ' a "b"' * (n - 1) + ' a "b'  # an unclosed quote opens


@pytest.mark.parametrize("split_punctuation", [False, True])
@pytest.mark.parametrize("numerals", [False, True])
def test_only_a_whole_punctuation_token_attaches(split_punctuation, numerals):
    decoder = word_decoder(split_punctuation, numerals)
    assert decoder.decode(["was", ".5", ",", "'s", "...", "''", "(", ".8"]) == " was .5,'s...'' (.8"


def test_a_continuation_decoded_alone_attaches_to_its_prompt():
    decoder = word_decoder(True)
    assert decoder.decode(["and", "so"]) == " and so"
    assert decoder.decode([",", "and"]) == ", and"
    assert decoder.decode(["n't", "it"]) == "n't it"
    assert decoder.decode([")", "."]) == ")."


def test_the_decoder_is_saved_in_tokenizer_json(tmp_path):
    """transformers and tokenizers alone decode a saved tokenizer as ours does: no hf_nlm class takes part."""
    tokenizer = train_word_level_tokenizer(RAW, split_punctuation=True)
    tokenizer.save_pretrained(tmp_path)
    ids = tokenizer.encode(RAW[1], add_special_tokens=False)
    assert Tokenizer.from_file(str(tmp_path / "tokenizer.json")).decode(ids) == " " + RAW[1]
    assert AutoTokenizer.from_pretrained(tmp_path).decode(ids) == " " + RAW[1]


def test_a_tokenizer_saved_with_the_space_joining_decoder_decodes_as_before(tmp_path):
    tokenizer = train_word_level_tokenizer(RAW, split_punctuation=True)
    old = decoders.Sequence([decoders.Replace(Regex("^"), " "), decoders.Fuse()])  # spaces around every token
    tokenizer.backend_tokenizer.decoder = old
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    ids = loaded.encode("It isn't (or is it?).", add_special_tokens=False)
    assert ids == tokenizer.encode("It isn't (or is it?).", add_special_tokens=False)
    assert loaded.decode(ids) == " It isn't ( or is it ? ) ."


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny")
    tokenizer = train_word_level_tokenizer(RAW, split_punctuation=True)
    torch.manual_seed(0)
    NPLMForCausalLM(NPLMConfig(vocab_size=len(tokenizer), context_size=2, embedding_size=4,
                               hidden_size=4)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("word, continuation", [("and", " and"), (",", ","), (")", ")")])
def test_pipeline_appends_a_continuation_with_one_space_or_none(tiny_lm, word, continuation):
    generator = pipeline("text-generation", model=str(tiny_lm), tokenizer=str(tiny_lm), device="cpu")
    tokenizer = generator.tokenizer
    forced = tokenizer.convert_tokens_to_ids(word)
    prompt = "He said"
    out = generator(prompt, max_new_tokens=1, do_sample=False, sequence_bias={(forced,): 100.0},
                    suppress_tokens=None, begin_suppress_tokens=None)[0]["generated_text"]
    assert out == prompt + continuation
    # decode_generated joins prompt and continuation the same way, and shows the continuation alone
    ids = torch.tensor([forced])
    assert decode_generated(tokenizer, ids, prompt=prompt) == prompt + continuation
    assert decode_generated(tokenizer, ids) == continuation.strip()


def test_decode_generated_reads_the_prompt_quotation():
    """A continuation that closes the prompt's quotation: decoded after the prompt's tokens, it closes it."""
    tokenizer = train_word_level_tokenizer(RAW, split_punctuation=True)
    ids = torch.tensor(tokenizer.encode('no," and left.', add_special_tokens=False))
    assert decode_generated(tokenizer, ids, prompt='He said "') == RAW[0]
    assert decode_generated(tokenizer, ids[3:], prompt='He said "no,"') == RAW[0]
