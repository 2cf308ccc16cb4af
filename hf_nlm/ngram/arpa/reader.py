"""Reading an ARPA file: :func:`read_arpa` parses it (:mod:`.bulk_reader`, else :mod:`.line_reader`)
and maps its words to ids."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from ..counts import row_ranks
from .bulk_reader import BulkFile, read_bulk
from .format import BOS, EOS, PathLike, line_error, row_hashes
from .line_reader import read_lines


def _decode(path: Path, data: bytes) -> str:
    """The file's text; a byte sequence that is not UTF-8 is refused with its line and byte offset."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1)
        raise line_error(
            path,
            line,
            f"not UTF-8: byte 0x{data[err.start]:02x} at byte offset {err.start} of the file "
            f"(byte {column} of the line) ({err.reason}); ARPA files are read as UTF-8",
        ) from None


def _boundary_id(vocab, word_id: dict[str, int], bos_id: int | None) -> int | None:
    """The id that ``<s>`` / ``</s>`` stand for: ``bos_id``, else the tokenizer's bos / eos, else
    ``<eos>``."""
    if bos_id is not None:
        return bos_id
    if hasattr(vocab, "eos_token_id"):
        return vocab.bos_token_id if vocab.bos_token_id is not None else vocab.eos_token_id
    return word_id.get("<eos>")


