"""The digit-RNN (Spithourakis & Riedel 2018, strategy d-RNN): its grammar against parse_numeral,
teacher forcing against a step-by-step hand computation, a distribution that sums to 1 over every
canonical string (exhaustive enumeration with a small max_length), and greedy / beam / sampling
decoders against brute force."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from hf_nlm.heads.numeral.densities.digit_rnn import DigitRNN, encode_numerals, numeral_grammar_allows
from hf_nlm.tokenization.numerals import (
    DIGIT_END,
    DIGIT_PAD,
    DIGIT_SYMBOLS,
    DIGITS_WIDTH,
    MAX_NUMERAL_LENGTH,
    encode_digits,
    parse_numeral,
)

H = 6


def is_canonical(s: str) -> bool:
    numeral = parse_numeral(s)
    return numeral is not None and numeral.canonical == s


def all_strings(max_length: int) -> list[str]:
    """Every string over the 12 symbols of 1..max_length symbols."""
    return ["".join(p) for k in range(1, max_length + 1) for p in itertools.product(DIGIT_SYMBOLS, repeat=k)]


def canonical_strings(max_length: int) -> list[str]:
    """Every canonical numeral of at most max_length symbols, by brute force through parse_numeral."""
    return [s for s in all_strings(max_length) if is_canonical(s)]


def reference_allowed(prefix: str, max_length: int) -> list[bool]:
    """Which of the 13 symbols may follow ``prefix``, from parse_numeral alone: the end marker if the
    prefix is a numeral; a symbol x if prefix + x is a numeral or becomes one with one more digit, in
    room (every prefix of a canonical numeral is completed by appending one "0" at most)."""
    room = max_length - len(prefix)
    allowed = [
        room >= 1 and (is_canonical(prefix + x) or (room >= 2 and is_canonical(prefix + x + "0")))
        for x in DIGIT_SYMBOLS
    ]
    return allowed + [is_canonical(prefix)]


def make_module(
    max_length: int = MAX_NUMERAL_LENGTH, seed: int = 0, sharpen: float = 3.0, end_bias: float = 0.0
) -> DigitRNN:
    """A small random module in float64; ``sharpen`` scales the output layer so that the
    distribution is far from uniform (the decoders' tests need clear winners), ``end_bias`` is
    added to the end marker's logit (short strings become likely)."""
    torch.manual_seed(seed)
    module = DigitRNN(H, digit_embedding_size=5, digit_hidden_size=7, max_length=max_length).double()
    with torch.no_grad():
        module.output.weight.mul_(sharpen)
        module.output.bias.normal_(0.0, 1.0)
        module.output.bias[DIGIT_END] += end_bias
    return module


def hand_log_prob(module: DigitRNN, hidden: torch.Tensor, string: str) -> torch.Tensor:
    """log p(string | hidden) one step at a time, with the module's layers and the reference mask."""
    r = module.digit_hidden_size
    projected = module.init_state(hidden)
    h, c = torch.tanh(projected[:r]), projected[r:]
    symbols = [DIGIT_SYMBOLS.index(ch) for ch in string] + [DIGIT_END]
    previous = DIGIT_END  # the START input
    total = hidden.new_zeros(())
    for k, symbol in enumerate(symbols):
        h, c = module.cell(module.embedding.weight[previous][None], (h[None], c[None]))
        h, c = h[0], c[0]
        logits = module.output(h)
        allowed = torch.tensor(reference_allowed(string[:k], module.max_length))
        log_probs = torch.log_softmax(logits.masked_fill(~allowed, -math.inf), dim=-1)
        total = total + log_probs[symbol]
        previous = symbol
    return total


# ----------------------------------------------------------------------------- the grammar


def test_grammar_is_exactly_the_canonical_numerals():
    for s in [""] + all_strings(3):
        assert numeral_grammar_allows(s, 3) == is_canonical(s), s
    tricky = [".5", "-.5", "-0", "00012.500", "5.", "-", ".", "-.", "--1", "1-", "1.2.3", "+5", "1,200", " 1"]
    tricky += ["1" * 24, "-" + "9" * 23, "1" * 25, "1" * 22 + ".5", "1" * 23 + "."]
    generator = torch.Generator().manual_seed(0)
    alphabet = "0123456789" + ".-" * 4  # more points and signs than by chance
    for _ in range(2000):
        length = int(torch.randint(1, MAX_NUMERAL_LENGTH + 3, (1,), generator=generator))
        picks = torch.randint(0, len(alphabet), (length,), generator=generator).tolist()
        tricky.append("".join(alphabet[i] for i in picks))
    assert any(numeral_grammar_allows(s) for s in tricky[40:]) and not all(
        numeral_grammar_allows(s) for s in tricky
    )
    for s in tricky:
        assert numeral_grammar_allows(s) == is_canonical(s), s


@pytest.mark.parametrize("max_length", [3, MAX_NUMERAL_LENGTH])
def test_mask_at_every_step_matches_parse_numeral(max_length):
    module = make_module(max_length)
    prefixes = [""] + [s for s in all_strings(3) if any(reference_allowed(s, max_length))]
    prefixes = [p for p in prefixes if len(p) <= max_length and (is_canonical(p) or is_canonical(p + "0"))]
    if max_length == MAX_NUMERAL_LENGTH:  # the end of the room
        prefixes += ["1" * 22, "-" + "1" * 21, "1" * 23, "-" + "1" * 22, "1" * 21 + ".", "1" * 24, ".", "-."]
    for prefix in prefixes:
        state = module.initial_state(torch.randn(1, H, dtype=torch.float64))
        for ch in prefix:
            state = module.advance(state, torch.tensor([DIGIT_SYMBOLS.index(ch)]))
        allowed = module.next_log_probs(state).isfinite()[0].tolist()
        assert allowed == reference_allowed(prefix, max_length), prefix


def test_every_allowed_string_parses_and_nothing_else_has_probability():
    module = make_module(max_length=3)
    strings = all_strings(3) + ["", "1234", "-1.5"]  # the last three: empty, and too long for max_length 3
    hidden = torch.randn(len(strings), H, dtype=torch.float64)
    rows = torch.tensor([encode_digits(s) for s in strings])
    finite = module.log_prob(hidden, rows).isfinite().tolist()
    for s, ok in zip(strings, finite, strict=True):
        assert ok == (len(s) <= 3 and is_canonical(s)), s


# ----------------------------------------------------------------------------- scoring


def test_teacher_forcing_equals_hand_computation():
    module = make_module()
    strings = ["7", "-0.25", ".5", "-.5", "00012.500", "1" * 24, "-" + "9" * 23, None, "42", None]
    hidden = torch.randn(len(strings), H, dtype=torch.float64)
    got = module.log_prob(hidden, encode_numerals(strings))
    for i, s in enumerate(strings):
        expected = 0.0 if s is None else hand_log_prob(module, hidden[i], s).item()
        assert got[i].item() == pytest.approx(expected, abs=1e-10), s
    # batched over leading dimensions and with rows shorter than the width: the same numbers
    short = ["7", "-0.25", "42", None, ".5", "3"]
    grid = module.log_prob(hidden[:6].reshape(2, 3, H), encode_numerals(short, width=7).reshape(2, 3, 7))
    assert grid.shape == (2, 3)
    flat = module.log_prob(hidden[:6], encode_numerals(short))
    torch.testing.assert_close(grid.reshape(-1), flat, rtol=0, atol=1e-12)


def test_log_prob_of_strings_equals_log_prob():
    module = make_module()
    strings = ["1", "12", "123", "12.5", "-12", "-.5", ".5", "0", "00", "12", "1" * 24, "-3.14159"]
    hidden = torch.randn(2, 3, H, dtype=torch.float64)
    table = module.log_prob_of_strings(hidden, strings)
    assert table.shape == (2, 3, len(strings))
    rows = encode_numerals(strings)
    for i, j in itertools.product(range(2), range(3)):
        expected = module.log_prob(hidden[i, j].expand(len(strings), H), rows)
        torch.testing.assert_close(table[i, j], expected, rtol=0, atol=1e-10)
    assert module.log_prob_of_strings(hidden, []).shape == (2, 3, 0)
    short = make_module(max_length=3)
    assert short.log_prob_of_strings(hidden[0], ["1234", "12"])[:, 0].eq(-math.inf).all()
    for bad in ["+5", "1,200", "5.", "", "-", "1.2.3", "1" * 25]:
        with pytest.raises(ValueError, match="canonical"):
            module.log_prob_of_strings(hidden, [bad])


@pytest.mark.parametrize("max_length", [1, 2, 3])
def test_probabilities_of_all_numerals_sum_to_one(max_length):
    module = make_module(max_length, seed=max_length)
    strings = canonical_strings(max_length)  # enumerated through parse_numeral, not the module's grammar
    hidden = torch.randn(3, H, dtype=torch.float64)
    with torch.no_grad():
        total = module.log_prob_of_strings(hidden, strings).exp().sum(dim=-1)
    torch.testing.assert_close(total, torch.ones(3, dtype=torch.float64), rtol=0, atol=1e-5)
    assert (total - 1).abs().max().item() < 1e-10  # exact, up to rounding


def test_gradients_flow_to_the_hidden_state_and_not_from_words():
    module = make_module().float()
    hidden = torch.randn(4, H, requires_grad=True)
    loss = -module.log_prob(hidden, encode_numerals(["3.5", None, "-12", None])).sum()
    loss.backward()
    assert hidden.grad[[0, 2]].abs().sum(dim=-1).gt(0).all()
    assert hidden.grad[[1, 3]].eq(0).all()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in module.parameters())
    hidden.grad = None
    module.log_prob_of_strings(hidden, ["1", "2.5"]).sum().backward()
    assert hidden.grad.abs().sum(dim=-1).gt(0).all()
    words = module.log_prob(hidden, encode_numerals([None] * 4))  # no numeral at all
    assert words.eq(0).all() and not words.requires_grad


