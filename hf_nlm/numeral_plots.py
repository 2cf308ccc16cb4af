"""Pictures of what a numeracy LM learned about numbers (Spithourakis & Riedel, ACL 2018, fig. 2:
the numeral embeddings projected to 2-D and coloured by magnitude: a model that learned numeracy
lays numerals out by size)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from .tokenization.numerals import canonical_digits


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


def plot_numeral_embeddings(model, tokenizer, path: str | Path, which: str = "output", label: int = 25) -> np.ndarray:
    """Save the 2-D projection of the numeral vectors as a PNG, coloured by log10(1 + |value|);
    the ``label`` most frequent numerals (lowest ids) are written beside their points. Returns the
    projected points (one row per numeral, in :func:`numeral_vectors` order)."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

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
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return points


__all__ = ["numeral_vectors", "plot_numeral_embeddings", "project_2d"]
