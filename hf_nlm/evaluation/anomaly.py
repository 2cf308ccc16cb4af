"""Numeral anomaly detection with a numeracy LM: which numbers of a text the model finds unlikely, and how
well its surprisal tells a true number from a corrupted one.

* :func:`find_unlikely_numbers`: every numeral of a text with its surprisal -log p(numeral | left context)
  (Spithourakis & Riedel, ACL 2018: every numeral strategy gives a numeral an exact probability), the part
  of it the numeral branch alone charges, its rank among the numerals the model expects there, and the
  model's expected value there (the median of :func:`~hf_nlm.evaluation.predict_numbers`);
* :func:`numeral_anomaly_auc`: the anomaly-detection evaluation of Berg-Kirkpatrick & Spokoyny (EMNLP 2020,
  "An Empirical Investigation of Contextualized Number Prediction"): one numeral per text replaced by a
  corrupted value (x10, /10, two adjacent digits swapped, a random magnitude), and how often the model's
  surprisal ranks the corrupted number above the true one in the same context (:func:`anomaly_pairs`,
  :func:`corrupt_numeral`, :func:`paired_auc`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from decimal import Decimal

import torch

from ..data.batching import batching_for, split_texts
from ..heads import OutputHead
from ..heads.base import Targets
from ..tokenization.numerals import WIDTH_FOLD, parse_numeral
from .number_prediction import numeral_estimates, numeral_estimator
from .numeracy import DEFAULT_NUMERAL_CHUNK_SIZE, is_numeracy_tokenizer, numeral_chunks, score_numerals
from .scoring import eval_mode, split_log_probs

#: The corruptions of :func:`corrupt_numeral`, in the order :func:`numeral_anomaly_auc` reports them.
CORRUPTIONS = ("x10", "/10", "digit_swap", "random")
#: A ``random`` corruption is int(10 ** U(0, RANDOM_MAX_EXPONENT)): 1 to 999,999.
RANDOM_MAX_EXPONENT = 6
#: How many tokens before a numeral :func:`find_unlikely_numbers` gives as its ``context``.
CONTEXT_TOKENS = 5

_FOLD = str.maketrans(WIDTH_FOLD)
_SIGNS = "-−+"  # a numeral's sign after width folding (parse_numeral's signs)


def check_numeracy_model(model, tokenizer, task: str) -> None:
    """A one-line ``ValueError`` unless ``model`` is a numeracy LM (an output head, and a ``numeracy_lm``
    config or a numeral vocabulary in its config) and ``tokenizer`` a numeracy tokenizer; ``task`` says what
    needs them."""
    config = getattr(model, "config", None)
    numeracy = (getattr(config, "model_type", None) == "numeracy_lm"
                or getattr(config, "numeral_vocab", None) is not None)
    if not isinstance(getattr(model, "lm_head", None), OutputHead) or not numeracy:
        kind = getattr(config, "model_type", None) or type(model).__name__
        raise ValueError(f"{task} needs a numeracy LM (model_type numeracy_lm, trained with --model "
                         f"numeracy_lm), not a {kind} model")
    if not is_numeracy_tokenizer(tokenizer):
        raise ValueError(f"{task} needs a numeracy tokenizer, which tells numerals from words (trained with "
                         "--tokenizer numeracy; hf_nlm.tokenization.train_numeracy_tokenizer)")


def find_unlikely_numbers(model, tokenizer, texts, block_size: int = 256, device=None,
                          numeral_chunk_size: int = DEFAULT_NUMERAL_CHUNK_SIZE,
                          top: int | None = None) -> list[dict]:
    """How surprising every numeral of ``texts`` (a list of strings or a ``datasets`` split) is to a numeracy
    LM (Spithourakis & Riedel, ACL 2018), each read from its full left context (a recurrent model carries its
    state over the whole stream of texts, as the evaluation does).

    One dict per numeral target of the token stream, in stream order:

    * ``index``: its position in the token stream (as :func:`predict_numbers` gives it); ``text_index``,
      ``start``, ``end``: the text it is in and its characters there; ``numeral``: its text as written;
      ``context``: the text of the (up to :data:`CONTEXT_TOKENS`) tokens before it in its text; ``value``;
      ``in_vocabulary``: whether it is one of the tokenizer's numerals (not ``<unk_num>``);
    * ``surprisal``: -log p(numeral | h) in nats, the exact per-token probability the evaluation gives that
      target (:func:`~hf_nlm.evaluation.split_log_probs`). An open head (``drnn``, ``mog``, ``dexp``,
      ``combination``) scores the numeral itself; a closed head (``softmax``, ``softmax_digits``,
      ``hsoftmax``) only knows ``<unk_num>`` for a numeral outside its vocabulary, and that token's
      probability is the one given (``in_vocabulary`` False);
    * ``branch_surprisal``: -log p(s | numeral, h), the surprisal less the cost of saying that a numeral
      comes (the class branch, split as :func:`~hf_nlm.evaluation.numeral_cost_breakdown` splits it): how
      unlikely this number is among numbers;
    * ``rank``: 1 + the number of the vocabulary's numerals (``<unk_num>`` and the numeral itself left out)
      to which the head's distribution there (``head.log_probs``) gives a higher probability;
    * ``expected``: the model's expected value there, the median that
      :func:`~hf_nlm.evaluation.predict_numbers` gives.

    ``top=N`` returns the N most surprising instead, most surprising first. The vocabulary-wide distribution
    is computed ``numeral_chunk_size`` numerals at a time, so memory follows the chunk, not the split; no
    figure depends on the chunk. ``ValueError`` (one line) for a model that is not a numeracy LM, a tokenizer
    without numerals, a text without numerals, a chunk size below 1 or one that cannot fit."""
    check_numeracy_model(model, tokenizer, "checking numbers")
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 1):
        raise ValueError(f"top is how many numerals to return, an integer >= 1, got {top!r}")
    head = model.lm_head
    density, numerals = numeral_estimator(head, tokenizer)
    candidates = sorted(i for i in tokenizer.numeral_vocab.values() if i != tokenizer.unk_num_token_id)

    def rank_and_median(hidden, vocabulary, target_ids, target_log_probs) -> torch.Tensor:
        ids = torch.tensor(candidates, dtype=torch.long, device=vocabulary.device)
        own = target_log_probs.to(vocabulary.device).double()[:, None]
        # The numeral's own entry is left out rather than compared: its vocabulary-wide score and its exact
        # score may differ in the last bit, which must not move it by one rank.
        higher = ((vocabulary[:, ids].double() > own)
                  & (ids[None, :] != target_ids.to(vocabulary.device)[:, None]))
        median = numeral_estimates(head, density, numerals, hidden, "median", 0.5, 0.5, vocabulary)[0]
        return torch.stack([1 + higher.sum(-1).double(), median.double().to(vocabulary.device)], -1)

    scored = score_numerals(model, tokenizer, texts, block_size, device, numeral_chunk_size, rank_and_median,
                            task="checking numbers", nothing="nothing to check")
    mask = scored.mask
    positions = torch.nonzero(mask).squeeze(-1)
    surprisal = -scored.log_probs[mask.to(scored.log_probs.device)].double().cpu()
    branch = surprisal + scored.numeral_class  # -log p(s | h) - (-log p(numeral | h))
    ids = scored.stream["input_ids"][mask]
    values = scored.stream["numeral_value"][mask]
    locations = _token_locations(tokenizer, scored.texts, positions)
    rows = []
    for n, (text_index, start, end, context) in enumerate(locations):
        rows.append({
            "index": int(positions[n]), "text_index": text_index, "start": start, "end": end,
            "numeral": scored.texts[text_index][start:end], "context": context, "value": float(values[n]),
            "in_vocabulary": int(ids[n]) != tokenizer.unk_num_token_id, "surprisal": float(surprisal[n]),
            "branch_surprisal": float(branch[n]), "rank": int(scored.extra[n, 0]),
            "expected": float(scored.extra[n, 1]),
        })
    if top is not None:
        rows = sorted(rows, key=lambda row: -row["surprisal"])[:top]  # stable: ties keep the stream order
    return rows


def _line_starts(lengths: Sequence[int]) -> list[int]:
    """Where each text's tokens start in the stream of ``tokenize_stream`` (each text's tokens, then
    ``<eos>``)."""
    starts, at = [], 0
    for n in lengths:
        starts.append(at)
        at += n + 1
    return starts


def _token_locations(tokenizer, texts: list[str], positions: torch.Tensor) -> list[tuple[int, int, int, str]]:
    """``(text index, start, end, context)`` of the tokens at stream ``positions`` (sorted): the text and
    characters of each, and the text of the :data:`CONTEXT_TOKENS` tokens before it in its text."""
    offsets = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    starts = torch.tensor(_line_starts([len(spans) for spans in offsets]))
    text_index = torch.searchsorted(starts, positions, right=True) - 1
    out = []
    for i, position in zip(text_index.tolist(), positions.tolist(), strict=True):
        k = position - int(starts[i])
        start, end = offsets[i][k]
        before = offsets[i][max(0, k - CONTEXT_TOKENS)][0] if k else start
        out.append((i, start, end, texts[i][before:start].strip()))
    return out


# ----------------------------------------------------------------------------- corruptions and the AUC


def corrupt_numeral(numeral: str, corruption: str, rng: random.Random | None = None) -> str | None:
    """``numeral`` (one numeral token as written) with a corrupted value, written the way it is written, or
    None where the corruption leaves the number as it is (Berg-Kirkpatrick & Spokoyny, EMNLP 2020):

    * ``"x10"``: ten times the value, with the same number of decimals (``2.50`` -> ``25.00``,
      ``12`` -> ``120``);
    * ``"/10"``: a tenth of the value, one decimal more so that it is exact (``12`` -> ``1.2``,
      ``2.50`` -> ``0.250``);
    * ``"digit_swap"``: two adjacent different digits swapped, a pair drawn with ``rng`` among those of the
      same run of digits (thousands separators skipped, never across the decimal point) that do not put a
      0 first in a longer integer part (``105`` -> ``150``); None if there is none (``7``, ``11``);
    * ``"random"``: a random magnitude, int(10 ** U(0, 6)) drawn with ``rng``, written as an integer.

    The sign stays as written. Thousands separators stay where the numeral has them: the corrupted value is
    written in groups of three (``1,200`` x10 is ``12,000``, /10 is ``120.0``; a digit swap keeps the commas
    in place: ``1,234`` -> ``2,134``). None also where the corrupted value equals the original (``0`` x10,
    a random draw of the same number). ``ValueError`` if ``numeral`` is not one numeral token or
    ``corruption`` not one of :data:`CORRUPTIONS`."""
    if corruption not in CORRUPTIONS:
        raise ValueError(f"unknown corruption {corruption!r}; choose from {', '.join(CORRUPTIONS)}")
    if parse_numeral(numeral) is None:
        raise ValueError(f"{numeral!r} is not a numeral token")
    rng = rng if rng is not None else random.Random(0)
    folded = numeral.translate(_FOLD)  # one character for one: positions are those of `numeral`
    body = folded.lstrip(_SIGNS)
    sign = numeral[: len(numeral) - len(body)]
    if corruption == "digit_swap":
        return _swap_digits(numeral, folded, len(sign), rng)
    magnitude = Decimal(body.replace(",", ""))
    decimals = len(body.partition(".")[2])
    if corruption == "x10":
        new = magnitude * 10
    elif corruption == "/10":
        new, decimals = magnitude / 10, decimals + 1
    else:
        new, decimals = Decimal(int(10 ** rng.uniform(0, RANDOM_MAX_EXPONENT))), 0
    if new == magnitude:
        return None
    return sign + format(new, f"{',' if ',' in body else ''}.{decimals}f")


def _swap_digits(numeral: str, folded: str, start: int, rng: random.Random) -> str | None:
    """``numeral`` with a pair of adjacent different digits swapped (see :func:`corrupt_numeral`)."""
    integer_end = folded.find(".") if "." in folded else len(folded)
    pairs = []
    for lo, hi in ((start, integer_end), (integer_end + 1, len(folded))):
        digits = [p for p in range(lo, hi) if folded[p].isdigit()]
        for p, q in zip(digits, digits[1:], strict=False):
            leading_zero = lo == start and p == digits[0] and len(digits) > 1 and folded[q] == "0"
            if folded[p] != folded[q] and not leading_zero:
                pairs.append((p, q))
    if not pairs:
        return None
    p, q = pairs[rng.randrange(len(pairs))]
    chars = list(numeral)
    chars[p], chars[q] = chars[q], chars[p]
    return "".join(chars)


def paired_auc(original: Sequence[float], corrupted: Sequence[float]) -> float | None:
    """P(score of the corrupted > score of the original) over pairs scored in the same context: the mean
    over pairs of 1 where ``corrupted[i] > original[i]``, 1/2 where they tie, 0 otherwise (Berg-Kirkpatrick
    & Spokoyny compare each true number with its corrupted copy in the same context). None for no pair."""
    if len(original) != len(corrupted):
        raise ValueError(f"{len(original)} original scores but {len(corrupted)} corrupted ones: "
                         "give one per pair")
    if not len(original):
        return None
    wins = sum(1.0 if c > o else 0.5 if c == o else 0.0 for o, c in zip(original, corrupted, strict=True))
    return wins / len(original)


def anomaly_pairs(model, tokenizer, texts, corruptions: Sequence[str] = CORRUPTIONS, seed: int = 0,
                  block_size: int = 256, device=None) -> list[dict]:
    """The (original, corrupted) pairs of :func:`numeral_anomaly_auc`, one per text with a numeral and
    corruption that changes it: ``{"text_index", "index" (stream position), "corruption", "original",
    "corrupted" (the numeral's text before / after), "corrupted_text", "surprisal_original",
    "surprisal_corrupted"}`` (nats), in text order, then in the order of ``corruptions``."""
    return _anomaly_pairs(model, tokenizer, texts, corruptions, seed, block_size, device)[0]


def _anomaly_pairs(model, tokenizer, texts, corruptions, seed, block_size, device) -> tuple[list[dict], int]:
    """:func:`anomaly_pairs` and the number of texts that hold a numeral."""
    check_numeracy_model(model, tokenizer, "numeral anomaly detection")
    unknown = [c for c in corruptions if c not in CORRUPTIONS]
    if unknown or not corruptions:
        raise ValueError(f"corruptions are some of {', '.join(CORRUPTIONS)}, got {list(corruptions)!r}")
    texts = list(split_texts(texts))  # a datasets split's column: a list, which the tokenizer takes
    batching = batching_for(model, tokenizer, block_size)
    stream, _ = batching.encode(texts)
    mask = stream["numeral_mask"].bool()
    encoded = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
    starts = _line_starts([len(ids) for ids in encoded["input_ids"]])
    pairs, chosen, is_numeral = [], {}, mask.tolist()  # a list: indexing a tensor per token is slow
    for i, text in enumerate(texts):
        numeral_tokens = [k for k in range(len(encoded["input_ids"][i])) if is_numeral[starts[i] + k]]
        if not numeral_tokens:
            continue
        # A generator per text and per (text, corruption), seeded by name: a text's draws do not depend on
        # the other texts nor on which corruptions are asked for.
        k = random.Random(f"{seed}/{i}").choice(numeral_tokens)
        chosen[i] = k
        a, b = encoded["offset_mapping"][i][k]
        for name in corruptions:
            new = corrupt_numeral(text[a:b], name, random.Random(f"{seed}/{i}/{name}"))
            if new is not None:
                pairs.append({"text_index": i, "index": starts[i] + k, "corruption": name,
                              "original": text[a:b], "corrupted": new,
                              "corrupted_text": text[:a] + new + text[b:]})
    if not chosen:
        raise ValueError("the text holds no numeral: nothing to corrupt")
    pairs, targets = _corrupted_targets(batching, tokenizer, pairs, encoded, chosen)
    keep = torch.zeros_like(mask)
    keep[[starts[i] + k for i, k in chosen.items()]] = True
    log_probs, hidden = split_log_probs(batching, model, stream, batching.exact_batch_size(32), device,
                                        with_hidden=True, hidden_mask=keep)
    row_of = {int(p): r for r, p in enumerate(torch.nonzero(keep).squeeze(-1))}
    rows = torch.tensor([row_of[p["index"]] for p in pairs], dtype=torch.long)
    corrupted = torch.zeros(len(pairs), dtype=torch.float64)
    head = model.lm_head
    with eval_mode(model), torch.no_grad():
        # The corrupted numeral follows the same tokens as the original: the same hidden state predicts it.
        for chunk in numeral_chunks(len(pairs), DEFAULT_NUMERAL_CHUNK_SIZE):
            h = hidden[rows[chunk].to(hidden.device)]
            fields = {name: v[chunk].to(h.device) for name, v in targets.fields.items()
                      if name in head.target_fields}
            # In float32, as the evaluation's per-token scores are (batch_log_probs): the original's is one of
            # them.
            corrupted[chunk] = (head.nll(h, Targets(targets.ids[chunk].to(h.device), fields))
                                .float().cpu().double())
    for pair, surprisal in zip(pairs, corrupted.tolist(), strict=True):
        pair["surprisal_original"] = -float(log_probs[pair["index"]])
        pair["surprisal_corrupted"] = surprisal
    return pairs, len(chosen)


def _corrupted_targets(batching, tokenizer, pairs: list[dict], encoded, chosen: dict[int, int]):
    """The pairs whose corrupted text reads as the original up to the numeral and the corrupted numeral as
    one numeral token in its place, and that token's target (id and per-token fields) in each."""
    if not pairs:
        return [], Targets(torch.empty(0, dtype=torch.long))
    corrupted_texts = [p["corrupted_text"] for p in pairs]
    stream, _ = batching.encode(corrupted_texts)
    again = tokenizer(corrupted_texts, add_special_tokens=False, return_offsets_mapping=True)
    starts = _line_starts([len(ids) for ids in again["input_ids"]])
    kept, positions = [], []
    for n, pair in enumerate(pairs):
        i, k = pair["text_index"], chosen[pair["text_index"]]
        a = encoded["offset_mapping"][i][k][0]
        ids, spans = again["input_ids"][n], again["offset_mapping"][n]
        # A corrupted value the tokenizer would not read as one numeral there (longer than a numeral may be,
        # glued to what follows) is not the same question: the pair is dropped.
        if (len(ids) > k and ids[:k] == encoded["input_ids"][i][:k]
                and tuple(spans[k]) == (a, a + len(pair["corrupted"]))
                and bool(stream["numeral_mask"][starts[n] + k])):
            kept.append(pair)
            positions.append(starts[n] + k)
    index = torch.tensor(positions, dtype=torch.long)
    fields = {name: value[index] for name, value in stream.items() if name != "input_ids"}
    return kept, Targets(stream["input_ids"][index], fields)


def numeral_anomaly_auc(model, tokenizer, texts, corruptions: Sequence[str] = CORRUPTIONS, seed: int = 0,
                        block_size: int = 256, device=None) -> dict:
    """Numeral anomaly detection (Berg-Kirkpatrick & Spokoyny, EMNLP 2020, "An Empirical Investigation of
    Contextualized Number Prediction"): can the model's surprisal tell a true number from a corrupted one?

    For every text of ``texts`` (a held-out split: lines or passages) that holds a numeral, one of its
    numerals is drawn (seeded by ``seed`` and the text's index) and, for each corruption, a copy of the text
    is made with that numeral replaced by :func:`corrupt_numeral`'s corrupted value, byte-identical
    otherwise. Both numerals are scored in the same context, the original text's left context (the whole
    stream before it, as the evaluation reads it): the surprisal -log p(numeral | h) of the original and of
    the corrupted numeral, the exact per-token probability each gets (for a closed head, ``<unk_num>``'s
    for a numeral outside the vocabulary, so that two unknown numerals tie).

    The AUC is computed per pair: the fraction of pairs whose corrupted numeral is more surprising than the
    original, ties counting 1/2 (:func:`paired_auc`), because each corrupted number is compared with the
    true number of the same context. Pairs are skipped where a corruption leaves the number unchanged
    (``0`` x10, no two adjacent different digits) or where the corrupted value would not be read as one
    numeral token in its place.

    Returns ``{"auc": over every pair, "num_pairs", "num_texts" (texts with a numeral), "seed",
    "corruptions": {name: {"auc", "num_pairs"}}}`` (``auc`` None where there is no pair). Deterministic
    given ``seed``."""
    pairs, num_texts = _anomaly_pairs(model, tokenizer, texts, corruptions, seed, block_size, device)

    def auc(selected: list[dict]) -> float | None:
        return paired_auc([p["surprisal_original"] for p in selected],
                          [p["surprisal_corrupted"] for p in selected])

    per_corruption = {}
    for name in dict.fromkeys(corruptions):
        selected = [p for p in pairs if p["corruption"] == name]
        per_corruption[name] = {"auc": auc(selected), "num_pairs": len(selected)}
    return {"auc": auc(pairs), "num_pairs": len(pairs), "num_texts": num_texts, "seed": seed,
            "corruptions": per_corruption}
