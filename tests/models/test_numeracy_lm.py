"""The numeracy LM (Spithourakis & Riedel 2018): its numeral-aware heads against hand computations,
its config checks, and generation. The model contract (Trainer, save/load, export, ...) is checked
for it in test_model_contract.py like for every registered model."""

from __future__ import annotations

import json

import pytest
import torch
from plain_search import plain_search

from hf_nlm.heads import DigitSoftmaxHead, NumeralHierarchicalSoftmaxHead
from hf_nlm.models import NumeracyLMConfig, NumeracyLMForCausalLM
from hf_nlm.tokenization.numerals import encode_digits

V, D = 17, 8
NUMERALS = {"<unk_num>": 2, "7": 4, "1,200": 6, "-3.25": 11, "2019": 15}
WORD_IDS = [i for i in range(V) if i not in NUMERALS.values()]


def density_of(head):
    """The density over numbers of an open head: the mixture of ``mog`` / ``combination``, the exponent
    density of ``dexp``."""
    return head.value_branch.density if hasattr(head, "value_branch") else head.branch.density


def model(strategy: str, **kwargs) -> NumeracyLMForCausalLM:
    torch.manual_seed(0)
    config = NumeracyLMConfig(
        vocab_size=V, embedding_size=D, hidden_size=D, numeral_strategy=strategy, numeral_vocab=NUMERALS,
        **kwargs,
    )
    return NumeracyLMForCausalLM(config).eval()


def test_numeral_strategy_is_the_head_under_the_papers_name():
    config = NumeracyLMConfig(vocab_size=V, numeral_strategy="hsoftmax", numeral_vocab=NUMERALS)
    assert config.head == "hsoftmax" and config.numeral_strategy == "hsoftmax"
    assert (config.num_hidden_layers, config.hidden_size, config.dropout) == (1, 50, 0.1)  # the paper's model


def test_hsoftmax_is_class_probability_times_branch_softmax():
    m = model("hsoftmax")
    head = m.lm_head
    assert isinstance(head, NumeralHierarchicalSoftmaxHead)
    h = torch.randn(5, D)
    log_probs = head.log_probs(h)
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(5))
    # Brute force, token by token: p(class | h) * softmax over the class's rows.
    with torch.no_grad():
        p_class = torch.softmax(h @ head.class_weight.T + head.class_bias, -1)
        p_word = torch.softmax(h @ head.word_weight.T + head.word_bias, -1)
        p_num = torch.softmax(h @ head.numeral_weight.T + head.numeral_bias, -1)
    numeral_ids = sorted(NUMERALS.values())
    for token in range(V):
        if token in numeral_ids:
            expected = p_class[:, 1] * p_num[:, numeral_ids.index(token)]
        else:
            expected = p_class[:, 0] * p_word[:, WORD_IDS.index(token)]
        torch.testing.assert_close(log_probs[:, token].exp(), expected)
    # The numeral class's mass is exactly p(numeral | h).
    torch.testing.assert_close(log_probs[:, numeral_ids].exp().sum(-1), p_class[:, 1])


def test_hsoftmax_nll_is_the_picked_log_prob_and_ignores_minus_100():
    head = model("hsoftmax").lm_head
    h = torch.randn(6, D)
    targets = torch.tensor([0, 2, 6, 15, -100, 9])
    nll = head.nll(h, targets)
    log_probs = head.log_probs(h)
    for i, t in enumerate(targets.tolist()):
        assert nll[i].item() == pytest.approx(0.0 if t == -100 else -log_probs[i, t].item(), abs=1e-6)


def test_digit_output_embedding_is_token_plus_char_rnn_of_its_digits():
    head = model("softmax_digits").lm_head
    assert isinstance(head, DigitSoftmaxHead)
    rnn, emb = head.digit_rnn, head.digit_embedding

    def char_rnn(canonical: str) -> torch.Tensor:
        """The encoding computed on its own: one LSTM cell step per symbol, then the end marker."""
        h = c = torch.zeros(1, D)
        for symbol in encode_digits(canonical)[: len(canonical) + 1]:
            h, c = rnn(emb.weight[symbol][None], (h, c))
        return h[0]

    with torch.no_grad():
        e_out = head.output_embeddings()
        expected = head.weight.clone()
        for token, canonical in [("7", "7"), ("1,200", "1200"), ("-3.25", "-3.25"), ("2019", "2019")]:
            expected[NUMERALS[token]] += char_rnn(canonical)
    torch.testing.assert_close(e_out, expected)
    # Words and <unk_num> (no digits) keep their plain rows; the scores use e_out.
    assert torch.equal(e_out[WORD_IDS], head.weight[WORD_IDS].detach())
    assert torch.equal(e_out[NUMERALS["<unk_num>"]], head.weight[NUMERALS["<unk_num>"]].detach())
    h = torch.randn(3, D)
    torch.testing.assert_close(head(h), h @ e_out.T + head.bias)


def test_digit_rnn_is_trained_through_the_normaliser_even_by_word_targets():
    head = model("softmax_digits").lm_head.train()
    h = torch.randn(4, D)
    # Word targets only: the softmax still normalises over the numerals' rows, which hold the digit encodings.
    head.nll(h, torch.tensor([0, 1, 3, 5])).sum().backward()
    assert head.digit_rnn.weight_ih.grad is not None and head.digit_rnn.weight_ih.grad.abs().sum() > 0


@pytest.mark.parametrize("strategy", ["softmax_digits", "hsoftmax"])
def test_numeral_heads_need_the_numeral_vocabulary(strategy):
    with pytest.raises(ValueError, match="numeral_vocab"):
        NumeracyLMConfig(vocab_size=V, numeral_strategy=strategy)


def test_bad_numeral_vocab_and_strategy_are_refused():
    with pytest.raises(ValueError, match=r"numeral_vocab: id 40 .* outside \[0, 17\)"):
        NumeracyLMConfig(vocab_size=V, numeral_vocab={"<unk_num>": 2, "5": 40})
    with pytest.raises(ValueError, match="one id to two numerals"):
        NumeracyLMConfig(vocab_size=V, numeral_vocab={"<unk_num>": 2, "5": 2})
    with pytest.raises(ValueError, match="head must be one of"):
        NumeracyLMConfig(vocab_size=V, numeral_strategy="mixture_of_everything")
    with pytest.raises(ValueError, match="needs words besides the numerals"):
        NumeracyLMConfig(vocab_size=3, numeral_strategy="hsoftmax",
                         numeral_vocab={"<unk_num>": 0, "1": 1, "2": 2})