# ----------------------------------------------------------------------------- decoding


def enumerate_distribution(module: DigitRNN, hidden: torch.Tensor) -> tuple[list[str], torch.Tensor]:
    strings = canonical_strings(module.max_length)
    with torch.no_grad():
        return strings, module.log_prob_of_strings(hidden, strings)


def test_greedy_follows_the_most_probable_symbol_by_brute_force():
    module = make_module(max_length=3)
    hidden = torch.randn(5, H, dtype=torch.float64)
    strings, table = enumerate_distribution(module, hidden)
    got, got_log_probs = module.greedy(hidden)
    for row in range(5):
        mass = table[row].exp().tolist()

        def prefix_mass(prefix, mass=mass):  # p(the string starts with prefix), from the enumeration
            return sum(m for s, m in zip(strings, mass, strict=True) if s.startswith(prefix))

        prefix = ""
        while True:  # at each step the symbol (or the end) whose continuation holds the most mass
            options = {x: prefix_mass(prefix + x) for x in DIGIT_SYMBOLS if len(prefix) < 3}
            options[None] = mass[strings.index(prefix)] if prefix in strings else 0.0
            best = max(options, key=options.get)
            if best is None:
                break
            prefix += best
        assert got[row] == prefix
        assert float(got_log_probs[row]) == pytest.approx(float(table[row, strings.index(prefix)]), abs=1e-10)


