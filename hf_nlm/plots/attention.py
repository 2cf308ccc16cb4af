"""What an attention decoder looked at: a heatmap of the weights a_tj (source words x generated words).

Bahdanau et al. (2015, fig. 3) and Luong et al. (2015, fig. 7) show their alignments this way: one row per
generated word, one column per source word, the weight the decoder gave that source word when it produced
that output word.
"""

from __future__ import annotations

import os

import torch

from ..data.pairs import encode_side
from ..evaluation.scoring import eval_mode
from ..tokenization.decoding import decode_generated


def attention_weights(model, tokenizer, source_text: str,
                      **generate_kwargs) -> tuple[str, list[str], list[str], torch.Tensor]:
    """Generate from ``source_text`` (read as in training: its tokens, then ``<eos>``) and return ``(text,
    source_tokens, generated_tokens, weights)``.

    ``generate_kwargs`` go to ``model.generate`` (greedy by default; ``num_beams=5`` for beam search, with
    ``num_return_sequences=1``). The weights (T_generated, T_source) are those of the returned sequence: a
    teacher-forced forward over it with ``output_attentions=True``, which gives exactly the weights the
    decoder computed while generating (the cached and the uncached decoder agree) without following beam
    indices. The generated tokens are those after ``decoder_start_token_id``, up to and including the first
    ``eos``.
    """
    if getattr(model.config, "attention", None) == "none":
        raise ValueError("this model has attention='none': it has no attention weights to plot")
    if generate_kwargs.get("num_return_sequences", 1) != 1:
        raise ValueError("attention_weights plots one output: num_return_sequences must be 1")
    device = next(model.parameters()).device
    if not tokenizer(source_text, add_special_tokens=False).input_ids:
        raise ValueError(f"source text {source_text!r} has no token to attend to")
    # The source as training and generate_targets read it: its tokens, then <eos>.
    (source_ids,), _, _ = encode_side([source_text], tokenizer)
    enc = {"input_ids": source_ids[None].to(device),
           "attention_mask": torch.ones_like(source_ids)[None].to(device)}
    with eval_mode(model), torch.no_grad():
        sequence = model.generate(**enc, **generate_kwargs)[0]
        generated = sequence[1:].tolist()
        eos = model.generation_config.eos_token_id
        eos = {eos} if isinstance(eos, int) else set(eos or [])
        end = next((i + 1 for i, t in enumerate(generated) if t in eos), len(generated))
        generated = generated[:end]
        if not generated:
            raise ValueError("generate() returned no token after the decoder start: nothing to plot")
        decoder_input_ids = sequence[None, :end]
        out = model(**enc, decoder_input_ids=decoder_input_ids, output_attentions=True, use_cache=False)
    # layer 0, batch row 0, head 0: (T_generated, T_source)
    weights = out.cross_attentions[0][0, 0].float().cpu()
    source_tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    generated_tokens = tokenizer.convert_ids_to_tokens(generated)
    # <unk> stays visible, as generate_targets keeps it
    text = decode_generated(tokenizer, torch.tensor(generated)).strip()
    return text, source_tokens, generated_tokens, weights


def attention_figure(weights: torch.Tensor, source_tokens: list[str], generated_tokens: list[str],
                     title: str = "attention"):
    """The heatmap Figure of :func:`plot_attention`: the colour scale runs from 0 to the largest weight
    (shown in the title, with a colour bar), so weights spread evenly over a long source still show their
    differences; on grids of at most 20 x 20 each cell is written out."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    values = weights.float().numpy()
    rows, cols = values.shape
    vmax = float(values.max()) if values.size and values.max() > 0 else 1.0
    fig, ax = plt.subplots(figsize=(max(4.0, 0.55 * cols + 2), max(3.0, 0.4 * rows + 1.5)))
    image = ax.imshow(values, cmap="Greys", vmin=0.0, vmax=vmax, aspect="auto")
    if rows <= 20 and cols <= 20:
        for t in range(rows):
            for j in range(cols):
                ax.text(j, t, f"{values[t, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if values[t, j] > 0.6 * vmax else "black")
    ax.set_xticks(range(cols), source_tokens, rotation=60, ha="right")
    ax.set_yticks(range(rows), generated_tokens)
    ax.set_xlabel("source")
    ax.set_ylabel("generated")
    ax.set_title(f"{title}; colour 0 to max weight {vmax:.3g}; rows sum to 1", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="a_tj")
    fig.tight_layout()
    return fig


def plot_attention(model, tokenizer, source_text: str, path: str | os.PathLike,
                   **generate_kwargs) -> tuple[str, torch.Tensor]:
    """Generate from ``source_text`` (see :func:`attention_weights`) and write the attention heatmap PNG to
    ``path`` (drawn by :func:`attention_figure`): source words on the x axis, generated words on the y axis,
    darker = more weight (each row sums to 1; the colour scale ends at the largest weight).

    Returns ``(generated text, weights (T_generated, T_source))``.
    """
    import matplotlib.pyplot as plt

    text, source_tokens, generated_tokens, weights = attention_weights(model, tokenizer, source_text,
                                                                       **generate_kwargs)
    fig = attention_figure(weights, source_tokens, generated_tokens, f"attention ({model.config.attention})")
    fig.savefig(os.fspath(path), dpi=120)
    plt.close(fig)
    return text, weights


__all__ = ["attention_figure", "attention_weights", "plot_attention"]
