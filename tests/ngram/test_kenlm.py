"""Interoperability with KenLM itself: its Python query module loads our ARPA export and scores as we do.

Optional: PyPI's ``kenlm`` source package builds the module (it is no dependency of hf-nlm), e.g.
``pip install --target /tmp/kenlm-py kenlm``; point ``HF_NLM_KENLM_PATH`` at that folder (or install it
into the environment). The tests skip when the module cannot be imported (and fail then under
``HF_NLM_REQUIRE_DATA=1``).
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np
import pytest
from required_data import missing

from hf_nlm.ngram import ArpaLM, KneserNeyLM


def _kenlm():
    extra = os.environ.get("HF_NLM_KENLM_PATH")
    if extra and extra not in sys.path:
        sys.path.insert(0, extra)
    try:
        import kenlm
    except ImportError:
        missing("KenLM's Python module is not built (`pip install kenlm`, or see HF_NLM_KENLM_PATH)")
    return kenlm


WORDS = ["<unk>", "<eos>", "the", "cat", "sat", "dog", "mat", "on"]


@pytest.mark.parametrize("order", [2, 3, 5])
def test_kenlm_loads_our_arpa_and_scores_token_by_token(tmp_path, order):
    kenlm = _kenlm()
    rng = np.random.default_rng(order)
    train = rng.choice(len(WORDS), size=3000, p=[0.05, 0.15, 0.25, 0.15, 0.1, 0.1, 0.1, 0.1])
    lm = KneserNeyLM.from_ids(train, order, len(WORDS))
    path = tmp_path / "ours.arpa"
    lm.to_arpa(path, vocab=WORDS)
    model = kenlm.Model(str(path))  # no flag: the file has <s> and </s> as KenLM requires
    assert model.order == order
    sentences = [[2, 3, 4], [7], [2, 5, 4, 7, 2, 6, 0, 3], [0], [6, 6, 6, 6, 6, 6]]
    theirs = [score for s in sentences for score, _, _ in model.full_scores(" ".join(WORDS[w] for w in s))]
    stream = [w for s in sentences for w in [*s, 1]]
    ours = lm.stream_log_probs(stream, per_sentence=True) / math.log(10)
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=2e-5)  # KenLM keeps float32
    # The same file read back by us gives the model's probabilities.
    back = ArpaLM.from_arpa(path, vocab=WORDS)
    np.testing.assert_allclose(back.stream_log_probs(stream), lm.stream_log_probs(stream), atol=1e-9)
