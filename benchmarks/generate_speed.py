"""Generation overhead: ``model.generate()`` against a plain PyTorch loop over the same model's modules.

For every model type of :data:`hf_nlm.models.MODEL_TYPES`, random weights (seeded) at the sizes of its
``default`` recipe over a |V| = 10k vocabulary, eval mode, no gradients:

* ``greedy_vs_plain_loop`` -- greedy search of N new tokens (default 200) from a 5-token prompt, batch 1,
  through ``model.generate()`` with the settings that make it a plain greedy loop (``do_sample=False``,
  ``num_beams=1``, ``max_new_tokens=N``, no ``eos_token_id`` so every run makes N tokens, no other logits
  processor), over a loop written here that calls the model's own modules: for the fixed-window models the
  embedding of the last n - 1 tokens, the body's layers, the head's scores of that one position and the
  argmax; for the recurrent models the embedding of the new token, one ``torch.lstm_cell`` step per layer
  with the state carried, the head and the argmax. Both give the same tokens (asserted).
  Targets: <= 1.2 for the fixed-window models, <= 1.1 for the recurrent ones.
* ``greedy_floor_vs_plain_loop`` -- the same ``generate()`` call around a model whose
  forward is the plain loop's step and nothing else: what transformers' own decoding loop (its stopping
  criteria, logits-processor list, output object and bookkeeping per token) adds, the least any
  ``generate()`` of the model can cost.
* ``beam_vs_plain_loop`` (``--beams``, default 5; 0 skips) -- beam search with that many beams through
  ``generate()`` over a plain beam search written here (log-softmax of the head's scores, the running sums,
  one ``topk`` over beams x |V| per step, beams reordered; no length penalty: ``length_penalty=0``, no
  early stop: ``early_stopping=True`` with no eos). Same best sequence asserted. No target: reported.

The numeracy LM (its numeral head joins several distributions through a logits processor) and the story
seq2seq model (an encoder-decoder) have no plain loop here: their ``generate()`` time per token is reported.

Repetitions interleaved, the order alternating, medians (and min / max of the per-repetition ratios) reported,
so that load on a shared machine hits both sides alike. Machine state (load average, threads) on stderr.

    taskset -c 0 python benchmarks/generate_speed.py --threads 1 >> benchmarks/results/generate_speed.jsonl
    python benchmarks/generate_speed.py --quick --threads 1     # about a minute
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable

import torch
from common import add_run_arguments, emit_json, log, quick_defaults, start_run, time_rotated
from transformers import GenerationConfig, GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from hf_nlm.models import MODEL_TYPES
from hf_nlm.models.registry import DEFAULT_RECIPE

BENCHMARK = "generate_speed"
VOCAB = 10_000
PROMPT = 5
WINDOW = ("nplm", "lbl", "hlbl")
RECURRENT = ("awd_lstm",)


def build(model_type: str, seed: int) -> torch.nn.Module:
    """The model type's LM at its default recipe's sizes, |V| = 10k, random weights, eval mode."""
    kind = MODEL_TYPES[model_type]
    recipe = kind.recipes.get(DEFAULT_RECIPE)
    sizes = dict(recipe.model) if recipe is not None else {}
    torch.manual_seed(seed)
    config = kind.config_class(vocab_size=VOCAB, **sizes)
    if config.bos_token_id is None:
        config.bos_token_id = 0
    lm_class = kind.classes[-1]
    if getattr(config, "head", None) == "tree":
        from hf_nlm.trees import balanced_tree

        model = lm_class(config, tree=balanced_tree(VOCAB))
    else:
        model = lm_class(config)
    # generate() fills what its GenerationConfig leaves unset from the model's: with no eos there, no
    # stopping test and no end-of-text in the way of N tokens.
    model.generation_config.eos_token_id = None
    return model.eval()


# ---------------------------------------------------------------------------------------- plain loops
def window_scores(model, context: torch.Tensor) -> torch.Tensor:
    """The head's scores (B, |V|) of the next token after ``context`` (B, n - 1), most recent first."""
    body, B = model.model, context.shape[0]
    if model.config.model_type == "nplm":
        x = body.C(context).reshape(B, -1)
        parts = []
        if body.H is not None:
            parts.append(torch.tanh(body.H(x)))
        if model.config.direct_connections:
            parts.append(x)
        z = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
    else:  # LBL / HLBL: r_hat = sum_i C_i r_{w_{t-i}}
        r = body.get_input_embeddings()(context)  # (B, n-1, D)
        z = (r * body.C).sum(1) if model.config.diagonal_context else torch.einsum("bid,ied->be", r, body.C)
    return model.lm_head(z)