def test_bad_numeral_loss_weight_is_refused():
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="numeral_loss_weight must be a finite number > 0"):
            NumeracyLMConfig(vocab_size=V, numeral_vocab=NUMERALS, numeral_loss_weight=bad)
    with pytest.raises(ValueError, match="numeral_loss_weight=2.0 needs numeral_vocab"):
        NumeracyLMConfig(vocab_size=V, numeral_loss_weight=2.0)


@pytest.mark.parametrize("strategy", ["softmax", "hsoftmax", "drnn"])
def test_numeral_loss_weight_weighs_numeral_targets_in_the_training_loss_only(strategy):
    m = model(strategy, numeral_loss_weight=4.0, dropout=0.0, dropout_input=0.0)
    torch.manual_seed(1)
    ids = torch.randint(0, V, (2, 9))
    targets = ids[:, 1:]
    # Each target's NLL by hand, from the evaluation-mode distribution over the vocabulary (the d-RNN's
    # numerals are spelled by their canonical strings, which the vocabulary rows give).
    nll = -torch.log_softmax(m(ids).logits[:, :-1].double(), -1).gather(-1, targets[..., None]).squeeze(-1)
    is_numeral = torch.isin(targets, torch.tensor(list(NUMERALS.values())))
    assert is_numeral.any() and not is_numeral.all()
    weights = 1 + 3 * is_numeral.double()
    evaluated = m(ids, labels=ids)
    torch.testing.assert_close(evaluated.loss.double(), nll.mean(), rtol=1e-5, atol=1e-6)
    m.train()  # no dropout left: training mode differs only in the loss
    trained = m(ids, labels=ids)
    torch.testing.assert_close(trained.nll.double(), nll.mean(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(trained.loss.double(), (weights * nll).sum() / weights.sum(), rtol=1e-5,
                               atol=1e-6)
    # the weighting is not the plain mean here
    assert abs(float((trained.loss - trained.nll).detach())) > 1e-3


@pytest.mark.parametrize("strategy", ["softmax", "softmax_digits", "hsoftmax"])
def test_cached_generation_equals_uncached(strategy):
    m = model(strategy)
    prompt = torch.tensor([[3, 4, 7, 6]])
    for kwargs in ({"num_beams": 1}, {"num_beams": 3, "length_penalty": 1.0}):
        cached = m.generate(prompt, max_new_tokens=6, do_sample=False, use_cache=True, **kwargs)
        uncached = m.generate(prompt, max_new_tokens=6, do_sample=False, use_cache=False, **kwargs)
        assert torch.equal(cached, uncached)


def test_numeral_side_fields_pass_through_forward():
    m = model("hsoftmax")
    ids = torch.randint(0, V, (2, 5))
    fields = {
        "numeral_value": torch.zeros(2, 5, dtype=torch.float64),
        "numeral_precision": torch.zeros(2, 5, dtype=torch.long),
        "numeral_mask": torch.zeros(2, 5, dtype=torch.int8),
    }
    torch.testing.assert_close(m(ids, labels=ids, **fields).loss, m(ids, labels=ids).loss)


# ----------------------------------------------------------------------------- with the numeracy tokenizer

TEXTS = [
    "in 1990 the deficit was 3.5 billion dollars , up 12 % .",
    "the budget grew 12 % to 1,200 million in 1990 .",
    "we spent 3.5 billion on 7 programs .",
    "in 1991 the deficit was 2.25 billion dollars .",
] * 5
HELD_OUT = ["in 1995 the surplus was 3.5 billion dollars , up 12 % .",
            "the budget fell 9 % to 1,250 million in 1990 ."]


@pytest.fixture(scope="module")
def numeracy_tokenizer():
    from hf_nlm.tokenization import train_numeracy_tokenizer

    return train_numeracy_tokenizer(TEXTS, max_vocab_size=24)


def tokenized_model(tokenizer, strategy: str) -> NumeracyLMForCausalLM:
    torch.manual_seed(0)
    config = NumeracyLMConfig(vocab_size=len(tokenizer), embedding_size=D, hidden_size=D,
                              numeral_strategy=strategy, numeral_vocab=tokenizer.numeral_vocab)
    return NumeracyLMForCausalLM(config).eval()


@pytest.mark.parametrize("strategy", ["softmax", "hsoftmax"])
def test_evaluate_lm_reports_adjusted_perplexity_as_computed_by_hand(numeracy_tokenizer, strategy):
    """APP from evaluate_lm against a computation from scratch: the whole stream scored in one forward
    pass, token kinds and OOV types read from the text with the numeral recogniser."""
    import math

    from hf_nlm.evaluation import evaluate_lm
    from hf_nlm.tokenization.numerals import parse_numeral

    tok = numeracy_tokenizer
    model = tokenized_model(tok, strategy)
    report = evaluate_lm(model, HELD_OUT, tok, block_size=5, batch_size=1)

    # the held-out text is space-separated
    pieces = [p for line in HELD_OUT for p in [*line.split(), "<eos>"]]
    ids = [tok.eos_token_id if p == "<eos>" else tok.convert_tokens_to_ids(p) for p in pieces]
    unknown_ids = {tok.unk_token_id, tok.unk_num_token_id}
    with torch.no_grad():  # the stream starts with <eos>, "a sentence starts here"
        log_probs = torch.log_softmax(model(torch.tensor([[tok.eos_token_id, *ids[:-1]]])).logits[0], -1)
    target_lp = [log_probs[t, i].item() for t, i in enumerate(ids)]
    numeral = [p != "<eos>" and parse_numeral(p) is not None for p in pieces]
    oov = {kind: {p for p, i, n in zip(pieces, ids, numeral, strict=True) if i in unknown_ids and n == kind}
           for kind in (False, True)}
    assert oov[True] == {"1995", "9", "1,250"} and "surplus" in oov[False]
    adjusted = [lp - (math.log(len(oov[n])) if i in unknown_ids else 0.0)
                for lp, i, n in zip(target_lp, ids, numeral, strict=True)]

    def ppl(values):
        return math.exp(-sum(values) / len(values))

    assert report["num_tokens"] == len(ids) and report["num_numerals"] == sum(numeral)
    assert report["num_oov_numeral_types"] == 3 and report["num_oov_word_types"] == len(oov[False])
    assert report["perplexity"] == pytest.approx(ppl(target_lp), rel=1e-5)
    assert report["adjusted_perplexity"] == pytest.approx(ppl(adjusted), rel=1e-5)
    assert report["adjusted_perplexity_numerals"] == pytest.approx(
        ppl([a for a, n in zip(adjusted, numeral, strict=True) if n]), rel=1e-5)
    assert report["adjusted_perplexity_words"] == pytest.approx(
        ppl([a for a, n in zip(adjusted, numeral, strict=True) if not n]), rel=1e-5)


def test_train_evaluate_save_load_and_generate_through_the_cli(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

    from hf_nlm.tokenization import NumeracyTokenizerFast
    from hf_nlm_cli import main

    for split, lines in (("train", TEXTS), ("valid", HELD_OUT), ("test", HELD_OUT)):
        (tmp_path / f"{split}.txt").write_text("\n".join(lines) + "\n")
    out = tmp_path / "run"
    status = main([
        "train", "--model", "numeracy_lm", "--numeral-strategy", "hsoftmax",
        "--train-file", str(tmp_path / "train.txt"),
        "--validation-file", str(tmp_path / "valid.txt"), "--test-file", str(tmp_path / "test.txt"),
        "--output-dir", str(out), "--embedding-size", "8", "--hidden-size", "8", "--block-size", "6",
        "--batch-size", "2", "--num-epochs", "2", "--optimizer", "adam", "--learning-rate", "0.01",
        "--no-progress-bar", "--split-punctuation",
    ])
    assert status == 0
    results = json.loads((out / "results.json").read_text())
    assert results["test"]["num_numerals"] == 6 and results["test"]["adjusted_perplexity_numerals"] > 1
    tokenizer = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    assert isinstance(tokenizer, NumeracyTokenizerFast) and isinstance(model, NumeracyLMForCausalLM)
    assert (model.config.numeral_strategy == "hsoftmax"
            and model.config.numeral_vocab == tokenizer.numeral_vocab)
    text = pipeline("text-generation", model=model, tokenizer=tokenizer)("the deficit was", max_new_tokens=4,
                                                                          do_sample=False)[0]["generated_text"]
    # 3 + 4 tokens, decoded as running text ("3.5..." is four)
    assert text.startswith("the deficit was") and len(tokenizer.tokenize(text)) == 7
    assert main(["predict-numbers", str(out), "--train-file", str(tmp_path / "train.txt"), "--test-file",
                 str(tmp_path / "test.txt"), "--predictions", str(tmp_path / "p.jsonl")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and all(r["low"] <= r["prediction"] <= r["high"] for r in rows)
    assert main(["plot-numerals", str(out), "--output", str(tmp_path / "n.png")]) == 0
    assert (tmp_path / "n.png").stat().st_size > 1000
    with pytest.raises(SystemExit) as refused:  # a density needs the mog strategy: a clear error, status 2
        main(["plot-numerals", str(out), "--density-after", "the deficit was"])
    assert refused.value.code == 2


def test_numeral_embedding_picture_is_the_pca_of_the_numeral_rows(numeracy_tokenizer, tmp_path):
    import numpy as np

    from hf_nlm.plots.numerals import plot_numeral_embeddings

    model = tokenized_model(numeracy_tokenizer, "softmax")
    points = plot_numeral_embeddings(model, numeracy_tokenizer, tmp_path / "numerals.png")
    assert (tmp_path / "numerals.png").stat().st_size > 1000
    numerals = sorted((i, t) for t, i in numeracy_tokenizer.numeral_vocab.items() if t != "<unk_num>")
    rows = model.lm_head.weight.detach()[[i for i, _ in numerals]].numpy()
    # PCA the long way: eigenvectors of the covariance; points agree up to the sign of each axis.
    centred = rows - rows.mean(0)
    _, vectors = np.linalg.eigh(centred.T @ centred)
    expected = centred @ vectors[:, ::-1][:, :2]
    for k in range(2):
        assert np.allclose(np.abs(points[:, k]), np.abs(expected[:, k]), atol=1e-4)


@pytest.mark.parametrize("strategy", ["softmax", "softmax_digits", "hsoftmax"])
def test_awkward_numerals_train_with_a_finite_loss(strategy):
    """Awkward numerals in the training text ("1,2,3", overflow, NaN / inf, negative zero, a Unicode minus
    and digit, leading zeros, 300 digits, an empty line): each is a token with a documented meaning, and a
    training step on blocks that carry their side fields has a finite loss and finite gradients."""
    from hf_nlm.data.lm import group_into_blocks, tokenize_stream
    from hf_nlm.tokenization import train_numeracy_tokenizer

    awkward = ["1,2,3 and 1e400 or NaN and inf", "-0 and \u22125 and \uff13 and 00012.500", "9" * 300, "",
               "a 1,200 b 3.5 c"] * 3
    tok = train_numeracy_tokenizer(awkward)
    stream, _ = tokenize_stream(awkward, tok)
    assert torch.isfinite(stream["numeral_value"]).all()
    torch.manual_seed(0)
    config = NumeracyLMConfig(vocab_size=len(tok), embedding_size=D, hidden_size=D, numeral_strategy=strategy,
                              numeral_vocab=tok.numeral_vocab)
    model = NumeracyLMForCausalLM(config).train()
    batch = group_into_blocks(stream, block_size=8, context_size=1, bos_token_id=tok.eos_token_id,
                              fill=tok.token_features.fill)
    loss = model(**batch).loss
    loss.backward()
    assert torch.isfinite(loss) and all(torch.isfinite(p.grad).all()
                                        for p in model.parameters() if p.grad is not None)


# ----------------------------------------------------------------------- open numeral vocabularies ----------

@pytest.mark.parametrize("strategy", ["drnn", "mog", "dexp"])
def test_open_numeral_heads_are_distributions_with_unk_num_holding_the_rest(strategy):  # (combination: below)
    m = model(strategy)
    head = m.lm_head
    h = torch.randn(4, D, dtype=torch.float64)
    head.double()
    log_probs = head.log_probs(h)
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(4, dtype=torch.float64))
    # The numeral branch: in-vocabulary numerals get the branch's own probability of their numeral...
    numeral_ids = sorted(NUMERALS.values())
    branch = head.numeral_log_probs(h)
    if strategy == "drnn":
        expected = head.digit_rnn.log_prob_of_strings(h, ["7", "1200", "-3.25", "2019"])
    else:
        values = torch.tensor([7.0, 1200.0, -3.25, 2019.0], dtype=torch.float64)
        precisions = torch.tensor([0, 0, 2, 0])
        density = density_of(head)
        expected = torch.stack([density.log_prob(h, values[k].expand(4), precisions[k].expand(4))
                                for k in range(4)], -1)
    torch.testing.assert_close(branch[:, 1:], expected)
    # ... and <unk_num> (row 0) everything else: one minus their sum.
    torch.testing.assert_close(branch[:, 0].exp(), 1 - expected.exp().sum(-1))
    assert numeral_ids[0] == NUMERALS["<unk_num>"]


@pytest.mark.parametrize("strategy", ["drnn", "mog"])
def test_open_numeral_heads_score_a_numeral_target_as_itself(strategy):
    """With the target's fields, an unseen numeral gets the probability of its own digits / value; a word
    target and an in-vocabulary numeral get what the vocabulary-wide distribution says."""
    from hf_nlm.heads import Targets
    from hf_nlm.tokenization.numerals import encode_digits

    head = model(strategy).lm_head.double()
    h = torch.randn(3, D, dtype=torch.float64)
    ids = torch.tensor([0, NUMERALS["<unk_num>"], NUMERALS["7"]])  # a word, an unseen 42.5, the numeral 7
    fields = {
        "numeral_mask": torch.tensor([False, True, True]),
        "numeral_value": torch.tensor([0.0, 42.5, 7.0], dtype=torch.float64),
        "numeral_precision": torch.tensor([0, 1, 0]),
        "digit_ids": torch.tensor([[13] * 25, encode_digits("42.5"), encode_digits("7")]),
    }
    nll = head.nll(h, Targets(ids, fields))
    full = head.log_probs(h)
    log_numeral = torch.log_softmax(h @ head.class_weight.T + head.class_bias, -1)[:, 1]
    if strategy == "drnn":
        own = head.digit_rnn.log_prob(h[1:2], fields["digit_ids"][1:2])[0]
    else:
        own = head.mixture.log_prob(h[1:2], torch.tensor([42.5], dtype=torch.float64), torch.tensor([1]))[0]
    torch.testing.assert_close(nll[0], -full[0, 0])
    torch.testing.assert_close(nll[1], -(log_numeral[1] + own))
    torch.testing.assert_close(nll[2], -full[2, NUMERALS["7"]])
    # Without the fields the unseen numeral is scored as <unk_num>: the vocabulary-wide distribution.
    torch.testing.assert_close(head.nll(h, ids)[1], -full[1, NUMERALS["<unk_num>"]])
    # So is a numeral id whose fields say "no numeral" (the text "<unk_num>" written literally), beside exact
    # ones.
    literal = {name: value.clone() for name, value in fields.items()}
    literal["numeral_mask"][1] = False
    mixed = head.nll(h, Targets(ids, literal))
    torch.testing.assert_close(mixed[1], -full[1, NUMERALS["<unk_num>"]])
    torch.testing.assert_close(mixed[2], nll[2])


def test_mog_head_fits_its_gaussians_to_the_training_numerals_and_app_leaves_numerals_alone(
    numeracy_tokenizer, tmp_path
):
    from hf_nlm.evaluation import evaluate_lm
    from hf_nlm.training import TrainingConfig, train_lm

    tok = numeracy_tokenizer
    torch.manual_seed(0)
    config = NumeracyLMConfig(vocab_size=len(tok), embedding_size=D, hidden_size=D, numeral_strategy="mog",
                              numeral_vocab=tok.numeral_vocab, mog_components=3)
    m = NumeracyLMForCausalLM(config)
    splits = {"train": TEXTS, "validation": HELD_OUT}
    from datasets import Dataset, DatasetDict

    data = DatasetDict({k: Dataset.from_dict({"text": v}) for k, v in splits.items()})
    train_lm(m, tok, data, TrainingConfig(output_dir=str(tmp_path / "run"), num_epochs=1, block_size=6,
                                          batch_size=2, optimizer="adam", learning_rate=0.01,
                                          progress_bar=False, eval_test=False))
    # EM put the (log-space) means where the training values are: 1990, 3.5, 12, 1,200, 7, 2.25, 1991.
    means = torch.sort(m.lm_head.mixture.means).values
    assert means[0] < 2.0 and means[-1] > 6.5  # log1p(3.5) ~ 1.5 ... log1p(2019) ~ 7.6
    report = evaluate_lm(m, HELD_OUT, tok, block_size=5, batch_size=1)
    # Numerals are scored as themselves: only unknown words are adjusted.
    assert report["num_unknown_numerals"] == 0 and report["num_oov_numeral_types"] == 0
    assert report["num_unknown_words"] > 0 and report["adjusted_perplexity_numerals"] == pytest.approx(
        report["perplexity_numerals"])


@pytest.mark.parametrize("strategy", ["mog", "combination"])
def test_mog_trainable_trains_the_gaussians_on_from_em_and_saves_them(numeracy_tokenizer, strategy, tmp_path):
    from datasets import Dataset, DatasetDict

    from hf_nlm.training import TrainingConfig, train_lm

    tok = numeracy_tokenizer
    data = DatasetDict({"train": Dataset.from_dict({"text": TEXTS}),
                        "validation": Dataset.from_dict({"text": HELD_OUT})})
    trained = {}
    for trainable in (False, True):
        torch.manual_seed(0)
        config = NumeracyLMConfig(vocab_size=len(tok), embedding_size=D, hidden_size=D,
                                  numeral_strategy=strategy, numeral_vocab=tok.numeral_vocab,
                                  mog_components=3, mog_trainable=trainable)
        m = NumeracyLMForCausalLM(config)
        mixture = density_of(m.lm_head)
        assert any(p is mixture.means for p in m.parameters()) == trainable
        out = tmp_path / f"run_{trainable}"
        train_lm(m, tok, data, TrainingConfig(output_dir=str(out), num_epochs=2, block_size=6, batch_size=2,
                                              optimizer="adam", learning_rate=0.05, progress_bar=False,
                                              eval_test=False))
        trained[trainable] = (m, out)
    frozen, learned = (density_of(trained[k][0].lm_head) for k in (False, True))
    # Both started from the same EM fit; the frozen components are still there, the trainable ones moved,
    # their deviations never under the floor EM set.
    assert torch.equal(frozen.log_std_floor, learned.log_std_floor)
    assert (learned.means - frozen.means).abs().max() > 1e-3
    assert (learned.components()[1] >= learned.log_std_floor.double()).all()
    reloaded = NumeracyLMForCausalLM.from_pretrained(trained[True][1])
    assert reloaded.config.mog_trainable
    torch.testing.assert_close(density_of(reloaded.lm_head).means, learned.means)
    torch.testing.assert_close(density_of(reloaded.lm_head).log_stds, learned.log_stds)


@pytest.mark.parametrize("strategy", ["softmax", "hsoftmax", "drnn"])
def test_numeral_cost_breakdown_splits_the_numeral_perplexity_into_class_and_branch(numeracy_tokenizer,
                                                                                     strategy):
    """The class cost against the model's own numbers (the h-softmax's class branch; a softmax's mass on
    the numeral ids, summed by hand), and class + branch against evaluate_lm's numeral perplexities."""
    import math

    from hf_nlm.evaluation import evaluate_lm, numeral_cost_breakdown
    from hf_nlm.tokenization.numerals import parse_numeral

    tok = numeracy_tokenizer
    m = tokenized_model(tok, strategy)
    split = numeral_cost_breakdown(m, tok, HELD_OUT, block_size=5)
    report = evaluate_lm(m, HELD_OUT, tok, block_size=5, batch_size=1)
    pieces, hidden = _hidden_before_each_token(m, tok, HELD_OUT)
    positions = [i for i, p in enumerate(pieces) if p != "<eos>" and parse_numeral(p) is not None]
    with torch.no_grad():
        if strategy == "softmax":
            probs = torch.softmax(m.lm_head(hidden[positions]), -1)
            class_nll = -torch.log(probs[:, list(tok.numeral_vocab.values())].sum(-1))
        else:
            class_nll = -m.lm_head.class_and_word_log_probs(hidden[positions])[0][:, 1]
    assert split["num_numerals"] == len(positions) == report["num_numerals"]
    assert split["numeral_class_nll"] == pytest.approx(float(class_nll.mean()), rel=1e-5)
    assert math.exp(split["numeral_class_nll"] + split["numeral_branch_nll"]) == pytest.approx(
        report["perplexity_numerals"], rel=1e-5)
    assert math.exp(split["numeral_class_nll"] + split["numeral_branch_nll_adjusted"]) == pytest.approx(
        report["adjusted_perplexity_numerals"], rel=1e-5)
    # 1995, 9, 1,250; the d-RNN spells them, so APP counts none as OOV
    unknown = split["num_unknown_numerals"]
    assert unknown == 3 and (split["num_oov_numeral_types"] == report["num_oov_numeral_types"]
                             == (0 if strategy == "drnn" else 3))
    assert (split["numeral_branch_nll_known"] * (len(positions) - unknown)
            + split["numeral_branch_nll_unknown"] * unknown
            ) / len(positions) == pytest.approx(split["numeral_branch_nll"], rel=1e-9)
    charged = split["numeral_branch_nll_adjusted"] - split["numeral_branch_nll"]
    expected = 0.0 if strategy == "drnn" else unknown * math.log(3) / len(positions)  # the d-RNN spells them
    assert charged == pytest.approx(expected, abs=1e-9)


def test_numeral_cost_breakdown_refuses_a_plain_tokenizer_and_a_text_without_numerals(numeracy_tokenizer):
    from hf_nlm.evaluation import numeral_cost_breakdown
    from hf_nlm.tokenization import train_word_level_tokenizer

    m = tokenized_model(numeracy_tokenizer, "hsoftmax")
    with pytest.raises(ValueError, match="needs a numeracy tokenizer"):
        numeral_cost_breakdown(m, train_word_level_tokenizer(TEXTS), HELD_OUT, block_size=5)
    with pytest.raises(ValueError, match="holds no numeral"):
        numeral_cost_breakdown(m, numeracy_tokenizer, ["the budget fell ."], block_size=5)


# ----------------------------------------------------------------------------- number prediction ----------

def _hidden_before_each_token(model, tok, texts):
    """The state that predicts each token of the stream, from one forward pass over the whole stream."""
    pieces = [p for line in texts for p in [*line.split(), "<eos>"]]
    ids = [tok.eos_token_id if p == "<eos>" else tok.convert_tokens_to_ids(p) for p in pieces]
    with torch.no_grad():
        out = model(torch.tensor([[tok.eos_token_id, *ids[:-1]]]), output_hidden_states=True)
    return pieces, out.hidden_states[-1][0]


@pytest.mark.parametrize("strategy", ["hsoftmax", "combination"])
@pytest.mark.parametrize("statistic", ["mean", "median", "mode"])
def test_numeral_predictions_from_the_vocabulary_distribution_by_hand(numeracy_tokenizer, statistic,
                                                                       strategy):
    from hf_nlm.evaluation.number_prediction import predict_numbers
    from hf_nlm.tokenization.numerals import parse_numeral

    tok = numeracy_tokenizer
    m = tokenized_model(tok, strategy)
    predictions = predict_numbers(m, tok, HELD_OUT, statistic=statistic, interval=0.5, block_size=5)
    pieces, hidden = _hidden_before_each_token(m, tok, HELD_OUT)
    numeral_positions = [i for i, p in enumerate(pieces) if p != "<eos>" and parse_numeral(p) is not None]
    assert [p["index"] for p in predictions] == numeral_positions
    vocab = sorted((parse_numeral(t).value, i) for t, i in tok.numeral_vocab.items() if t != "<unk_num>")
    for p, position in zip(predictions, numeral_positions, strict=True):
        probs = m.lm_head.log_probs(hidden[position]).exp()[[i for _, i in vocab]].double()
        probs = (probs / probs.sum()).tolist()
        values = [v for v, _ in vocab]
        cumulative = [sum(probs[: k + 1]) for k in range(len(probs))]
        expected = {"mean": sum(v * q for v, q in zip(values, probs, strict=True)),
                    "median": values[next(k for k, c in enumerate(cumulative) if c >= 0.5)],
                    "mode": values[max(range(len(probs)), key=probs.__getitem__)]}[statistic]
        assert p["prediction"] == pytest.approx(expected, rel=1e-6)
        assert p["low"] == values[next(k for k, c in enumerate(cumulative) if c >= 0.25)]
        assert p["value"] == parse_numeral(pieces[position]).value


def test_mog_predictions_are_the_mixtures_and_metrics_have_baselines(numeracy_tokenizer):
    from hf_nlm.evaluation.number_prediction import evaluate_number_prediction, predict_numbers

    tok = numeracy_tokenizer
    m = tokenized_model(tok, "mog")
    m.lm_head.mixture.initialize_from(torch.tensor([1990.0, 3.5, 12.0, 1200.0, 7.0]))
    predictions = predict_numbers(m, tok, HELD_OUT, statistic="median", block_size=5)
    pieces, hidden = _hidden_before_each_token(m, tok, HELD_OUT)
    expected = m.lm_head.mixture.median(hidden[[p["index"] for p in predictions]])
    assert [p["prediction"] for p in predictions] == pytest.approx(expected.tolist(), rel=1e-9)
    assert all(p["low"] <= p["prediction"] <= p["high"] for p in predictions)
    report = evaluate_number_prediction(m, tok, HELD_OUT, train_texts=TEXTS, statistic="median", block_size=5)
    references = [p["value"] for p in predictions]
    ape = sorted(abs(p["prediction"] - p["value"]) / abs(p["value"]) for p in predictions)
    assert report["num_numerals"] == len(references) == 6
    assert report["mape"] == pytest.approx(100 * sum(ape) / len(ape))
    assert report["mdape_median_baseline"] is not None and report["train_median"] == 12.0


@pytest.mark.parametrize("strategy", ["drnn", "mog", "dexp"])
def test_generated_unk_num_is_written_out_by_the_numeral_decoder(numeracy_tokenizer, strategy):
    from hf_nlm.evaluation import decode_generated
    from hf_nlm.evaluation.number_prediction import write_unknown_numerals
    from hf_nlm.tokenization.numerals import MAX_NUMERAL_LENGTH, parse_numeral

    tok = numeracy_tokenizer
    m = tokenized_model(tok, strategy)
    if strategy != "drnn":
        density_of(m.lm_head).initialize_from(torch.tensor([1990.0, 3.5, 12.0, 1200.0, 7.0]))
    seq = torch.tensor([tok(["the deficit was"], add_special_tokens=False)["input_ids"][0]
                        + [tok.unk_num_token_id]])
    written = write_unknown_numerals(m, seq)[0]
    assert list(written) == [3]
    text = written[3]
    numeral = parse_numeral(text)
    assert numeral is not None and text not in tok.numeral_vocab  # a numeral the vocabulary does not hold
    with torch.no_grad():
        h = m(seq, output_hidden_states=True).hidden_states[-1][0, 2]
    if strategy == "drnn":  # greedy: the likeliest spelling outside the vocabulary
        beams, _ = m.lm_head.digit_rnn.beam_search(h[None], num_beams=16, num_return_sequences=16)
        assert text == next(b for b in beams[0] if b and b not in tok.numeral_vocab)
    else:  # the median, written with the likeliest precision (as many decimals as a numeral may hold)
        density = density_of(m.lm_head)
        r = int(density.log_precision_probs(h).argmax())
        median = float(density.median(h[None])[0])
        assert numeral.value == pytest.approx(median)
        assert len(text) <= MAX_NUMERAL_LENGTH
        assert text == f"{median:.{min(r, MAX_NUMERAL_LENGTH - 1 - len(f'{median:.0f}'))}f}"
    assert decode_generated(tok, seq[0], written).split() == ["the", "deficit", "was", text]
    # A closed strategy has nothing to write: <unk_num> stays.
    assert write_unknown_numerals(tokenized_model(tok, "hsoftmax"), seq) == [{}]


def test_mog_density_picture_integrates_to_one_and_marks_the_median(numeracy_tokenizer, tmp_path):
    import numpy as np

    from hf_nlm.heads.numeral.densities.gaussian_mixture import forward_transform
    from hf_nlm.plots.numerals import plot_numeral_density

    tok = numeracy_tokenizer
    torch.manual_seed(0)
    m = NumeracyLMForCausalLM(NumeracyLMConfig(vocab_size=len(tok), embedding_size=D, hidden_size=D,
                                               numeral_strategy="mog", numeral_vocab=tok.numeral_vocab,
                                               mog_components=2)).eval()
    m.lm_head.mixture.initialize_from(torch.tensor([1990.0, 3.5, 12.0, 1200.0, 7.0, 2.25]))
    v, density, median = plot_numeral_density(m, tok, "the deficit was", tmp_path / "d.png", value=3.5)
    assert (tmp_path / "d.png").stat().st_size > 1000
    u = forward_transform(torch.from_numpy(v), "log").numpy()
    area = float(np.sum((density[1:] + density[:-1]) / 2 * np.diff(u)))  # the trapezoid rule
    assert area == pytest.approx(0.998, abs=2e-3)  # the 0.001-0.999 quantile range
    ids = tok("the deficit was", return_tensors="pt").input_ids
    with torch.no_grad():
        h = m(ids, output_hidden_states=True).hidden_states[-1][0, -1]
    assert median == pytest.approx(float(m.lm_head.mixture.median(h)))


def test_combination_mixes_the_three_strategies_by_weights_from_h():
    """p(s | numeral, h) = sum_m p(m | h) p_m(s | h): checked for an unseen numeral against the formula
    written out (the closed h-softmax gives it nothing), and for a numeral of the vocabulary against the
    vocabulary-wide distribution."""
    import math

    from hf_nlm.heads import Targets
    from hf_nlm.tokenization.numerals import encode_digits

    head = model("combination").lm_head.double()
    h = torch.randn(2, D, dtype=torch.float64)
    full = head.log_probs(h)
    torch.testing.assert_close(full.exp().sum(-1), torch.ones(2, dtype=torch.float64))
    fields = {
        "numeral_mask": torch.tensor([True, True]),
        "numeral_value": torch.tensor([42.5, 7.0], dtype=torch.float64),
        "numeral_precision": torch.tensor([1, 0]),
        "digit_ids": torch.tensor([encode_digits("42.5"), encode_digits("7")]),
    }
    ids = torch.tensor([NUMERALS["<unk_num>"], NUMERALS["7"]])
    nll = head.nll(h, Targets(ids, fields))
    w = torch.softmax(h @ head.strategy_weight.T + head.strategy_bias, -1)[0]
    p_class = torch.softmax(h @ head.class_weight.T + head.class_bias, -1)[0, 1]
    p_d = head.digit_rnn.log_prob(h[:1], fields["digit_ids"][:1]).exp()[0]
    p_g = head.mixture.log_prob(h[:1], fields["numeral_value"][:1], fields["numeral_precision"][:1]).exp()[0]
    expected = p_class * (w[1] * p_d + w[2] * p_g)
    assert nll[0].item() == pytest.approx(-math.log(expected.item()), rel=1e-9)
    # A numeral of the vocabulary: its own probability is its row of the full distribution, and the
    # h-softmax's share of it is its row of a softmax over the vocabulary's numerals without <unk_num>.
    torch.testing.assert_close(nll[1], -full[1, NUMERALS["7"]])
    rows = sorted(NUMERALS.values())
    known = torch.tensor([i != NUMERALS["<unk_num>"] for i in rows])
    soft = torch.softmax(h[1] @ head.numeral_weight[known].T + head.numeral_bias[known], -1)
    p_d = head.digit_rnn.log_prob(h[1:], fields["digit_ids"][1:]).exp()[0]
    p_g = head.mixture.log_prob(h[1:], fields["numeral_value"][1:], fields["numeral_precision"][1:]).exp()[0]
    w = torch.softmax(h[1] @ head.strategy_weight.T + head.strategy_bias, -1)
    p_class = torch.softmax(h[1] @ head.class_weight.T + head.class_bias, -1)[1]
    expected = p_class * (w[0] * soft[known.nonzero().squeeze(-1).tolist().index(rows.index(NUMERALS["7"]))]
                          + w[1] * p_d + w[2] * p_g)
    assert nll[1].item() == pytest.approx(-math.log(expected.item()), rel=1e-9)


@pytest.mark.parametrize("strategy", ["drnn", "combination"])
def test_scoring_targets_never_runs_the_digit_rnn_over_the_vocabulary(strategy, monkeypatch):
    """Training and evaluation read a numeral target's probability from its own digits: the d-RNN runs on
    the targets' strings, never on every numeral of the vocabulary (a pass that costs |N| prefixes per
    numeral). Recorded by patching the vocabulary-wide scorer; the vocabulary-wide logits, which do need
    it, are asked for with ``logits_to_keep`` and run it once."""
    from hf_nlm.evaluation.scoring import NO_LOGITS
    from hf_nlm.heads.numeral.densities.digit_rnn import DigitRNN
    from hf_nlm.tokenization.numerals import DIGIT_PAD, DIGITS_WIDTH, encode_digits

    calls = []
    original = DigitRNN.log_prob_of_strings
    def recorded(self, hidden, strings):
        calls.append(hidden[..., 0].numel())  # the rows scored against every numeral of the vocabulary
        return original(self, hidden, strings)

    monkeypatch.setattr(DigitRNN, "log_prob_of_strings", recorded)
    m = model(strategy)
    ids = torch.tensor([[5, NUMERALS["7"], 8, NUMERALS["<unk_num>"], 5]])
    digits = torch.full((1, 5, DIGITS_WIDTH), DIGIT_PAD)
    digits[0, 1] = torch.tensor(encode_digits("7"))
    digits[0, 3] = torch.tensor(encode_digits("42.5"))
    fields = {"numeral_mask": torch.tensor([[False, True, False, True, False]]),
              "numeral_value": torch.tensor([[0.0, 7.0, 0.0, 42.5, 0.0]], dtype=torch.float64),
              "numeral_precision": torch.tensor([[0, 0, 0, 1, 0]]), "digit_ids": digits}
    m.train()
    m(ids, labels=ids, **fields).loss.backward()
    m.eval()
    with torch.no_grad():
        loss = m(ids, labels=ids, logits_to_keep=NO_LOGITS, **fields).loss
        assert sum(calls) == 0
        full = m(ids, labels=ids, logits_to_keep=1, **fields)
    assert sum(calls) == 1 and full.logits.shape == (1, 1, V)
    torch.testing.assert_close(full.loss, loss)


def test_strategy_weight_picture_reads_the_weights_that_predicted_each_token(numeracy_tokenizer, tmp_path):
    from hf_nlm.plots.numerals import plot_strategy_weights

    tok = numeracy_tokenizer
    m = tokenized_model(tok, "combination")
    tokens, weights = plot_strategy_weights(m, tok, "in 1990 the deficit was 3.5", tmp_path / "w.png")
    assert (tmp_path / "w.png").stat().st_size > 1000
    assert tokens == ["in", "1990", "the", "deficit", "was", "3.5"]
    # Token t is predicted from the stream before it: the boundary, then tokens 0 .. t-1.
    pieces, hidden = _hidden_before_each_token(m, tok, ["in 1990 the deficit was 3.5"])
    with torch.no_grad():
        expected = m.lm_head.strategy_log_weights(hidden[:6]).exp()
    assert weights == pytest.approx(expected.numpy(), rel=1e-6)


# ----------------------------------------------------------------------------- joint word + numeral search

SMALL_NUMERALS = {"<unk_num>": 2, "7": 4, "12": 6}
OPEN_STRATEGIES = ["drnn", "mog", "combination", "dexp"]


def small_open_model(strategy: str) -> NumeracyLMForCausalLM:
    """8 tokens, no end-of-sequence token (so every hypothesis has the same length), a numeral-heavy
    class prior so that numerals, seen and unseen, compete with the words."""
    torch.manual_seed(1)
    config = NumeracyLMConfig(vocab_size=8, embedding_size=D, hidden_size=D, numeral_strategy=strategy,
                              numeral_vocab=SMALL_NUMERALS, bos_token_id=1, eos_token_id=None, pad_token_id=0,
                              mog_components=2)
    m = plain_search(NumeracyLMForCausalLM(config).eval())
    if strategy != "drnn":
        density_of(m.lm_head).initialize_from(torch.tensor([1990.0, 3.5, 12.0, 1200.0, 7.0, 250.0]))
    with torch.no_grad():
        m.lm_head.class_bias.copy_(torch.tensor([0.0, 1.5]))
    return m


def joint_next_scores(m, prefix: list[int]) -> torch.Tensor:
    """By hand: log p(next | prefix) over the vocabulary from an uncached forward, with <unk_num> scored
    as the numeral the decoder writes there."""
    with torch.no_grad():
        out = m(torch.tensor([prefix]), output_hidden_states=True)
        scores = torch.log_softmax(out.logits[0, -1].double(), -1)
        h = out.hidden_states[-1][0, -1]
        _, best = m.lm_head.best_unknown_numerals(h[None])
    scores[2] = best[0].double()
    return scores


@pytest.mark.parametrize("strategy", OPEN_STRATEGIES)
def test_joint_beam_search_equals_exhaustive_search(strategy):
    m = small_open_model(strategy)
    prompt = [3, 5]
    steps = 3
    best_score, best_seq = float("-inf"), None
    frontier = [(prompt, 0.0)]
    for _ in range(steps):  # every continuation of 3 tokens, each scored token by token
        frontier = [(seq + [w], score + float(s)) for seq, score in frontier
                    for w, s in enumerate(joint_next_scores(m, seq))]
    for seq, score in frontier:
        if score > best_score:
            best_score, best_seq = score, seq
    out = m.generate(torch.tensor([prompt]), max_new_tokens=steps, num_beams=8 ** (steps - 1),
                     do_sample=False, length_penalty=0.0, return_dict_in_generate=True, output_scores=True,
                     pad_token_id=0)
    assert out.sequences[0].tolist() == best_seq
    assert float(out.sequences_scores[0]) == pytest.approx(best_score, abs=1e-4)
    unk_positions = [t for t, w in enumerate(best_seq) if w == 2]
    assert sorted(out.numerals[0]) == unk_positions


@pytest.mark.parametrize("strategy", OPEN_STRATEGIES)
def test_joint_greedy_takes_the_best_joint_token_each_step_and_cache_changes_nothing(strategy):
    m = small_open_model(strategy)
    prompt = [3, 5, 2]
    seq = list(prompt)
    for _ in range(4):
        seq.append(int(joint_next_scores(m, seq).argmax()))
    for kwargs in ({"num_beams": 1}, {"num_beams": 3}):
        cached = m.generate(torch.tensor([prompt]), max_new_tokens=4, do_sample=False, use_cache=True,
                            pad_token_id=0, **kwargs)
        uncached = m.generate(torch.tensor([prompt]), max_new_tokens=4, do_sample=False, use_cache=False,
                              pad_token_id=0, **kwargs)
        assert torch.equal(cached, uncached)
        if kwargs["num_beams"] == 1:
            assert cached[0].tolist() == seq


@pytest.mark.parametrize("strategy", OPEN_STRATEGIES)
def test_generated_numerals_come_back_with_the_output_and_suppression_still_holds(strategy):
    from hf_nlm.tokenization.numerals import parse_numeral

    m = small_open_model(strategy)
    others = [i for i in range(8) if i != 2]
    for do_sample in (False, True):
        torch.manual_seed(0)
        out = m.generate(torch.tensor([[3, 5]]), max_new_tokens=3, do_sample=do_sample,
                         suppress_tokens=others, return_dict_in_generate=True, pad_token_id=0)
        assert out.sequences[0, 2:].tolist() == [2, 2, 2]
        assert sorted(out.numerals[0]) == [2, 3, 4]
        with torch.no_grad():
            hidden = m(out.sequences, output_hidden_states=True).hidden_states[-1][0]
        for t, text in out.numerals[0].items():
            assert parse_numeral(text) is not None and text not in SMALL_NUMERALS
            if not do_sample:  # greedy: the decoder's best numeral outside the vocabulary at that state
                # (the search's own, from the cached state: equal to the recomputed one up to float noise)
                written, again = parse_numeral(text), parse_numeral(m.lm_head.write_numeral(hidden[t - 1]))
                assert (written.precision == again.precision
                        and written.value == pytest.approx(again.value, rel=1e-6))
    # The joint score is put in before the other processors: a suppressed <unk_num> stays suppressed.
    out = m.generate(torch.tensor([[3, 5]]), max_new_tokens=5, do_sample=False, suppress_tokens=[2],
                     pad_token_id=0)
    assert 2 not in out[0, 2:].tolist()


@pytest.mark.parametrize("strategy", ["drnn", "mog"])
def test_story_cloze_scores_an_unseen_numeral_as_itself(numeracy_tokenizer, strategy):
    """story_cloze_accuracy hands the tokenizer's numeral fields to the model: an ending's unseen numeral
    gets log p(numeral | h) + log p(its digits / value | h), not the <unk_num> row; checked against one
    unbatched forward pass scored by hand with the head's branches."""
    from hf_nlm.evaluation import story_cloze_accuracy
    from hf_nlm.tokenization.numerals import parse_numeral

    tok, m = numeracy_tokenizer, tokenized_model(numeracy_tokenizer, strategy)
    head = m.lm_head
    context = "in 1990 the deficit was 3.5 billion dollars ."
    endings = ["up 47 % .", "up 12 % .", "up 48.5 % ."]  # 47 and 48.5 are outside the vocabulary
    result = story_cloze_accuracy(m, tok, [{"sentences": [context], "endings": endings, "label": 1}],
                                  batch_size=2)

    for ending, score in zip(endings, result["ending_log_probs"][0], strict=True):
        ids = [tok.eos_token_id] + tok(f"{context} {ending}", add_special_tokens=False)["input_ids"]
        pieces = ["<eos>"] + f"{context} {ending}".split()
        with torch.no_grad():
            hidden = m(torch.tensor([ids]), output_hidden_states=True).hidden_states[-1][0].double()
            full = head.double().log_probs(hidden)
            log_numeral = torch.log_softmax(hidden @ head.class_weight.T + head.class_bias, -1)[:, 1]
            expected = 0.0
            for t in range(len(ids) - len(ending.split()), len(ids)):
                numeral = parse_numeral(pieces[t])
                if ids[t] != tok.unk_num_token_id:
                    expected += full[t - 1, ids[t]].item()
                elif strategy == "drnn":
                    digits = torch.tensor([encode_digits(numeral.canonical)])
                    expected += (log_numeral[t - 1]
                                 + head.digit_rnn.log_prob(hidden[t - 1:t], digits)[0]).item()
                else:
                    value, precision = (torch.tensor([numeral.value], dtype=torch.float64),
                                        torch.tensor([numeral.precision]))
                    expected += (log_numeral[t - 1]
                                 + density_of(head).log_prob(hidden[t - 1:t], value, precision)[0]).item()
        m.float()
        assert score == pytest.approx(expected, rel=1e-4, abs=1e-4)
    # The two unseen numerals are told apart (as <unk_num> they would score the same up to "%").
    assert result["ending_log_probs"][0][0] != pytest.approx(result["ending_log_probs"][0][2], abs=1e-3)
