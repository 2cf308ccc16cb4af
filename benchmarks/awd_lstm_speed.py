"""AWD-LSTM speed: the cost of its regularisers in training, and the recurrent-state cache in generate().

Two ratios, each measured side by side in one run (repetitions interleaved, the order rotated,
medians reported), so that load on a shared machine hits both sides alike:

(a) ``train_step_vs_plain_lstm`` -- one training step (forward + backward + SGD step, batch 20 x
    bptt 70, targets the next tokens) of ``AWDLSTMForCausalLM`` with all of Merity et al.'s
    regularisers on (weight drop 0.5 on every U, embedding dropout 0.1, locked dropout 0.65 / 0.3 /
    0.4, AR alpha = 2, TAR beta = 1) over the same step of a plain LSTM LM of the same sizes written
    here (nn.Embedding, one nn.LSTM per layer, a linear output tied to the embedding, cross_entropy).
    Target: <= 1.25. The paper's 400 / 1150 x 3 model is too slow for a CPU benchmark, so the default
    is a CPU-sized one: embedding 256, 2 LSTM layers of 256, |V| = 10k (``--embedding-size``,
    ``--hidden-size``, ``--layers``, ``--vocab-size`` change it). A third side, AWD-LSTM with every
    dropout and AR/TAR off, separates the cost of the model's structure from that of its regularisers.

(b) ``generate_cache_speedup`` -- ``generate()`` of 200 new tokens, beam search with 5 beams, from
    a 5-token prompt, with the state cache (``use_cache=True``: one new token per step) over
    recomputing the whole prefix every step (``use_cache=False``), same model, same output ids
    (asserted). Target: >= 10. Measured on the CPU-sized model above and, in full mode, on the
    paper's size (embedding 400, 3 layers 1150 / 1150 / 400, |V| = 10k as on PTB), untrained
    weights (speed does not depend on them). On a CPU the model runs one-token steps with the plain
    LSTM cell kernel: ``nn.LSTM`` would go through oneDNN, whose per-call set-up costs several times
    the step itself (1.09 s -> 0.61 s for the CPU-sized cached run here).

Prints one JSON object per result on stdout (progress on stderr), e.g.
{"benchmark": "awd_lstm_speed", "case": "train_step_vs_plain_lstm", "value": 1.08, "unit": "x",
 "better": "lower", "target": 1.25, ...}

    taskset -c 0 python benchmarks/awd_lstm_speed.py --threads 1 \
        >> benchmarks/results/awd_lstm_speed.jsonl
    python benchmarks/awd_lstm_speed.py --quick --threads 1   # about a minute, CPU-sized model only
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F
from common import add_run_arguments, emit_json, log, quick_defaults, start_run, time_rotated
from torch import nn

from hf_nlm.models.awd_lstm import AWDLSTMConfig, AWDLSTMForCausalLM

BENCHMARK = "awd_lstm_speed"
NO_REGULARISATION = dict(
    dropout=0.0, dropout_hidden=0.0, dropout_input=0.0, dropout_embedding=0.0, weight_drop=0.0,
    alpha=0.0, beta=0.0
)


def emit(**fields) -> None:
    emit_json(BENCHMARK, fields)


def time_interleaved(fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 1) -> dict[str, float]:
    """Median seconds per call of each function (:func:`common.time_rotated`)."""
    return {name: statistics.median(t) for name, t in time_rotated(fns, repeats, warmup).items()}


def zipf_batch(vocab_size: int, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    p = 1.0 / torch.arange(1, vocab_size + 1, dtype=torch.float64)
    return torch.multinomial(p / p.sum(), int(torch.tensor(shape).prod()), replacement=True,
                             generator=generator).view(shape)


class PlainLSTMLM(nn.Module):
    """The reference: embedding -> nn.LSTM layers -> linear output tied to the embedding -> cross_entropy."""

    def __init__(self, vocab_size: int, embedding_size: int, layer_sizes: list[int]) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.embed = nn.Embedding(vocab_size, embedding_size)
        inputs = [embedding_size, *layer_sizes[:-1]]
        self.layers = nn.ModuleList(nn.LSTM(i, o, batch_first=True)
                                    for i, o in zip(inputs, layer_sizes, strict=True))
        self.out = nn.Linear(layer_sizes[-1], vocab_size)
        self.out.weight = self.embed.weight

    def copy_from(self, model: AWDLSTMForCausalLM) -> PlainLSTMLM:
        """Take the AWD-LSTM's weights, so that both sides compute on the same numbers."""
        with torch.no_grad():
            self.embed.weight.copy_(model.model.embed_tokens.weight)
            self.out.bias.copy_(model.lm_head.bias)
            for mine, theirs in zip(self.layers, model.model.layers, strict=True):
                mine.load_state_dict(theirs.lstm.state_dict())
        return self

    def loss(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for layer in self.layers:
            x, _ = layer(x)
        # As the AWD-LSTM does: every position is read, the last one has no target.
        logits = self.out(x[:, :-1])
        return F.cross_entropy(logits.reshape(-1, self.vocab_size), ids[:, 1:].reshape(-1))


def bench_training(args: argparse.Namespace, gen: torch.Generator) -> None:
    V, E, H, L = args.vocab_size, args.embedding_size, args.hidden_size, args.layers
    base = dict(vocab_size=V, embedding_size=E, hidden_size=H, num_hidden_layers=L)
    torch.manual_seed(0)
    awd = AWDLSTMForCausalLM(AWDLSTMConfig(**base)).train()  # the paper's dropouts, weight_drop 0.5, AR, TAR
    bare = AWDLSTMForCausalLM(AWDLSTMConfig(**base, **NO_REGULARISATION)).train()
    bare.load_state_dict(awd.state_dict())
    plain = PlainLSTMLM(V, E, awd.config.layer_sizes).copy_from(awd).train()
    ids = zipf_batch(V, (args.batch_size, args.bptt + 1), gen)  # bptt targets per row

    def awd_step(model: AWDLSTMForCausalLM, optimizer: torch.optim.Optimizer) -> Callable[[], None]:
        def step() -> None:
            model(input_ids=ids, labels=ids).loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        return step

    plain_optimizer = torch.optim.SGD(plain.parameters(), lr=args.lr)

    def plain_step() -> None:
        plain.loss(ids).backward()
        plain_optimizer.step()
        plain_optimizer.zero_grad(set_to_none=True)

    steps = {
        "awd_lstm": awd_step(awd, torch.optim.SGD(awd.parameters(), lr=args.lr)),
        "plain_lstm": plain_step,
        "awd_lstm_no_regularisation": awd_step(bare, torch.optim.SGD(bare.parameters(), lr=args.lr)),
    }
    log(f"training steps: |V|={V}, embedding {E}, layers {awd.config.layer_sizes}, batch {args.batch_size} x "
        f"bptt {args.bptt}, {args.train_repeats} interleaved repetitions")
    sec = time_interleaved(steps, args.train_repeats, warmup=2)
    context = {
        "vocab_size": V,
        "embedding_size": E,
        "layer_sizes": awd.config.layer_sizes,
        "batch_size": args.batch_size,
        "bptt": args.bptt,
        "repeats": args.train_repeats,
        "threads": torch.get_num_threads(),
        "optimizer": f"SGD lr={args.lr}",
    }
    tokens = args.batch_size * args.bptt
    for name, s in sec.items():
        emit(case=f"train_{name}", value=round(tokens / s, 1), unit="tokens/s", better="higher",
             seconds_per_step=round(s, 4), **context)
    emit(case="train_step_vs_plain_lstm", value=round(sec["awd_lstm"] / sec["plain_lstm"], 3), unit="x",
         better="lower", target=1.25, awd_seconds=round(sec["awd_lstm"], 4),
         plain_seconds=round(sec["plain_lstm"], 4),
         regularisers="weight_drop 0.5, embedding dropout 0.1, locked dropout 0.65/0.3/0.4, AR 2, TAR 1",
         **context)
    emit(case="train_step_regularisers_vs_none",
         value=round(sec["awd_lstm"] / sec["awd_lstm_no_regularisation"], 3), unit="x", better="lower",
         **context)
    emit(case="train_step_structure_vs_plain_lstm",
         value=round(sec["awd_lstm_no_regularisation"] / sec["plain_lstm"], 3), unit="x", better="lower",
         **context)


def bench_generation(size: str, sizes: dict, args: argparse.Namespace, gen: torch.Generator) -> None:
    torch.manual_seed(0)
    # no early stop: 200 steps
    config = AWDLSTMConfig(**sizes, eos_token_id=None, bos_token_id=0, pad_token_id=0)
    model = AWDLSTMForCausalLM(config).eval()
    prompt = zipf_batch(config.vocab_size, (1, args.prompt_length), gen) + 2  # no pad id in the prompt
    prompt = prompt.clamp_(max=config.vocab_size - 1)
    outputs: dict[str, torch.Tensor] = {}

    def generate(use_cache: bool, new_tokens: int | None = None, name: str | None = None):
        def run() -> None:
            with torch.no_grad():
                out = model.generate(
                    prompt, attention_mask=torch.ones_like(prompt),
                    max_new_tokens=new_tokens or args.new_tokens, num_beams=args.num_beams, do_sample=False,
                    use_cache=use_cache,
                )
            if name is not None:
                outputs[name] = out

        return run

    sides = {
        "cached": generate(True, name="cached"),
        "uncached": generate(False, name="uncached"),
    }
    log(f"generate ({size}): layers {config.layer_sizes}, |V|={config.vocab_size}, "
        f"{args.new_tokens} new tokens, {args.num_beams} beams, {args.gen_repeats} interleaved repetitions")
    for warm in (generate(True, new_tokens=3), generate(False, new_tokens=3)):
        warm()  # first-call costs, without paying a whole uncached run
    sec = time_interleaved(sides, args.gen_repeats, warmup=0)
    expected_length = args.prompt_length + args.new_tokens
    for name, out in outputs.items():
        if out.shape != (1, expected_length):
            raise AssertionError(f"{name}: generated shape {tuple(out.shape)}, "
                                 f"expected (1, {expected_length})")
        if not torch.equal(out, outputs["uncached"]):
            raise AssertionError(f"{name} generate() differs from the uncached one: "
                                 "the cache changed the output")
    context = {
        "model": size,
        "vocab_size": config.vocab_size,
        "embedding_size": config.embedding_size,
        "layer_sizes": config.layer_sizes,
        "prompt_tokens": args.prompt_length,
        "new_tokens": args.new_tokens,
        "num_beams": args.num_beams,
        "repeats": args.gen_repeats,
        "threads": torch.get_num_threads(),
        "same_output": True,
    }
    for name, s in sec.items():
        emit(case=f"generate_{name}", value=round(s, 3), unit="s", better="lower", **context)
    emit(case="generate_cache_speedup", value=round(sec["uncached"] / sec["cached"], 2), unit="x",
         better="higher", target=10, cached_seconds=round(sec["cached"], 3),
         uncached_seconds=round(sec["uncached"], 3), **context)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="fewer repetitions, 50 new tokens, the CPU-sized model only (about a minute)")
    parser.add_argument("--vocab-size", type=int, default=10_000)
    parser.add_argument("--embedding-size", type=int, default=256, help="CPU-sized model (paper: 400)")
    parser.add_argument("--hidden-size", type=int, default=256, help="CPU-sized model (paper: 1150)")
    parser.add_argument("--layers", type=int, default=2, help="CPU-sized model (paper: 3)")
    parser.add_argument("--batch-size", type=int, default=20)
    parser.add_argument("--bptt", type=int, default=70)
    parser.add_argument("--lr", type=float, default=0.1, help="SGD learning rate of both training sides")
    parser.add_argument("--train-repeats", type=int, default=None,
                        help="training repetitions (default 15, quick 5)")
    parser.add_argument("--new-tokens", type=int, default=None,
                        help="tokens to generate (default 200, quick 50)")
    parser.add_argument("--num-beams", type=int, default=5)
    parser.add_argument("--prompt-length", type=int, default=5)
    parser.add_argument("--gen-repeats", type=int, default=None,
                        help="generate() repetitions (default 3, quick 2)")
    parser.add_argument("--no-paper-size", action="store_true",
                        help="skip generate() on the paper-sized model")
    add_run_arguments(parser, output_dir=False, seed=True)
    args = parser.parse_args(argv)
    quick_defaults(args, train_repeats=(15, 5), new_tokens=(200, 50), gen_repeats=(3, 2))
    # transformers' notes about generation settings and oneDNN's TF32 notice are not results.
    warnings.filterwarnings("ignore", category=UserWarning)
    start_run(args, BENCHMARK)
    gen = torch.Generator().manual_seed(args.seed)
    start = time.perf_counter()
    bench_training(args, gen)
    cpu_sized = dict(vocab_size=args.vocab_size, embedding_size=args.embedding_size,
                     hidden_size=args.hidden_size, num_hidden_layers=args.layers)
    bench_generation("cpu_sized", cpu_sized, args, gen)
    if not (args.quick or args.no_paper_size):
        paper = dict(vocab_size=args.vocab_size, embedding_size=400, hidden_size=1150, num_hidden_layers=3)
        bench_generation("paper_sized", paper, args, gen)
    log(f"done in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