def read_arpa(
    path: PathLike, vocab=None, bos_id: int | None = None
) -> tuple[list[str], int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Parse an ARPA file. Returns ``(words, vocab_size, sections)``.

    ``sections[k - 1] = (ids (M, k) oldest first, log10 p (M,), log10 bow (M,))``; a missing
    backoff weight is NaN, and so is the probability of an n-gram ending in ``<s>`` that has no
    ``</s>`` twin (a context only: ``<s>`` is never predicted).

    Words are mapped to ids BY WORD: by ``vocab`` (a tokenizer or a list of strings) if given, and
    then every word of the file must be in ``vocab`` and every word of ``vocab`` in the file; else,
    if every unigram is a decimal number, by that number (files written without a vocabulary); else
    by their position in the ``\\1-grams:`` section. The standard sentence markers ``<s>`` (context)
    and ``</s>`` (target) are both read as our one boundary token, unless ``vocab`` has words of
    their own for them: with ``vocab``, the id ``bos_id`` (default: the tokenizer's bos / eos id, or
    the position of ``<eos>`` in a list); for numeric words, ``bos_id`` or the one id the file skips;
    else one shared id, named ``</s>`` in ``words``. An ``<s>`` entry and a ``</s>`` entry with the
    same words are then one n-gram: its probability from ``</s>``, its backoff weight from ``<s>``.

    Raises:
        ValueError: a malformed file, or a vocabulary that does not match the file's; the message
            names the file (and the line where there is one).
    """
    return read_arpa_with_boundary(path, vocab, bos_id)[:3]


def read_arpa_with_boundary(path: PathLike, vocab=None, bos_id: int | None = None):
    """:func:`read_arpa`, plus the boundary id (``None`` when the file has no ``<s>`` / ``</s>``)."""
    path = Path(path)
    source = "the vocabulary given" if vocab is not None else "the \\1-grams: section"
    bulk = read_bulk(path, lambda unigrams: _word_ids(path, unigrams, vocab, bos_id), source)
    if bulk is not None:
        return _bulk_sections(path, bulk)
    # Anything irregular: read line by line, which also finds and names what is wrong.
    text = _decode(path, path.read_bytes())
    return _map_words(path, read_lines(path, text), vocab, bos_id, source)


def _bulk_sections(path: Path, bulk: BulkFile):
    """:func:`_map_words` of a file parsed in bulk (its words already numbered)."""
    word_id, words, vocab_size, boundary = bulk.mapped
    table = np.fromiter(word_id.values(), dtype=np.int64, count=len(word_id))  # bulk.words -> id
    table = table.astype(np.int32) if vocab_size < 2**31 else table
    start_word = bulk.words.index(BOS) if boundary is not None and BOS in word_id else -1
    sections = []
    for k in range(1, len(bulk.sections) + 1):
        section, bulk.sections[k - 1] = bulk.sections[k - 1], None  # dropped once numbered
        start = section.words[:, -1] == start_word if boundary is not None else None
        named = _Named(bulk.words, section.words.reshape(-1))
        merged = _merge_duplicates(path, k, table[section.words], section.logp, section.bow, start, named,
                                   section.lines)
        sections.append(merged)
    return words, vocab_size, sections, boundary


class _Named:
    """The words of a section by position (``words[index[i]]``), for messages."""

    def __init__(self, words: list[str], index: np.ndarray) -> None:
        self.words, self.index = words, index

    def __getitem__(self, i: slice) -> list[str]:
        return [self.words[j] for j in self.index[i].tolist()]


def _map_words(path: Path, raw, vocab, bos_id: int | None, source: str):
    """The sections parsed line by line as id arrays (words mapped to ids, ``<s>`` / ``</s>`` pairs
    merged)."""
    word_id, words, vocab_size, boundary = _word_ids(path, raw[0][0], vocab, bos_id)
    sections = []
    for k, (flat, logp, bow, where) in enumerate(raw, start=1):
        try:
            ids = np.fromiter(map(word_id.__getitem__, flat), dtype=np.int64, count=len(flat))
        except KeyError:  # find and name the first unknown word
            ids = np.fromiter(map(word_id.get, flat, itertools.repeat(-1)), dtype=np.int64, count=len(flat))
        if (ids < 0).any():
            unknown = int(np.argmax(ids < 0))
            raise line_error(path, where[unknown // k], f"word {flat[unknown]!r} is not in {source}")
        ids = ids.reshape(-1, k)
        logp, bow = np.asarray(logp, dtype=np.float64), np.asarray(bow, dtype=np.float64)
        # With <s> and </s> read as one id, "h <s>" (a context) and "h </s>" (a target) are one n-gram.
        start = None
        if boundary is not None:
            start = np.zeros(len(ids), dtype=bool)
            ends = np.flatnonzero(ids[:, -1] == boundary)
            start[ends] = [flat[r * k + k - 1] == BOS for r in ends.tolist()]
        ids, logp, bow = _merge_duplicates(path, k, ids, logp, bow, start, flat, where)
        sections.append((ids, logp, bow))
    return words, vocab_size, sections, boundary


def _word_ids(path: Path, unigrams: list[str], vocab, bos_id: int | None):
    """``(word -> id, words, vocab_size, boundary id or None)`` for a file whose 1-grams are ``unigrams``."""
    standard = BOS in unigrams or EOS in unigrams
    if vocab is not None:
        tokens = (
            vocab.convert_ids_to_tokens(list(range(len(vocab))))
            if hasattr(vocab, "convert_ids_to_tokens")
            else list(vocab)
        )
        word_id = {w: j for j, w in enumerate(tokens)}
        boundary = None
        if standard and not (BOS in word_id and EOS in word_id):
            boundary = _boundary_id(vocab, word_id, bos_id)
            if boundary is None:
                raise ValueError(
                    f"{path}: the file writes sentence boundaries as <s> / </s>; the vocabulary has no "
                    "<eos> to read them as: pass bos_id="
                )
            word_id.setdefault(BOS, boundary)
            word_id.setdefault(EOS, boundary)
        listed = set(unigrams)
        missing = [w for j, w in enumerate(tokens) if j != boundary and w not in listed]
        if missing:
            raise ValueError(
                f"{path}: {len(missing)} word(s) of the vocabulary given are not in the file's \\1-grams: "
                f"section (e.g. {missing[:5]}): the file was not made with this vocabulary"
            )
        return word_id, list(tokens), len(tokens), boundary
    plain = [w for w in unigrams if w not in (BOS, EOS)]
    if plain and all(w.isdigit() for w in plain):
        word_id = {w: int(w) for w in plain}
        boundary = None
        if standard:
            boundary = bos_id
            if boundary is None:
                skipped = sorted(set(range(len(word_id) + 1)) - set(word_id.values()))
                if len(skipped) != 1:
                    raise ValueError(f"{path}: cannot tell which id <s> / </s> stand for: pass bos_id=")
                boundary = skipped[0]
            word_id[BOS] = word_id[EOS] = boundary
        vocab_size = max(word_id.values()) + 1  # the boundary id included
        return word_id, [str(j) for j in range(vocab_size)], vocab_size, boundary
    word_id: dict[str, int] = {}
    words: list[str] = []
    for w in unigrams:
        if w in word_id:
            continue
        if w in (BOS, EOS) and (BOS in word_id or EOS in word_id):
            word_id[w] = word_id[BOS if w == EOS else EOS]
            continue
        word_id[w] = len(words)
        words.append(EOS if w == BOS else w)
    boundary = word_id.get(EOS, word_id.get(BOS)) if standard else None
    return word_id, words, len(words), boundary


def _merge_duplicates(path, k, ids, logp, bow, start, flat, where):
    """Refuse repeated n-grams, except an ``<s>`` / ``</s>`` pair (``start``: the rows ending in ``<s>``).

    Only the rows whose words another row may repeat (equal hashes) are compared exactly."""
    if start is not None:  # an <s> n-gram is a context, never predicted (a pair's </s> row has the p)
        logp = np.where(start, np.nan, logp)
    rows = _repeated_rows(ids)
    if rows.size == 0:
        return ids, logp, bow
    inverse, num = row_ranks(ids[rows], int(ids.max()) + 1)
    counts = np.bincount(inverse, minlength=num)
    order = np.argsort(inverse, kind="stable")
    ranked = inverse[order]
    first = order[np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])]  # first row of every rank
    repeated = counts[inverse] > 1
    later = repeated & (np.arange(rows.size) != first[inverse])
    pair = np.zeros(rows.size, dtype=bool)
    if start is not None:
        # A pair of one <s> row and one </s> row is allowed; every other repeat is an error.
        is_start = start[rows]
        pair = repeated & (counts[inverse] == 2)
        pair &= np.bincount(inverse, weights=is_start, minlength=num)[inverse] == 1
    bad = np.flatnonzero(later & ~pair)
    if bad.size:
        r = rows[bad[0]]
        raise line_error(
            path,
            where[r],
            f"duplicate {k}-gram {' '.join(flat[r * k : r * k + k])!r} "
            f"(first on line {where[rows[first[inverse[bad[0]]]]]})",
        )
    if start is None:
        return ids, logp, bow
    # The </s> row of a pair keeps its probability and takes the <s> row's backoff weight (if any).
    start_bow = np.full(num, np.nan)
    start_bow[inverse[pair & is_start]] = bow[rows[pair & is_start]]
    target = pair & ~is_start
    taken = start_bow[inverse[target]]
    bow = bow.copy()
    bow[rows[target]] = np.where(np.isnan(taken), bow[rows[target]], taken)
    keep = np.ones(len(ids), dtype=bool)
    keep[rows[pair & is_start]] = False
    return ids[keep], logp[keep], bow[keep]


def _repeated_rows(ids: np.ndarray) -> np.ndarray:
    """The rows of an (M, k) id array whose hash another row shares: every repeated row among them."""
    key = row_hashes(ids)
    ordered = np.sort(key)
    shared = ordered[1:][ordered[1:] == ordered[:-1]]
    return np.flatnonzero(np.isin(key, shared)) if shared.size else np.zeros(0, dtype=np.int64)
