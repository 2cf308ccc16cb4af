"""Pictures of what a numeracy LM learned about numbers (Spithourakis & Riedel, ACL 2018, fig. 2:
the numeral embeddings projected to 2-D and coloured by magnitude: a model that learned numeracy
lays numerals out by size)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..tokenization.numerals import canonical_digits


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed, safe on servers
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: str | Path, tight: bool = True) -> None:
    if tight:  # not for a figure of placed text, whose positions are already final
        fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    _pyplot().close(fig)


def numeral_vectors(model, tokenizer, which: str = "output") -> tuple[list[str], np.ndarray, np.ndarray]:
    """The in-vocabulary numerals, their values and their vectors (one row each).

    ``which="output"``: the head's numeral rows as the model scores them (the softmax's word matrix;
    with ``softmax_digits`` the rows plus their digit encodings; with ``hsoftmax`` the numeral
    branch's matrix); ``"input"``: the input embeddings.
    """
    numerals = [(token, i) for token, i in sorted(tokenizer.numeral_vocab.items(), key=lambda kv: kv[1])
                if canonical_digits(token) is not None]
    if len(numerals) < 3:
        raise ValueError(f"the vocabulary holds {len(numerals)} numerals; a 2-D projection needs at least 3")
    tokens = [token for token, _ in numerals]
    ids = torch.tensor([i for _, i in numerals])
    with torch.no_grad():
        if which == "input":
            matrix = model.get_input_embeddings().weight[ids]
        elif which == "output":
            head = model.lm_head
            if hasattr(head, "numeral_weight"):  # the h-softmax's numeral branch: rows in numeral-id order
                matrix = head.numeral_weight[torch.searchsorted(head.numeral_ids, ids)]
            elif hasattr(head, "output_embeddings"):
                matrix = head.output_embeddings()[ids]
            elif hasattr(head, "weight") and head.weight.shape[0] == head.vocab_size:
                matrix = head.weight[ids]
            else:
                raise ValueError(f"the {type(head).__name__} head has no row per numeral; use which='input'")
        else:
            raise ValueError(f"which must be 'output' or 'input', got {which!r}")
    values = np.array([float(canonical_digits(t)) for t in tokens])
    return tokens, values, matrix.float().cpu().numpy()


def project_2d(vectors: np.ndarray) -> np.ndarray:
    """The rows of ``vectors`` on their first two principal components (PCA by SVD of the centred rows)."""
    centred = vectors - vectors.mean(axis=0, keepdims=True)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return centred @ vt[:2].T


def plot_numeral_embeddings(model, tokenizer, path: str | Path, which: str = "output",
                            label: int = 25) -> np.ndarray:
    """Save the 2-D projection of the numeral vectors as a PNG, coloured by log10(1 + |value|);
    the ``label`` most frequent numerals (lowest ids) are written beside their points. Returns the
    projected points (one row per numeral, in :func:`numeral_vectors` order)."""
    plt = _pyplot()

    tokens, values, vectors = numeral_vectors(model, tokenizer, which)
    if not np.isfinite(vectors).all():
        raise ValueError(f"the {which} numeral vectors hold NaN or inf: the model's weights are broken")
    points = project_2d(vectors)
    fig, ax = plt.subplots(figsize=(7, 6))
    scatter = ax.scatter(points[:, 0], points[:, 1], c=np.log10(1 + np.abs(values)), cmap="viridis", s=14)
    fig.colorbar(scatter, ax=ax, label="log10(1 + |value|)")
    for k in range(min(label, len(tokens))):
        ax.annotate(tokens[k], points[k], fontsize=7, alpha=0.8)
    strategy = getattr(model.config, "head", "?")
    ax.set_title(f"{which} vectors of {len(tokens)} numerals ({strategy}), PCA", fontsize=10)
    ax.set_xlabel("PC 1")
    ax.set_ylabel("PC 2")
    _save(fig, path)
    return points


@torch.no_grad()
def numeral_density(model, tokenizer, context: str,
                    points: int = 2000) -> tuple[np.ndarray, np.ndarray, float]:
    """The MoG head's density of the next numeral after ``context``: ``(v grid, density, median)``.

    The density is that of the Gaussians' variable u = T(v) (v itself, or sign(v) log(1 + |v|) under
    ``mog_transform="log"``), sum_k pi_k(h) N(u; mu_k, sigma_k), on a grid of v between the mixture's
    0.001 and 0.999 quantiles, evenly spaced in u; it integrates to 0.998 over u where the grid resolves
    the components (a component narrower than the grid's step shows as a spike of the wrong height)."""
    from ..heads.numeral.densities.gaussian_mixture import forward_transform, inverse_transform

    mixture = getattr(model.lm_head, "mixture", None)
    if mixture is None:
        raise ValueError(f"a numeral density needs numeral_strategy='mog'; this model's is "
                         f"{model.config.head!r}")
    ids = tokenizer(context, return_tensors="pt", add_special_tokens=False).input_ids
    if ids.shape[1] == 0:
        ids = torch.tensor([[model.config.bos_token_id]])
    hidden = model.eval()(ids, output_hidden_states=True).hidden_states[-1][0, -1]
    weights, means, stds = mixture._mixture(hidden)
    low, high = (forward_transform(mixture.quantile(hidden, q), mixture.transform) for q in (0.001, 0.999))
    u = torch.linspace(float(low), float(high), points, dtype=torch.float64)
    density = (weights * torch.exp(-0.5 * ((u[:, None] - means) / stds) ** 2)
               / (stds * (2 * np.pi) ** 0.5)).sum(-1)
    return inverse_transform(u, mixture.transform).numpy(), density.numpy(), float(mixture.median(hidden))


def density_figure(v: np.ndarray, density: np.ndarray, median: float, value: float | None = None,
                   log_space: bool = True, context: str = ""):
    """The Figure of :func:`plot_numeral_density` from :func:`numeral_density`'s arrays.

    The x axis spans the grid, the mixture's 0.001-0.999 quantiles (widened to show ``value``): a
    symmetric-log axis where negative numerals hold mass (the grid starts below 0), a log axis where
    only positive ones do, a linear axis for the untransformed mixture."""
    plt = _pyplot()
    from matplotlib.ticker import FuncFormatter

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(v, density, color="tab:blue", label="predicted density")
    ax.axvline(median, color="tab:green", linestyle="--", label=f"median {median:,.4g}")
    low, high = float(v[0]), float(v[-1])
    if value is not None:
        ax.axvline(value, color="tab:red", label=f"true value {value:,.4g}")
        low, high = min(low, value), max(high, value)
    if log_space and low <= 0:
        ax.set_xscale("symlog", linthresh=1.0)
    elif log_space:
        ax.set_xscale("log")
    ax.set_xlim(low, high)
    if log_space:  # plain numbers, not 10^k: one short label per decade
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.6g}"))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda x, _: ""))
    ax.set_ylim(bottom=0)
    ax.set_xlabel("next numeral v (axis: the mixture's 0.001-0.999 quantiles)")
    ax.set_ylabel("density of sign(v) log(1 + |v|)" if log_space else "density of v")
    ax.set_title(f"after: {context[-60:]!r}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_numeral_density(model, tokenizer, context: str, path: str | Path,
                         value: float | None = None) -> tuple:
    """Save the MoG head's predicted density of the next numeral after ``context`` as a PNG (drawn by
    :func:`density_figure`), the median and (if given) the true ``value`` marked; returns
    :func:`numeral_density`'s arrays."""
    v, density, median = numeral_density(model, tokenizer, context)
    fig = density_figure(v, density, median, value, model.lm_head.mixture.transform == "log", context)
    _save(fig, path)
    return v, density, median