@pytest.mark.parametrize("length_penalty", [0.0, 1.0, 2.0])
def test_beam_search_with_enough_beams_is_exhaustive(length_penalty):
    module = make_module(max_length=3, end_bias=3.0)  # strings of every length among the best
    hidden = torch.randn(2, 4, H, dtype=torch.float64)
    strings, table = enumerate_distribution(module, hidden.reshape(8, H))
    lengths = torch.tensor([len(s) + 1 for s in strings], dtype=torch.float64)
    ranked = (table / lengths**length_penalty).argsort(dim=-1, descending=True)[:, :10]
    by_probability = table.argsort(dim=-1, descending=True)[:, :10]
    assert length_penalty == 0 or not by_probability.equal(ranked)  # the penalty matters here
    got, log_probs = module.beam_search(
        hidden, num_beams=150, length_penalty=length_penalty, num_return_sequences=10
    )
    assert log_probs.shape == (2, 4, 10) and len(got) == 8
    for row in range(8):
        assert got[row] == [strings[i] for i in ranked[row].tolist()]
        torch.testing.assert_close(log_probs.reshape(8, 10)[row], table[row, ranked[row]], rtol=0, atol=1e-10)


def reference_beam_search(module, hidden, num_beams, length_penalty):
    """Plain beam search over one row, without early stopping: every step keeps the num_beams best
    unfinished prefixes, and the num_beams best finished strings over all steps are ranked by
    log p / (len + 1) ** length_penalty."""
    live, finished = [("", 0.0)], []
    for _ in range(module.max_length + 1):
        expansions = []
        for prefix, log_p in live:
            state = module.initial_state(hidden[None])
            for ch in prefix:
                state = module.advance(state, torch.tensor([DIGIT_SYMBOLS.index(ch)]))
            step = module.next_log_probs(state)[0].tolist()
            if step[DIGIT_END] > -math.inf:
                total = log_p + step[DIGIT_END]
                finished.append((total / (len(prefix) + 1) ** length_penalty, total, prefix))
            expansions += [
                (prefix + x, log_p + step[i]) for i, x in enumerate(DIGIT_SYMBOLS) if step[i] > -math.inf
            ]
        live = sorted(expansions, key=lambda item: -item[1])[:num_beams]
    finished.sort(key=lambda item: -item[0])
    return [text for _, _, text in finished[:num_beams]]


