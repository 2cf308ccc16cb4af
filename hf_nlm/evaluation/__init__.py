"""Evaluation: a model's scores on a split turned into reports.

* :mod:`~hf_nlm.evaluation.scoring`: summed -log p and per-token log-probabilities of a split, read the
  way the model's batching reads it (blocks, stream columns, paired examples);
* :mod:`~hf_nlm.evaluation.lm`: perplexity of a causal LM (:func:`evaluate_lm`, :func:`token_log_probs`);
* :mod:`~hf_nlm.evaluation.numeracy`: adjusted perplexity and the numeral cost breakdown
  (Spithourakis & Riedel 2018);
* :mod:`~hf_nlm.evaluation.number_prediction`: point predictions of numbers, MAPE / MdAPE;
* :mod:`~hf_nlm.evaluation.anomaly`: the surprising numerals of a text and the anomaly-detection AUC
  (Berg-Kirkpatrick & Spokoyny 2020);
* :mod:`~hf_nlm.evaluation.neural_cache`: perplexity with a continuous cache (Grave et al. 2017);
* :mod:`~hf_nlm.evaluation.seq2seq`: target perplexity and BLEU of an encoder-decoder model;
* :mod:`~hf_nlm.evaluation.story_cloze`: zero-shot Story Cloze accuracy with a causal LM.

Every report is :func:`perplexity_report`'s format, extended where a task has more to say.
"""

from ..data.batching import split_texts
from ..tokenization.decoding import decode_generated
from .anomaly import anomaly_pairs, corrupt_numeral, find_unlikely_numbers, numeral_anomaly_auc, paired_auc
from .lm import evaluate_lm, token_log_probs
from .neural_cache import NeuralCache, evaluate_with_neural_cache
from .number_prediction import evaluate_number_prediction, predict_numbers
from .numeracy import is_numeracy_tokenizer, numeracy_report, numeral_cost_breakdown, stream_token_texts
from .report import perplexity_report
from .scoring import eval_mode, example_log_probs, score_split, split_log_probs
from .seq2seq import evaluate_bleu, evaluate_seq2seq, generate_targets
from .story_cloze import story_cloze_accuracy

__all__ = [
    "NeuralCache",
    "anomaly_pairs",
    "corrupt_numeral",
    "decode_generated",
    "eval_mode",
    "evaluate_bleu",
    "evaluate_lm",
    "evaluate_number_prediction",
    "evaluate_seq2seq",
    "evaluate_with_neural_cache",
    "example_log_probs",
    "find_unlikely_numbers",
    "generate_targets",
    "is_numeracy_tokenizer",
    "numeral_anomaly_auc",
    "numeral_cost_breakdown",
    "numeracy_report",
    "paired_auc",
    "perplexity_report",
    "predict_numbers",
    "score_split",
    "split_log_probs",
    "split_texts",
    "stream_token_texts",
    "story_cloze_accuracy",
    "token_log_probs",
]