@torch.no_grad()
def strategy_weights(model, tokenizer, text: str) -> tuple[list[str], np.ndarray]:
    """The combination head's p(m | h_t) for m in (h-softmax, d-RNN, MoG) at every token of ``text``:
    ``(tokens, weights (T, 3))``, row t the weights for predicting token t (from what precedes it)."""
    head = model.lm_head
    if not hasattr(head, "strategy_log_weights"):
        raise ValueError(f"strategy weights need numeral_strategy='combination'; this model's is "
                         f"{model.config.head!r}")
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=False).input_ids
    if ids.shape[1] == 0:
        raise ValueError("the text holds no token")
    # The first token is predicted from the sentence boundary: read it, then the text but its last token.
    inputs = torch.cat([torch.tensor([[model.config.bos_token_id]]), ids[:, :-1]], dim=1)
    hidden = model.eval()(inputs, output_hidden_states=True).hidden_states[-1][0]
    return (tokenizer.convert_ids_to_tokens(ids[0].tolist()),
            head.strategy_log_weights(hidden).exp().double().numpy())


def plot_strategy_weights(model, tokenizer, text: str, path: str | Path) -> tuple[list[str], np.ndarray]:
    """Save the combination head's strategy weights along ``text`` as stacked bars (PNG)."""
    plt = _pyplot()

    tokens, weights = strategy_weights(model, tokenizer, text)
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(tokens)), 3.5))
    bottom = np.zeros(len(tokens))
    for k, name in enumerate(model.lm_head.STRATEGIES):
        ax.bar(range(len(tokens)), weights[:, k], bottom=bottom, label=name)
        bottom += weights[:, k]
    ax.set_xticks(range(len(tokens)), tokens, rotation=60, fontsize=8)
    ax.set_ylabel("p(strategy | h)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8, loc="upper right")
    _save(fig, path)
    return tokens, weights


def plot_numeral_surprisal(model, tokenizer, text: str, path: str | Path) -> list[dict]:
    """Save ``text`` as a PNG with every numeral coloured by its surprisal -log p(numeral | context) (nats)
    and the model's expected value there (its median) written small above it; returns
    :func:`~hf_nlm.evaluation.find_unlikely_numbers`'s rows. Words are laid out by their drawn widths and
    wrapped at the colour bar."""
    from matplotlib import colormaps
    from matplotlib.colors import Normalize

    from ..evaluation import find_unlikely_numbers

    plt = _pyplot()
    rows = find_unlikely_numbers(model, tokenizer, [text])
    norm = Normalize(0, max([row["surprisal"] for row in rows] + [1.0]))
    cmap = colormaps["viridis_r"]
    # Each word cut into pieces at its numerals ("27-17," is 27, "-", 17, ","): a numeral piece is
    # highlighted.
    words, position = [], 0
    for word in text.split():
        start = text.index(word, position)
        position = start + len(word)
        inside = sorted((r for r in rows if start <= r["start"] and r["end"] <= position),
                        key=lambda r: r["start"])
        pieces, cursor = [], start
        for row in inside:
            pieces += [(text[cursor:row["start"]], None)] if row["start"] > cursor else []
            pieces.append((text[row["start"]:row["end"]], row))
            cursor = row["end"]
        words.append(pieces + ([(text[cursor:position], None)] if cursor < position else []))
    fig = plt.figure(figsize=(12, 1.0))
    renderer = fig.canvas.get_renderer()
    width_px = fig.get_figwidth() * fig.dpi

    def width(drawn) -> float:
        return drawn.get_window_extent(renderer).width / width_px

    gap = fig.text(0, 0, "a a", fontsize=10)
    space = width(gap)
    gap.set_text("aa")
    space -= width(gap)
    gap.remove()
    placed, x, line = [], 0.01, 0
    for pieces in words:
        drawn = [fig.text(0, 0, piece, fontsize=10, weight="bold" if row else "normal")
                 for piece, row in pieces]
        advance = sum(width(d) for d in drawn)
        if x + advance > 0.89 and x > 0.01:
            x, line = 0.01, line + 1
        for d, (_, row) in zip(drawn, pieces, strict=True):
            placed.append((d, x, line, row))
            x += width(d)
        x += space
    fig.set_figheight(0.6 + 0.42 * (line + 1))
    line_h = 0.42 / fig.get_figheight()
    for drawn, x, line, row in placed:
        y = 1 - (line + 1) * line_h - 0.1 / fig.get_figheight()
        drawn.set_position((x, y))
        if row is not None:
            drawn.set_bbox({"facecolor": cmap(norm(row["surprisal"])), "edgecolor": "none", "alpha": 0.55,
                            "pad": 1})
            value = row["expected"]
            # short: it sits above one numeral
            label = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
            fig.text(x, y + 0.45 * line_h, label, fontsize=7, color="dimgray")
    bar = fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap),
                       cax=fig.add_axes([0.92, 0.15, 0.012, 0.75]))
    bar.set_label("surprisal (nats)", fontsize=8)
    fig.text(0.01, 0.02 / fig.get_figheight(), "numerals coloured by -log p(numeral | context); small grey: "
             "the model's median there", fontsize=7, color="dimgray")
    _save(fig, path, tight=False)
    return rows


__all__ = ["plot_numeral_surprisal", "plot_strategy_weights", "strategy_weights", "density_figure",
           "numeral_density", "numeral_vectors", "plot_numeral_density", "plot_numeral_embeddings",
           "project_2d"]
