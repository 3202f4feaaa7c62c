"""Documents drawn with their words and sentences shaded by attention weight (Yang et al. 2016, Fig. 5-6)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and CI
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from torch import Tensor  # noqa: E402

CHAR = 0.0058  # a monospace character's width in figure fractions, at the figure width below
MAX_WORDS = 24  # words drawn per sentence; the rest is marked "…"


def document_attention(sentences: list[list[str]], word_weights: Tensor | None, sentence_weights: Tensor,
                       title: str, deciding: int = -1) -> Figure:
    """One row per sentence: a red box shaded by the sentence's weight β_i (its value in it), then its words,
    each on a blue background shaded by its weight α_it relative to the sentence's largest; `deciding` marked."""
    fig = plt.figure(figsize=(12, 0.6 + 0.32 * len(sentences)))
    reds, blues = plt.get_cmap("Reds"), plt.get_cmap("Blues")
    step = 1.0 / (len(sentences) + 1.5)
    for i, words in enumerate(sentences):
        y = 1 - (i + 1.5) * step
        beta = float(sentence_weights[i])
        fig.text(0.01, y, f"{beta:.2f}", family="monospace", fontsize=8, va="center",
                 color="white" if beta > 0.6 else "black", bbox={"facecolor": reds(beta), "edgecolor": "none"})
        if i == deciding:
            fig.text(0.055, y, "▶", fontsize=8, va="center", color="darkred")
        alpha = word_weights[i, : len(words)] if word_weights is not None else None
        top = float(alpha.max()) if alpha is not None and len(words) else 1.0
        x = 0.07
        for t, word in enumerate(words[:MAX_WORDS]):
            shade = float(alpha[t]) / top if alpha is not None and top > 0 else 0.0
            fig.text(x, y, word, family="monospace", fontsize=8, va="center",
                     color="white" if shade > 0.6 else "black",
                     bbox={"facecolor": blues(shade), "edgecolor": "none", "pad": 1})
            x += CHAR * (len(word) + 1)
        if len(words) > MAX_WORDS:
            fig.text(x, y, "…", fontsize=8, va="center")
    fig.suptitle(f"{title}\nred: sentence weight β; blue: word weight α (relative to the sentence's largest)",
                 fontsize=9, y=1 - 0.3 * step)
    return fig