@pytest.mark.parametrize("length_penalty", [0.0, 1.0, 3.0])
def test_beam_search_equals_plain_beam_search_without_early_stopping(length_penalty):
    module = make_module(max_length=8, end_bias=1.0, sharpen=1.0)
    hidden = torch.randn(4, H, dtype=torch.float64)
    for num_beams in (1, 3):
        got, _ = module.beam_search(
            hidden, num_beams=num_beams, length_penalty=length_penalty, num_return_sequences=num_beams
        )
        for row in range(4):
            assert got[row] == reference_beam_search(module, hidden[row], num_beams, length_penalty)


def test_small_beams_return_canonical_strings_with_their_log_probs():
    module = make_module()  # the full length, untrained
    hidden = torch.randn(3, H, dtype=torch.float64)
    got, log_probs = module.beam_search(hidden, num_beams=3, num_return_sequences=2)
    for row, (pair, values) in enumerate(zip(got, log_probs, strict=True)):
        assert all(is_canonical(s) for s in pair)
        torch.testing.assert_close(module.log_prob_of_strings(hidden[row], pair), values, rtol=0, atol=1e-10)
    # a tiny max_length: fewer strings than asked for is padded
    tiny, tiny_log_probs = make_module(max_length=1).beam_search(
        hidden[:1], num_beams=12, num_return_sequences=12
    )
    assert sorted(tiny[0][:10]) == list("0123456789") and tiny[0][10:] == ["", ""]
    assert tiny_log_probs[0, 10:].eq(-math.inf).all()
    with pytest.raises(ValueError):
        module.beam_search(hidden, num_beams=2, num_return_sequences=3)


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_sampling_frequencies_match_the_probabilities(temperature):
    module = make_module(max_length=2, sharpen=1.5)
    hidden = torch.randn(1, H, dtype=torch.float64)
    draws = 20000
    got, log_probs = module.sample(
        hidden.expand(draws, H), generator=torch.Generator().manual_seed(0), temperature=temperature
    )
    strings, table = enumerate_distribution(module, hidden)
    # the log-probs returned are the model's (temperature 1)
    index = torch.tensor([strings.index(s) for s in got])
    torch.testing.assert_close(log_probs, table[0, index], rtol=0, atol=1e-10)
    # the reference distribution at this temperature: the same module with logits / temperature
    tempered = make_module(max_length=2, sharpen=1.5)
    with torch.no_grad():
        tempered.output.weight.div_(temperature)
        tempered.output.bias.div_(temperature)
    p = tempered.log_prob_of_strings(hidden, strings)[0].exp()
    frequency = torch.bincount(index, minlength=len(strings)).double() / draws
    tolerance = 5 * (p * (1 - p) / draws).sqrt() + 1e-3
    assert ((frequency - p).abs() <= tolerance).all()
    assert p.max() > 0.05  # far from uniform (1/130): the test can tell distributions apart


def test_decoders_spell_canonical_numerals_at_full_length():
    module = DigitRNN(H)  # untrained, PyTorch's initialisation: long, varied strings
    hidden = torch.randn(300, H)
    strings, log_probs = module.sample(hidden, generator=torch.Generator().manual_seed(1))
    assert all(is_canonical(s) for s in strings) and len(set(strings)) > 100
    assert max(len(s) for s in strings) > 5
    torch.testing.assert_close(
        log_probs, module.log_prob(hidden, encode_numerals(strings)), rtol=0, atol=1e-4
    )
    greedy, _ = module.greedy(hidden[:20])
    assert all(is_canonical(s) for s in greedy)


def test_construction_and_initialisation():
    module = DigitRNN(8)
    assert (
        module.digit_embedding_size == module.digit_hidden_size == 8
        and module.max_length == MAX_NUMERAL_LENGTH
    )
    module.init_weights(0.1)
    assert module.output.bias.eq(0).all() and module.output.weight.abs().max() <= 0.1
    assert "max_length=24" in repr(module)
    for bad in (0, MAX_NUMERAL_LENGTH + 1):
        with pytest.raises(ValueError, match="max_length"):
            DigitRNN(8, max_length=bad)
    with pytest.raises(ValueError, match="temperature"):
        module.sample(torch.randn(1, 8), temperature=0.0)
    assert encode_numerals([None], width=DIGITS_WIDTH).eq(DIGIT_PAD).all()