def plain_window_greedy(model, prompt: torch.Tensor, new: int) -> torch.Tensor:
    n_1 = model.config.context_size
    fill = prompt.new_full((prompt.shape[0], n_1), model.config.bos_token_id)
    ids = torch.cat([fill, prompt], dim=1)
    out = []
    for _ in range(new):
        nxt = window_scores(model, ids[:, -n_1:].flip(1)).argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], dim=1)
        out.append(nxt)
    return torch.cat([prompt, *out], dim=1)


def lstm_step(model, token: torch.Tensor, state: list) -> torch.Tensor:
    """One token (B,) through every LSTM layer from ``state`` (a list of (h, c), updated); the head's
    scores."""
    x = model.model.embed_tokens(token)
    for i, layer in enumerate(model.model.layers):
        lstm = layer.lstm
        h, c = torch.lstm_cell(x, state[i], lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0,
                               lstm.bias_hh_l0)
        state[i] = (h, c)
        x = h
    return model.lm_head(x)


def lstm_prefix(model, prompt: torch.Tensor) -> tuple[torch.Tensor, list]:
    """Read the sentence boundary then ``prompt`` from the zero state; the last scores and the state."""
    B = prompt.shape[0]
    state = [(prompt.new_zeros(B, layer.hidden_size, dtype=torch.float),) * 2 for layer in model.model.layers]
    scores = lstm_step(model, prompt.new_full((B,), model.config.bos_token_id), state)
    for t in range(prompt.shape[1]):
        scores = lstm_step(model, prompt[:, t], state)
    return scores, state


def plain_lstm_greedy(model, prompt: torch.Tensor, new: int) -> torch.Tensor:
    scores, state = lstm_prefix(model, prompt)
    out = []
    for _ in range(new):
        nxt = scores.argmax(-1)
        out.append(nxt[:, None])
        scores = lstm_step(model, nxt, state)
    return torch.cat([prompt, *out], dim=1)


def plain_beam(model, prompt: torch.Tensor, new: int, beams: int) -> torch.Tensor:
    """Beam search (batch 1): sum of log-probabilities, the best ``beams`` of beams x |V| each step."""
    window = model.config.model_type in WINDOW
    if window:
        n_1 = model.config.context_size
        ids = torch.cat([prompt.new_full((1, n_1), model.config.bos_token_id), prompt], 1).expand(beams, -1)
        scores = window_scores(model, ids[:1, -n_1:].flip(1)).expand(beams, -1)
    else:
        ids = prompt.expand(beams, -1)
        scores, state = lstm_prefix(model, prompt)
        scores = scores.expand(beams, -1)
        state = [(h.expand(beams, -1), c.expand(beams, -1)) for h, c in state]
    total = torch.full((beams, 1), float("-inf"))
    total[0] = 0.0  # the beams start as copies: only the first one counts at the first step
    for step in range(new):
        cand = (total + torch.log_softmax(scores.float(), -1)).view(-1)
        total, flat = cand.topk(beams)
        total = total[:, None]
        src, tok = flat // scores.shape[-1], flat % scores.shape[-1]
        ids = torch.cat([ids[src], tok[:, None]], 1)
        if step == new - 1:
            break
        if window:
            scores = window_scores(model, ids[:, -n_1:].flip(1))
        else:
            state = [(h[src], c[src]) for h, c in state]
            scores = lstm_step(model, tok, state)
    best = ids[0]
    return best[-(prompt.shape[1] + new):][None]


