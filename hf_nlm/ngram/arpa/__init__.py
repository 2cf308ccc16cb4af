"""The ARPA back-off format (as SRILM's ``ngram-count`` and KenLM's ``lmplz`` write it): export and import.

Layout::

    \\data\\
    ngram 1=<number of 1-grams>
    ngram 2=<number of 2-grams>

    \\1-grams:
    <log10 p(w)>	<w>	<log10 bow(w)>
    ...

    \\2-grams:
    <log10 p(w2 | w1)>	<w1> <w2>	<log10 bow(w1 w2)>
    ...

    \\end\\

A reader computes ``p(w | h) = p(h w)`` if ``h w`` is listed, else ``bow(h) * p(w | h')`` (``bow = 1``
when ``h`` is not listed or has no backoff field); the highest order has no backoff field.

Sentence boundaries. Our models have one boundary token (``<eos>``, ``lm.bos_id``) that both ends a
sentence (as a target) and says "a sentence starts here" (as context; the stream is padded with it).
The files are written in the standard form that KenLM (``query``, ``build_binary``) and SRILM load
with no flag: the boundary is ``</s>`` where it is predicted and ``<s>`` where it is context, ``<s>``
has the unigram log10 probability -99, and an n-gram ``h <s>`` that is a context of longer n-grams
is written beside ``h </s>`` (probability -99, the backoff weight). Reading maps ``<s>`` and
``</s>`` back to the one boundary id, so export then import is exact. Those tools score each sentence
from ``<s>`` alone, which our ``per_sentence=True`` scoring reproduces
(:meth:`~hf_nlm.ngram.base.NgramLM.stream_log_probs`); our default, the running stream, also reaches
across sentence ends, through n-grams such as ``w <s> v`` that the tools never query.

Words are matched by their strings: :func:`read_arpa` maps a file to a given vocabulary by word and
refuses one that does not match; a file read without a vocabulary keeps its own ids, and
``ArpaLM.evaluate`` maps a tokenizer to them by word.

Exactness: every unigram is written (the uniform floor of Kneser-Ney included), and every context that
has a backoff weight is written as an n-gram of its own, with the probability the model gives it (for a
context that never ended a target, that probability is the backed-off one). Reading the file back
(:class:`~hf_nlm.ngram.arpa_lm.ArpaLM`) therefore gives the model's probability for every context and
word, seen or not, up to the ``digits`` decimals printed of each log10 value.

This package is the file format only (it knows no model class): the models write themselves through
:func:`write_arpa` (``BackoffLM.to_arpa``), and ``ArpaLM`` is built from :func:`read_arpa`.

- :mod:`.writer`: :func:`write_arpa`, every line formatted by Python; :mod:`.bulk_writer` builds the
  same bytes a column at a time (numbers formatted by integer arithmetic in numpy, words gathered and
  lines joined by Apache Arrow's string kernels) wherever the values allow it.
- :mod:`.reader`: :func:`read_arpa`, which maps the words of a parsed file to ids; the parsing is
  :mod:`.bulk_reader` (a regular file, a block of lines at a time: numpy for the layout, Arrow for the
  numbers and the words' ids) or else :mod:`.line_reader` (line by line, naming the line of whatever
  is wrong).
- :mod:`.format`: the markers and the pieces both directions share.
"""

from .reader import read_arpa
from .writer import write_arpa

__all__ = ["read_arpa", "write_arpa"]
