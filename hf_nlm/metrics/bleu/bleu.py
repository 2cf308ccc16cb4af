"""Corpus BLEU computed with sacrebleu, as an ``evaluate.Metric`` that works offline.

``evaluate.load("sacrebleu")`` fetches its script from the Hub; this module gives the same inputs
and output keys (``score``, ``counts``, ``totals``, ``precisions``, ``bp``, ``sys_len``,
``ref_len``) from a file shipped in the package. The computation is ``sacrebleu.corpus_bleu``
itself (Papineni et al. 2002, with Post 2018's standard tokenization), so scores are comparable
with published sacreBLEU numbers.

This file is self-contained (it imports only ``datasets``, ``evaluate`` and ``sacrebleu``) so that
``evaluate.load("<path to this file or its folder>")`` works offline.
"""

from __future__ import annotations

import datasets
import evaluate
import sacrebleu

_DESCRIPTION = """\
Corpus-level BLEU (Papineni et al. 2002) computed by sacrebleu (Post 2018): predictions are
system outputs, references one or more reference strings per prediction. Scores are in [0, 100].
"""

_CITATION = """\
@inproceedings{papineni2002bleu,
  title={Bleu: a Method for Automatic Evaluation of Machine Translation},
  author={Papineni, Kishore and Roukos, Salim and Ward, Todd and Zhu, Wei-Jing},
  booktitle={Proceedings of ACL},
  pages={311--318},
  year={2002}
}
@inproceedings{post-2018-call,
  title={A Call for Clarity in Reporting {BLEU} Scores},
  author={Post, Matt},
  booktitle={Proceedings of the Third Conference on Machine Translation},
  pages={186--191},
  year={2018}
}
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): system outputs, one string per segment.
    references (`list` of `list` of `str`, or `list` of `str`): the reference(s) of each prediction.
        Predictions may have different numbers of references.
    tokenize (`str`, default "13a"): sacrebleu tokenizer: "none", "13a", "intl", "char", "zh", "ja-mecab", ...
    lowercase (`bool`, default False): compare lowercased text.
    smooth_method (`str`, default "exp"): "none", "floor", "add-k" or "exp".
    smooth_value (`float`, optional): value for "floor" and "add-k" smoothing.
    force (`bool`, default False): do not warn about input that looks already tokenized.
    use_effective_order (`bool`, default False): ignore n-gram orders with no match (for sentence BLEU).
Returns:
    score (`float`): BLEU in [0, 100].
    counts (`list` of `int`): matching 1..4-gram counts.
    totals (`list` of `int`): 1..4-gram counts of the predictions.
    precisions (`list` of `float`): modified n-gram precisions, in percent.
    bp (`float`): brevity penalty.
    sys_len (`int`): length of the predictions in tokens.
    ref_len (`int`): effective reference length in tokens.
Examples:
    >>> bleu = Bleu()
    >>> result = bleu.compute(predictions=["the cat sat on the mat"], references=[["the cat sat on the mat"]])
    >>> round(result["score"], 2)
    100.0
"""


class Bleu(evaluate.Metric):
    """Corpus BLEU via ``sacrebleu.corpus_bleu`` (see the module docstring)."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            # Two accepted input formats: several references per prediction, or exactly one.
            features=[
                datasets.Features(
                    {
                        "predictions": datasets.Value("string"),
                        "references": datasets.Sequence(datasets.Value("string")),
                    }
                ),
                datasets.Features(
                    {
                        "predictions": datasets.Value("string"),
                        "references": datasets.Value("string"),
                    }
                ),
            ],
            codebase_urls=["https://github.com/mjpost/sacrebleu"],
            reference_urls=["https://aclanthology.org/P02-1040/", "https://aclanthology.org/W18-6319/"],
        )

    def add_batch(self, *, predictions=None, references=None, **kwargs) -> None:
        """Add segments; overridden so that an empty or mismatched batch fails with a clear message."""
        if predictions is not None and references is not None:
            if len(predictions) == 0:
                raise ValueError("BLEU got an empty list of predictions: give at least one segment")
            if len(predictions) != len(references):
                raise ValueError(f"BLEU got {len(predictions)} predictions but {len(references)} references")
        super().add_batch(predictions=predictions, references=references, **kwargs)

    def compute(self, *, predictions=None, references=None, **kwargs) -> dict | None:
        """Corpus BLEU of everything added; overridden to fail clearly when nothing was added."""
        if predictions is None and references is None and self.writer is None:
            raise ValueError("BLEU has no segments: add some (`add`, `add_batch`) or pass predictions= and "
                             "references=")
        return super().compute(predictions=predictions, references=references, **kwargs)

    def _compute(
        self,
        predictions,
        references,
        tokenize: str = "13a",
        lowercase: bool = False,
        smooth_method: str = "exp",
        smooth_value: float | None = None,
        force: bool = False,
        use_effective_order: bool = False,
    ) -> dict:
        if len(predictions) == 0:  # sacrebleu would fail with "max() arg is an empty sequence"
            raise ValueError("BLEU is undefined over zero segments: no prediction was given")
        references = [[refs] if isinstance(refs, str) else list(refs) for refs in references]
        if any(len(refs) == 0 for refs in references):
            first = next(i for i, refs in enumerate(references) if len(refs) == 0)
            raise ValueError(f"prediction {first} has no reference")
        # sacrebleu wants one stream per reference "slot"; None pads segments with fewer references.
        num_slots = max(len(refs) for refs in references)
        ref_streams = [[refs[k] if k < len(refs) else None for refs in references] for k in range(num_slots)]
        output = sacrebleu.corpus_bleu(
            predictions,
            ref_streams,
            smooth_method=smooth_method,
            smooth_value=smooth_value,
            force=force,
            lowercase=lowercase,
            tokenize=tokenize,
            use_effective_order=use_effective_order,
        )
        return {
            "score": output.score,
            "counts": output.counts,
            "totals": output.totals,
            "precisions": output.precisions,
            "bp": output.bp,
            "sys_len": output.sys_len,
            "ref_len": output.ref_len,
        }