def sequence_log_prob(model, prompt: torch.Tensor, sequence: torch.Tensor) -> float:
    """Sum of log P(token | prefix) over the tokens of ``sequence`` (1, T) after ``prompt``, by the plain
    steps."""
    total = 0.0
    if model.config.model_type in WINDOW:
        n_1 = model.config.context_size
        ids = torch.cat([sequence.new_full((1, n_1), model.config.bos_token_id), sequence], 1)
        for t in range(n_1 + prompt.shape[1], ids.shape[1]):
            scores = window_scores(model, ids[:, t - n_1:t].flip(1))
            total += float(torch.log_softmax(scores.float(), -1)[0, ids[0, t]])
        return total
    scores, state = lstm_prefix(model, prompt)
    for t in range(prompt.shape[1], sequence.shape[1]):
        total += float(torch.log_softmax(scores.float(), -1)[0, sequence[0, t]])
        scores = lstm_step(model, sequence[:, t], state)
    return total


class FloorModel(PreTrainedModel, GenerationMixin):
    """A model whose forward is the plain loop's step and nothing else (the last window, or for a recurrent
    model one LSTM step from a state it keeps itself; the head's scores): greedy ``generate()`` over it costs
    the plain loop plus transformers' own decoding loop, the least any greedy ``generate()`` of the model can
    cost."""

    def __init__(self, model) -> None:
        super().__init__(model.config)
        self.inner = model
        self.generation_config = model.generation_config
        self.state = None

    def generate(self, *args, **kwargs):
        self.state = None  # a new sequence
        return super().generate(*args, **kwargs)

    def forward(self, input_ids, attention_mask=None, **kwargs) -> CausalLMOutputWithPast:
        if self.inner.config.model_type in WINDOW:
            scores = window_scores(self.inner, input_ids[:, -self.inner.config.context_size:].flip(1))
        elif self.state is None:
            scores, self.state = lstm_prefix(self.inner, input_ids)
        else:
            scores = lstm_step(self.inner, input_ids[:, -1], self.state)
        return CausalLMOutputWithPast(logits=scores[:, None])

    def prepare_inputs_for_generation(self, input_ids, **kwargs) -> dict:
        return {"input_ids": input_ids}


# ---------------------------------------------------------------------------------------- timing
def greedy_config(new: int, beams: int = 1) -> GenerationConfig:
    extra = {"length_penalty": 0.0, "early_stopping": True} if beams > 1 else {}
    return GenerationConfig(do_sample=False, num_beams=beams, max_new_tokens=new, eos_token_id=None,
                            pad_token_id=0, **extra)


def machine_state() -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",) * 3
    return (f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores, "
            f"torch {torch.__version__}, {torch.get_num_threads()} threads")


def compare(model_type: str, case: str, model, prompt: torch.Tensor, fns: dict, repeats: int,
            target: float | None, context: dict) -> None:
    with torch.no_grad():
        outs = {name: fn() for name, fn in fns.items()}
        if not torch.equal(outs["generate"], outs["plain"]):
            # Beam search may part at a tie (two beams equally likely up to float rounding): then the two
            # continuations must have the same log-probability.
            scores = [sequence_log_prob(model, prompt, outs[name]) for name in ("generate", "plain")]
            if case.startswith("greedy") or abs(scores[0] - scores[1]) > max(1e-3, 1e-5 * abs(scores[1])):
                raise AssertionError(f"{model_type} {case}: generate() and the plain loop differ (log-probs "
                                     f"{scores}):\n{outs['generate'].tolist()}\n{outs['plain'].tolist()}")
            log(f"{model_type} {case}: the searches part at a tie (log-probs {scores[0]:.4f} / "
                f"{scores[1]:.4f})")
        times = time_rotated(fns, repeats)
    ratios = [g / p for g, p in zip(times["generate"], times["plain"], strict=True)]
    med_g, med_p = statistics.median(times["generate"]), statistics.median(times["plain"])
    log(f"{model_type} {case}: generate {med_g * 1e3:.1f} ms, plain {med_p * 1e3:.1f} ms, ratio "
        f"{med_g / med_p:.2f} (per repetition {min(ratios):.2f}-{max(ratios):.2f}); {machine_state()}")
    emit_json(BENCHMARK, {
        "case": f"{model_type}_{case}", "value": round(med_g / med_p, 3), "unit": "x", "better": "lower",
        **({"target": target} if target is not None else {}),
        "ratio_min": round(min(ratios), 3), "ratio_max": round(max(ratios), 3),
        "generate_s": round(med_g, 4), "plain_s": round(med_p, 4), **context,
    })


