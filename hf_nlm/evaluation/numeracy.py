"""Numeracy evaluation (Spithourakis & Riedel 2018): perplexity and adjusted perplexity over all tokens,
words only and numerals only, and where a numeral's cost comes from (the class and the branch of the
hierarchical softmax, sec. 3.2)."""

from __future__ import annotations

import math

import torch

from ..data.batching import batching_for, split_texts
from .report import perplexity_report
from .scoring import split_log_probs


def is_numeracy_tokenizer(tokenizer) -> bool:
    """Whether ``tokenizer`` tells numerals from words (it has a ``numeral_vocab``)."""
    return getattr(tokenizer, "numeral_vocab", None) is not None


def numeracy_report(batching, model, tokenizer, texts, stream, stats, batch_size: int = 32, device=None) -> dict:
    """:func:`perplexity_report` plus the ``adjusted_perplexity`` metric's figures, from exact
    per-token log-probabilities of ``stream`` (the encoded ``texts``; its ``numeral_mask`` field says
    which targets are numerals)."""
    log_probs, report = _adjusted_perplexity_of_stream(batching, model, tokenizer, texts, stream, batch_size, device)
    total = -float(log_probs.double().sum())
    return {**perplexity_report(total, stream["input_ids"].numel(), stats["num_words"], stats["num_unk"]), **report}


def _adjusted_perplexity_of_stream(batching, model, tokenizer, texts, stream, batch_size: int, device,
                                   with_hidden: bool = False):
    """Every token of ``stream`` scored exactly, and the ``adjusted_perplexity`` metric's report of those
    scores: ``(log_probs, report)``, with ``with_hidden`` ``(log_probs, hidden, report)``."""
    from ..data.lm import unknown_token_ids
    from ..metrics import adjusted_perplexity_report

    if "numeral_mask" not in stream:
        raise ValueError("a numeracy evaluation needs the numeral_mask token field: use the numeracy tokenizer's "
                         "token_features (tokenizer.token_features)")
    ids = stream["input_ids"]
    scored = split_log_probs(batching, model, stream, batch_size, device, with_hidden=with_hidden)
    log_probs = scored[0] if with_hidden else scored
    if log_probs.numel() != ids.numel():
        raise RuntimeError(f"scored {log_probs.numel()} tokens but the stream has {ids.numel()}")
    unknown = torch.isin(ids, torch.tensor(unknown_token_ids(tokenizer)))
    if getattr(getattr(model, "lm_head", None), "open_numeral_vocabulary", False):
        # The head scored each numeral as itself (its digits or value), not as <unk_num>: nothing to adjust.
        unknown &= ~stream["numeral_mask"].bool()
    report = adjusted_perplexity_report(
        log_probs.double().cpu().numpy(), stream["numeral_mask"].numpy().astype(int), unknown.numpy().astype(int),
        stream_token_texts(texts, tokenizer),
    )
    return (log_probs, scored[1], report) if with_hidden else (log_probs, report)


def stream_token_texts(texts, tokenizer) -> list[str]:
    """The text of every token of the stream ``tokenize_stream`` builds from ``texts`` (each line's tokens,
    then ``<eos>``), as the tokenizer's normalizer sees it: the strings whose distinct values are the
    OOV types of the adjusted perplexity."""
    encoded = tokenizer(list(texts), add_special_tokens=False, return_offsets_mapping=True)
    normalizer = tokenizer.backend_tokenizer.normalizer
    out: list[str] = []
    for text, spans in zip(texts, encoded["offset_mapping"], strict=True):
        pieces = [text[a:b] for a, b in spans]
        out += [normalizer.normalize_str(p) for p in pieces] if normalizer is not None else pieces
        out.append(tokenizer.eos_token)
    return out


def numeral_cost_breakdown(model, tokenizer, texts, block_size: int = 256, device=None) -> dict[str, float | int]:
    """Where a numeracy LM's numeral perplexity comes from: for every numeral target of ``texts``, its
    cost -log p(s | h) (nats) split into the cost of saying that a numeral comes and the cost of
    saying which one,

        -log p(s | h) = -log p(numeral | h) - log p(s | numeral, h),  p(numeral | h) = sum_{n in N} p(n | h),

    N the tokenizer's numerals (``<unk_num>`` included). For the hierarchical heads p(numeral | h) is
    the class branch of Spithourakis & Riedel's h-softmax (sec. 3.2); for a one-softmax model it is
    the mass that softmax puts on numerals, so every strategy is split the same way.

    Returns means over the numeral targets: ``numeral_class_nll``; ``numeral_branch_nll`` (the rest);
    ``numeral_branch_nll_adjusted``, the rest with each ``<unk_num>`` target charged as the adjusted
    perplexity charges it (log of the number of distinct OOV numeral types; nothing for an
    open-vocabulary head, which scores such a numeral as itself); ``numeral_branch_nll_known`` /
    ``numeral_branch_nll_unknown``, the unadjusted rest over the numerals in the vocabulary / outside
    it; and the counts. So ``exp(numeral_class_nll + numeral_branch_nll_adjusted)`` is
    :func:`evaluate_lm`'s ``adjusted_perplexity_numerals`` and ``exp(numeral_class_nll +
    numeral_branch_nll)`` its ``perplexity_numerals``. Each numeral is scored from its full left context.
    """
    if not is_numeracy_tokenizer(tokenizer):
        raise ValueError("a numeral cost breakdown needs a numeracy tokenizer (hf_nlm.tokenization.train_numeracy_tokenizer)")
    batching = batching_for(model, tokenizer, block_size)
    texts = split_texts(texts)
    stream, _ = batching.encode(texts)
    mask = stream["numeral_mask"].bool()
    if not bool(mask.any()):
        raise ValueError("the text holds no numeral: nothing to break down")
    log_probs, hidden, report = _adjusted_perplexity_of_stream(
        batching, model, tokenizer, texts, stream, batching.exact_batch_size(32), device, with_hidden=True)
    numeral_ids = torch.tensor(sorted(tokenizer.numeral_vocab.values()), device=hidden.device)
    with torch.no_grad():
        numeral_class = model.lm_head.log_probs(hidden[mask.to(hidden.device)])[:, numeral_ids].logsumexp(-1)
    class_nll = -numeral_class.double().cpu()
    branch = -log_probs[mask.to(log_probs.device)].double().cpu() - class_nll
    outside = stream["input_ids"][mask] == tokenizer.unk_num_token_id

    def mean(x: torch.Tensor) -> float | None:
        return float(x.mean()) if x.numel() else None

    return {
        "numeral_class_nll": mean(class_nll), "numeral_branch_nll": mean(branch),
        "numeral_branch_nll_adjusted": math.log(report["adjusted_perplexity_numerals"]) - mean(class_nll),
        "numeral_branch_nll_known": mean(branch[~outside]), "numeral_branch_nll_unknown": mean(branch[outside]),
        "num_numerals": int(mask.sum()), "num_unknown_numerals": int(outside.sum()),
        "num_oov_numeral_types": report["num_oov_numeral_types"],
    }

