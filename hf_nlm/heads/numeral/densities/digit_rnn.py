"""The digit-RNN of Spithourakis & Riedel (ACL 2018, sec. 3.3, strategy "d-RNN"): a character-level
LSTM, initialised from the language model's h_t, that spells the next numeral symbol by symbol.

It is the numeral branch of the hierarchical softmax with an open vocabulary: p(s | numeral, h) is a
distribution over every canonical numeral string s (:func:`~hf_nlm.tokenization.numerals.parse_numeral`:
ASCII digits, at most one ``.`` followed by at least one digit, an optional leading ``-``; ``.5``,
``-.5``, ``-0`` and ``00012.500`` are canonical, ``5.``, ``-``, ``+5`` and ``1,200`` are not), so no
``<unk_num>`` is needed.

The model
---------
With R the digit-RNN size and E the digit-embedding size::

    h_0 = tanh(W_h h_t + b_h),  c_0 = W_c h_t + b_c                      (one Linear h_t -> 2R)
    (h_k, c_k) = LSTMCell(emb(x_{k-1}), (h_{k-1}, c_{k-1}))             x_{-1} = START
    p(x_k | x_<k, h_t) = softmax(mask_k + W_o h_k + b_o)                over 13 symbols

The 13 output symbols are ``0``-``9``, ``.``, ``-`` (ids 0-11, :data:`DIGIT_SYMBOLS`) and the end
marker (:data:`DIGIT_END`, 12); :data:`DIGIT_PAD` is never predicted. The end marker is never an
input, so its embedding row doubles as the START input.

The grammar mask
----------------
``mask_k`` is 0 for the symbols a small state machine allows and -inf for the others, so no
probability is spent on strings that are not canonical numerals and the probabilities of all the
strings the module can spell sum to 1 (no dead ends: a symbol is allowed only if the string can
still be finished within ``max_length`` symbols). States::

    START --digit--> INT    START --"-"--> SIGN   START --"."--> POINT
    SIGN  --digit--> INT    SIGN  --"."--> POINT
    INT   --digit--> INT    INT   --"."--> POINT  INT   --end--> (done)
    POINT --digit--> FRAC
    FRAC  --digit--> FRAC                         FRAC  --end--> (done)

i.e. exactly the canonical strings of :func:`parse_numeral` (``-?([0-9]+(\\.[0-9]+)?|\\.[0-9]+)``),
of at most ``max_length`` symbols (default :data:`MAX_NUMERAL_LENGTH`, the longest numeral the
tokenizer keeps; the symbol at position ``max_length`` is forced to be the end marker). A string
outside the grammar (say, in a hand-made ``digit_ids`` row) gets log-probability -inf.

Decoding
--------
:meth:`DigitRNN.greedy`, :meth:`DigitRNN.sample` and :meth:`DigitRNN.beam_search` return canonical
strings and their log-probabilities under the model; :meth:`DigitRNN.initial_state`,
:meth:`DigitRNN.next_log_probs` and :meth:`DigitRNN.advance` are the step-by-step interface they are
built on, for a caller that searches over words and digits jointly.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch
from torch import nn

from ....tokenization.numerals import (
    DIGIT_END,
    DIGIT_PAD,
    DIGIT_SYMBOLS,
    DIGITS_WIDTH,
    MAX_NUMERAL_LENGTH,
    NUM_DIGIT_SYMBOLS,
    decode_digits,
    encode_digits,
    parse_numeral,
)
from ...base import upcast

#: Number of symbols the digit-RNN predicts: the 12 of DIGIT_SYMBOLS and the end marker.
NUM_OUTPUT_SYMBOLS = DIGIT_END + 1
#: The input id that starts every string (the end marker's embedding row; the end is never an input).
DIGIT_START = DIGIT_END

# ----------------------------------------------------------------------------- the grammar

_START, _SIGN, _INT, _POINT, _FRAC, _DEAD = range(6)
_NUM_STATES = 6
_ACCEPTING = (_INT, _FRAC)
#: Fewest symbols still to write from each state before the end marker is allowed.
_NEED = (1, 1, 0, 1, 0, 10**6)
_POINT_ID = DIGIT_SYMBOLS.index(".")
_MINUS_ID = DIGIT_SYMBOLS.index("-")


def _transition(state: int, symbol: int) -> int:
    """The grammar state after ``symbol`` (an id < 12; the end marker and padding leave it as it is)."""
    if symbol >= DIGIT_END or state == _DEAD:
        return state
    if symbol < _POINT_ID:  # a digit
        return {_START: _INT, _SIGN: _INT, _INT: _INT, _POINT: _FRAC, _FRAC: _FRAC}[state]
    if symbol == _POINT_ID:
        return _POINT if state in (_START, _SIGN, _INT) else _DEAD
    return _SIGN if state == _START else _DEAD  # "-"


def _allowed(state: int, remaining: int) -> list[bool]:
    """Which of the 13 symbols may come next in ``state`` with ``remaining`` symbols still writable.

    A symbol is allowed if the string can still be finished in time; where nothing is (only off the
    grammar: the DEAD state, or a non-accepting state out of room), the end marker is allowed so that
    a softmax never sees a row of -inf (those strings already have probability 0).
    """
    allowed = [
        (nxt := _transition(state, x)) != _DEAD and 1 + _NEED[nxt] <= remaining for x in range(DIGIT_END)
    ]
    allowed.append(state in _ACCEPTING)
    if not any(allowed):
        allowed[DIGIT_END] = True
    return allowed


def numeral_grammar_allows(string: str, max_length: int = MAX_NUMERAL_LENGTH) -> bool:
    """Whether the digit-RNN's grammar gives ``string`` a positive probability: a canonical numeral
    (the strings with ``parse_numeral(s).canonical == s``) of at most ``max_length`` symbols."""
    if not string or len(string) > max_length or any(ch not in DIGIT_SYMBOLS for ch in string):
        return False
    state = _START
    for ch in string:
        state = _transition(state, DIGIT_SYMBOLS.index(ch))
    return state in _ACCEPTING


class _Grammar(NamedTuple):
    next_state: torch.Tensor  # (states, 14): the state after each id (end and padding: unchanged)
    mask: torch.Tensor  # (states, max_length + 1, 13) bool: allowed symbols by state and remaining room


@functools.lru_cache(maxsize=64)
def _grammar_tables(max_length: int, device: torch.device) -> _Grammar:
    """The grammar as lookup tables, built once per (max_length, device); never written to."""
    next_state = [[_transition(s, x) for x in range(NUM_DIGIT_SYMBOLS)] for s in range(_NUM_STATES)]
    mask = [[_allowed(s, r) for r in range(max_length + 1)] for s in range(_NUM_STATES)]
    return _Grammar(
        torch.tensor(next_state, dtype=torch.long, device=device),
        torch.tensor(mask, dtype=torch.bool, device=device),
    )


class DigitRNNState(NamedTuple):
    """Where a batch of partial strings stands: the LSTM state after its last symbol (START at first),
    the grammar state (an int per row) and the number of symbols written so far."""

    h: torch.Tensor
    c: torch.Tensor
    grammar: torch.Tensor
    length: torch.Tensor

    def index_select(self, rows: torch.Tensor) -> DigitRNNState:
        """The states of ``rows`` (e.g. the surviving beams), in that order."""
        return DigitRNNState(*(t.index_select(0, rows) for t in self))


# ----------------------------------------------------------------------------- the module


class DigitRNN(nn.Module):
    """A digit-level LSTM that spells a canonical numeral given the LM's hidden state h_t.

    Args:
        hidden_size: size of the LM's hidden state h_t (the input of every method).
        digit_embedding_size: size E of the digit embeddings (default: ``hidden_size``).
        digit_hidden_size: size R of the digit LSTM (default: ``hidden_size``).
        max_length: the longest string it spells (default :data:`MAX_NUMERAL_LENGTH`, the
            tokenizer's cap). A smaller value makes the set of strings small enough to enumerate
            (the tests use 2 or 3); longer strings then have probability 0.

    Methods take ``hidden`` of shape ``(..., hidden_size)``. Parameters: ``init_state`` (Linear
    hidden_size -> 2R: h_0 = tanh of the first half, c_0 the second), ``embedding`` (14 x E, the
    padding row unused), ``cell`` (LSTMCell E -> R), ``output`` (Linear R -> 13).
    """

    def __init__(
        self,
        hidden_size: int,
        digit_embedding_size: int | None = None,
        digit_hidden_size: int | None = None,
        max_length: int = MAX_NUMERAL_LENGTH,
    ) -> None:
        super().__init__()
        if not 1 <= max_length <= MAX_NUMERAL_LENGTH:
            raise ValueError(f"max_length must be in [1, {MAX_NUMERAL_LENGTH}], got {max_length}")
        self.hidden_size = hidden_size
        self.digit_embedding_size = digit_embedding_size or hidden_size
        self.digit_hidden_size = digit_hidden_size or hidden_size
        self.max_length = max_length
        self.init_state = nn.Linear(hidden_size, 2 * self.digit_hidden_size)
        self.embedding = nn.Embedding(NUM_DIGIT_SYMBOLS, self.digit_embedding_size, padding_idx=DIGIT_PAD)
        self.cell = nn.LSTMCell(self.digit_embedding_size, self.digit_hidden_size)
        self.output = nn.Linear(self.digit_hidden_size, NUM_OUTPUT_SYMBOLS)

    def init_weights(self, initializer_range: float, init=nn.init) -> None:
        """The heads' initialisation: Uniform(+-initializer_range) matrices and zero biases, except the
        LSTM cell, which keeps PyTorch's Uniform(+-R^-1/2). ``init`` as in
        :meth:`hf_nlm.heads.base.OutputHead.init_weights`."""
        for module in (self.init_state, self.embedding, self.output):
            for name, p in module.named_parameters():
                if name == "weight":
                    init.uniform_(p, -initializer_range, initializer_range)
                else:
                    init.zeros_(p)
        bound = self.digit_hidden_size**-0.5
        for p in self.cell.parameters():
            init.uniform_(p, -bound, bound)

    # ------------------------------------------------------------------ step by step

    def _grammar(self, device) -> _Grammar:
        return _grammar_tables(self.max_length, torch.device(device))

    def _score_dtype(self) -> torch.dtype:
        """The dtype of the log-probabilities: the output layer's, float32 at least."""
        return upcast(self.output.weight[:0]).dtype

    def initial_state(self, hidden: torch.Tensor) -> DigitRNNState:
        """The state of the empty string for each row of ``hidden`` (N, hidden_size): the LSTM
        initialised from h_t has read START."""
        h0, c0 = self.init_state(hidden).chunk(2, dim=-1)
        start = torch.full(hidden.shape[:1], DIGIT_START, dtype=torch.long, device=hidden.device)
        h, c = self.cell(self.embedding(start), (torch.tanh(h0), c0))
        zeros = torch.zeros_like(start)
        return DigitRNNState(h, c, zeros + _START, zeros)

    def next_log_probs(self, state: DigitRNNState, grammar: _Grammar | None = None) -> torch.Tensor:
        """log p(next symbol | string so far, h_t), (N, 13), float32 or wider; -inf off the grammar."""
        grammar = grammar or self._grammar(state.h.device)
        remaining = (self.max_length - state.length).clamp(min=0)
        mask = grammar.mask[state.grammar, remaining]
        logits = upcast(self.output(state.h)).masked_fill(~mask, -math.inf)
        return torch.log_softmax(logits, dim=-1)

    def advance(
        self, state: DigitRNNState, symbols: torch.Tensor, grammar: _Grammar | None = None
    ) -> DigitRNNState:
        """The states after appending ``symbols`` (N,) (ids < 12) to each row's string."""
        grammar = grammar or self._grammar(state.h.device)
        h, c = self.cell(self.embedding(symbols), (state.h, state.c))
        return DigitRNNState(h, c, grammar.next_state[state.grammar, symbols], state.length + 1)

    # ------------------------------------------------------------------ scoring

    def log_prob(self, hidden: torch.Tensor, digit_ids: torch.Tensor) -> torch.Tensor:
        """log p(digit string | h) by teacher forcing, shape ``hidden.shape[:-1]``.

        ``digit_ids`` (``hidden.shape[:-1] + (width,)``) are rows as
        :func:`~hf_nlm.tokenization.numerals.encode_digits` writes them: symbols, the end marker,
        padding. A row is read up to its first end marker; a row that starts with
        :data:`DIGIT_PAD` (a word, not a numeral) gives 0 and no gradient, and is not run through
        the LSTM at all. A string outside the grammar gives -inf. One LSTM step per position, up
        to the longest row.
        """
        lead = hidden.shape[:-1]
        if digit_ids.shape[:-1] != lead:
            raise ValueError(f"digit_ids {tuple(digit_ids.shape)} do not match hidden {tuple(hidden.shape)}")
        ids = digit_ids.reshape(-1, digit_ids.shape[-1]).long()
        flat = hidden.reshape(-1, hidden.shape[-1])
        out = upcast(flat.new_zeros(flat.shape[0]))
        rows = (ids[:, 0] != DIGIT_PAD).nonzero().squeeze(-1)
        if rows.numel() == 0:
            return out.reshape(lead)
        ids = ids.index_select(0, rows)
        # The positions read: up to and including the first end marker, never padding.
        ended = (ids == DIGIT_END).long().cumsum(dim=1) - (ids == DIGIT_END).long() > 0
        read = (ids != DIGIT_PAD) & ~ended
        steps = int(read.sum(dim=1).max())
        grammar = self._grammar(hidden.device)
        state = self.initial_state(flat.index_select(0, rows))
        outputs, masks = [], []
        for t in range(steps):
            if t:
                symbols = ids[:, t - 1].clamp(max=DIGIT_END - 1)  # rows already done read anything
                state = self.advance(state, symbols, grammar)
            outputs.append(state.h)
            masks.append(grammar.mask[state.grammar, max(self.max_length - t, 0)])
        logits = upcast(self.output(torch.stack(outputs, dim=1)))  # (n, steps, 13): one matmul
        logits = logits.masked_fill(~torch.stack(masks, dim=1), -math.inf)
        log_probs = torch.log_softmax(logits, dim=-1)
        targets = ids[:, :steps].clamp(max=DIGIT_END)
        picked = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        picked = torch.where(read[:, :steps], picked, torch.zeros_like(picked)).sum(dim=1)
        return out.index_put((rows,), picked.to(out.dtype)).reshape(lead)

    def log_prob_of_strings(self, hidden: torch.Tensor, strings: list[str]) -> torch.Tensor:
        """log p(s | h) of every string of ``strings`` for every row of ``hidden``:
        ``hidden.shape[:-1] + (S,)``.

        ``strings`` must be canonical numerals (``parse_numeral(s).canonical == s``, else
        ValueError); those longer than ``max_length`` get -inf. The strings' common prefixes are
        run through the LSTM once (a trie, one batched step per depth), so the cost is
        ``rows x distinct prefixes`` LSTM steps; the activations kept for backward grow the same
        way, so score a fixed list (the vocabulary's numerals) for training targets with
        :meth:`log_prob` instead, and use this one for full-vocabulary distributions.
        """
        for s in strings:
            numeral = parse_numeral(s) if isinstance(s, str) else None
            if numeral is None or numeral.canonical != s:
                raise ValueError(
                    f"{s!r} is not a canonical numeral string (see hf_nlm.tokenization.numerals)"
                )
        lead = hidden.shape[:-1]
        flat = hidden.reshape(-1, hidden.shape[-1])
        n = flat.shape[0]
        if not strings or n == 0:
            return upcast(flat.new_zeros(n, len(strings))).reshape(*lead, len(strings))
        # The trie: every prefix of every string (the empty one and the strings themselves included), by
        # depth.
        depth_of = max(len(s) for s in strings)
        levels: list[dict[str, int]] = [{} for _ in range(depth_of + 1)]
        for s in strings:
            for k in range(len(s) + 1):
                levels[k].setdefault(s[:k], len(levels[k]))
        grammar = self._grammar(hidden.device)
        state = self.initial_state(flat)  # rows (lm row, prefix) flattened, lm row major
        rows = torch.arange(n, device=hidden.device)[:, None]
        per_level = []
        for depth, level in enumerate(levels):
            if depth:
                parents = [levels[depth - 1][p[:-1]] for p in level]
                symbols = [DIGIT_SYMBOLS.index(p[-1]) for p in level]
                parents = torch.tensor(parents, device=hidden.device)
                symbols = torch.tensor(symbols, device=hidden.device)
                state = state.index_select((rows * len(levels[depth - 1]) + parents).reshape(-1))
                state = self.advance(state, symbols.repeat(n), grammar)
            per_level.append(self.next_log_probs(state, grammar).reshape(n, len(level), NUM_OUTPUT_SYMBOLS))
        offsets = [0]
        for level in levels:
            offsets.append(offsets[-1] + len(level))
        table = torch.cat(per_level, dim=1).reshape(n, -1)  # (n, prefixes x 13)
        table = torch.cat([table, table.new_zeros(n, 1)], dim=1)  # a zero column for padding
        zero = table.shape[1] - 1
        index = []
        for s in strings:
            symbols = [DIGIT_SYMBOLS.index(ch) for ch in s] + [DIGIT_END]
            row = [(offsets[k] + levels[k][s[:k]]) * NUM_OUTPUT_SYMBOLS + x for k, x in enumerate(symbols)]
            index.append(row + [zero] * (depth_of + 1 - len(row)))
        index = torch.tensor(index, device=hidden.device).reshape(-1)
        picked = table.index_select(1, index).reshape(n, len(strings), depth_of + 1).sum(dim=-1)
        return picked.reshape(*lead, len(strings))

    # ------------------------------------------------------------------ decoding

    def _decode(self, hidden: torch.Tensor, choose) -> tuple[list[str], torch.Tensor]:
        flat = hidden.reshape(-1, hidden.shape[-1])
        grammar = self._grammar(hidden.device)
        state = self.initial_state(flat)
        total = torch.zeros(flat.shape[0], dtype=self._score_dtype(), device=hidden.device)
        done = torch.zeros(flat.shape[0], dtype=torch.bool, device=hidden.device)
        written = []
        for _ in range(self.max_length + 1):  # the grammar forces the end marker at max_length
            log_probs = self.next_log_probs(state, grammar)
            symbols = choose(log_probs)
            total += torch.where(done, 0.0, log_probs.gather(-1, symbols[:, None]).squeeze(-1))
            symbols = torch.where(done, DIGIT_END, symbols)
            written.append(symbols)
            done |= symbols == DIGIT_END
            if bool(done.all()):
                break
            state = self.advance(state, symbols.clamp(max=DIGIT_END - 1), grammar)
        strings = [decode_digits(row) for row in torch.stack(written, dim=1).tolist()]
        return strings, total.reshape(hidden.shape[:-1])

    @torch.no_grad()
    def greedy(self, hidden: torch.Tensor) -> tuple[list[str], torch.Tensor]:
        """The most probable symbol at each step, for each row of ``hidden`` (..., hidden_size).

        Returns the strings (a flat list, rows in ``hidden``'s order) and their log-probabilities
        ``hidden.shape[:-1]``. Greedy, not the most probable string: use :meth:`beam_search`.
        """
        return self._decode(hidden, lambda log_probs: log_probs.argmax(dim=-1))

    @torch.no_grad()
    def sample(
        self, hidden: torch.Tensor, generator: torch.Generator | None = None, temperature: float = 1.0
    ) -> tuple[list[str], torch.Tensor]:
        """One string per row of ``hidden``, each symbol drawn from the grammar-masked softmax of
        logits / ``temperature``. Returns the strings and their log-probabilities under the model
        (at temperature 1), as :meth:`greedy`."""
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0 (greedy() is the limit at 0), got {temperature}")

        def draw(log_probs):
            probs = torch.softmax(log_probs / temperature, dim=-1)
            return torch.multinomial(probs, 1, generator=generator).squeeze(-1)

        return self._decode(hidden, draw)

    @torch.no_grad()
    def beam_search(
        self,
        hidden: torch.Tensor,
        num_beams: int = 4,
        length_penalty: float = 1.0,
        num_return_sequences: int = 1,
    ) -> tuple[list[list[str]], torch.Tensor]:
        """Beam search over strings for each row of ``hidden`` (..., hidden_size).

        A finished string s is ranked by log p(s | h) / L**length_penalty with L = len(s) + 1 (its
        symbols and the end marker), as in transformers; ``length_penalty=0`` ranks by probability.
        Each step keeps the ``num_beams`` best unfinished strings and the ``num_beams`` best finished
        ones; a row stops once no unfinished string can still beat its worst kept finished one (an
        exact bound, not a heuristic), so with enough beams the result is the exhaustive search's.

        Returns, per row in ``hidden``'s order, the ``num_return_sequences`` best strings, best first,
        and their log-probabilities (not the penalised scores), ``hidden.shape[:-1] +
        (num_return_sequences,)``; a row with fewer possible strings (tiny ``max_length``) is padded
        with ``""`` and -inf.
        """
        if num_beams < 1 or not 1 <= num_return_sequences <= num_beams:
            raise ValueError(
                f"need 1 <= num_return_sequences <= num_beams, got {num_return_sequences}, {num_beams}"
            )
        flat = hidden.reshape(-1, hidden.shape[-1])
        n, device = flat.shape[0], hidden.device
        grammar = self._grammar(device)
        state = self.initial_state(flat)
        dtype = self._score_dtype()
        scores = torch.zeros(n, 1, dtype=dtype, device=device)  # log p of each live beam
        strings = torch.zeros(n, 1, 0, dtype=torch.long, device=device)
        finished: list[list[tuple[float, float, str]]] = [[] for _ in range(n)]  # (penalised, log p, string)
        row_done = [False] * n

        def penalised(log_p: float, length: int) -> float:
            return log_p / length**length_penalty

        for t in range(self.max_length + 1):
            beams = scores.shape[1]
            candidates = scores.unsqueeze(-1) + self.next_log_probs(state, grammar).view(n, beams, -1)
            # Finishing now: L = t + 1 (t symbols and the end marker).
            for r, row in enumerate(candidates[..., DIGIT_END].tolist()):
                if row_done[r]:
                    continue
                for b, log_p in enumerate(row):
                    if log_p > -math.inf:
                        text = "".join(DIGIT_SYMBOLS[i] for i in strings[r, b].tolist())
                        finished[r].append((penalised(log_p, t + 1), log_p, text))
                finished[r].sort(key=lambda item: -item[0])
                del finished[r][num_beams:]
            if t == self.max_length:
                break
            keep = min(num_beams, beams * DIGIT_END)
            top, index = candidates[..., :DIGIT_END].reshape(n, -1).topk(keep, dim=-1)
            # Stop a row whose best live beam cannot beat its worst kept finished string: a live
            # log p only falls, and it finishes with a length in [t + 2, max_length + 1].
            best = top[:, 0].tolist()
            for r in range(n):
                if row_done[r]:
                    continue
                bound = max(penalised(best[r], t + 2), penalised(best[r], self.max_length + 1))
                if best[r] == -math.inf or (len(finished[r]) >= num_beams and bound <= finished[r][-1][0]):
                    row_done[r] = True
            if all(row_done):
                break
            alive = torch.tensor(row_done, device=device).logical_not().unsqueeze(-1)
            scores = torch.where(alive, top, -math.inf)
            beam, symbols = index // DIGIT_END, index % DIGIT_END
            rows = (torch.arange(n, device=device)[:, None] * beams + beam).reshape(-1)
            state = self.advance(state.index_select(rows), symbols.reshape(-1), grammar)
            strings = torch.cat(
                [strings.gather(1, beam[..., None].expand(-1, -1, t)), symbols[..., None]], dim=-1
            )

        out_strings, out_log_probs = [], []
        for pool in finished:
            best = pool[:num_return_sequences]
            best += [(-math.inf, -math.inf, "")] * (num_return_sequences - len(best))
            out_strings.append([text for _, _, text in best])
            out_log_probs.append([log_p for _, log_p, _ in best])
        log_probs = torch.tensor(out_log_probs, dtype=dtype, device=device).reshape(
            *hidden.shape[:-1], num_return_sequences
        )
        return out_strings, log_probs

    def extra_repr(self) -> str:
        return (
            f"hidden_size={self.hidden_size}, digit_embedding_size={self.digit_embedding_size}, "
            f"digit_hidden_size={self.digit_hidden_size}, max_length={self.max_length}"
        )


def encode_numerals(strings: list[str], width: int = DIGITS_WIDTH) -> torch.Tensor:
    """``digit_ids`` rows (len(strings), width) for :meth:`DigitRNN.log_prob`; ``None`` (not a numeral)
    gives a row of padding."""
    return torch.tensor(
        [encode_digits(s, width) if s is not None else [DIGIT_PAD] * width for s in strings], dtype=torch.long
    ).reshape(len(strings), width)


__all__ = ["DigitRNN", "DigitRNNState", "NUM_OUTPUT_SYMBOLS", "encode_numerals", "numeral_grammar_allows"]