def bench(model_type: str, args: argparse.Namespace) -> None:
    model = build(model_type, args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    prompt = torch.randint(4, VOCAB, (1, PROMPT), generator=gen)
    new = args.new_tokens
    context = {"model_type": model_type, "new_tokens": new, "vocab_size": VOCAB, "prompt": PROMPT,
               "threads": torch.get_num_threads(), "quick": args.quick,
               "load_average": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None}

    def generate(beams: int = 1) -> Callable[[], torch.Tensor]:
        config = greedy_config(new, beams)
        mask = torch.ones_like(prompt)
        return lambda: model.generate(prompt, attention_mask=mask, generation_config=config)

    if model_type not in WINDOW + RECURRENT:
        with torch.no_grad():
            times = time_rotated({"generate": generate()}, args.repeats)["generate"]
        s = statistics.median(times)
        log(f"{model_type} greedy generate: {s * 1e3:.1f} ms for {new} tokens (no plain loop); "
            f"{machine_state()}")
        emit_json(BENCHMARK, {"case": f"{model_type}_greedy_ms_per_token", "value": round(s / new * 1e3, 3),
                              "unit": "ms", "better": "lower", **context})
        return
    plain = plain_window_greedy if model_type in WINDOW else plain_lstm_greedy
    target = 1.2 if model_type in WINDOW else 1.1
    compare(model_type, "greedy_vs_plain_loop", model, prompt,
            {"generate": generate(), "plain": lambda: plain(model, prompt, new)}, args.repeats, target,
            context)
    # transformers' own loop: generate() around a forward that is the plain loop's step and nothing else.
    floor, config = FloorModel(model), greedy_config(new)
    compare(model_type, "greedy_floor_vs_plain_loop", model, prompt,
            {"generate": lambda: floor.generate(prompt, attention_mask=torch.ones_like(prompt),
                                                generation_config=config),
             "plain": lambda: plain(model, prompt, new)}, args.repeats, None, context)
    if args.beams > 1:
        compare(model_type, "beam_vs_plain_loop", model, prompt,
                {"generate": generate(args.beams),
                 "plain": lambda: plain_beam(model, prompt, new, args.beams)},
                args.repeats, None, {**context, "num_beams": args.beams})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer tokens and repetitions: about a minute")
    parser.add_argument("--new-tokens", type=int, default=None,
                        help="tokens to generate (default 200, quick 100)")
    parser.add_argument("--repeats", type=int, default=None, help="repetitions (default 7, quick 3)")
    parser.add_argument("--beams", type=int, default=5, help="beams of the beam-search rows (0: skip them)")
    parser.add_argument("--models", nargs="*", default=None, help="model types (default: all)")
    add_run_arguments(parser, output_dir=False, seed=True)
    args = parser.parse_args(argv)
    quick_defaults(args, new_tokens=(200, 100), repeats=(7, 3))
    start_run(args, BENCHMARK)
    log(machine_state())
    for model_type in args.models or list(MODEL_TYPES):
        if model_type not in MODEL_TYPES:
            parser.error(f"--models: unknown model type {model_type!r}; known: {', '.join(MODEL_TYPES)}")
        bench(model_type, args)


if __name__ == "__main__":
    main()
