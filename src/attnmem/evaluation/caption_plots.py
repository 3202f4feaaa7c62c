"""Figures of the caption family: an image with the attention map of every generated word over it."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from torch import Tensor

from attnmem.evaluation.plots import colorbar


def attention_over_image(image: Tensor, weights: Tensor, words: list[str], title: str = "") -> Figure:
    """`image (C, H, W)` alone, then once per word with its weights `(T, h, w)` over it, stretched to the image."""
    pixels = image.permute(1, 2, 0).squeeze(-1).float().cpu().numpy()  # (H, W) or (H, W, 3)
    height, width = pixels.shape[:2]
    panels = len(words) + 1
    fig, axes = plt.subplots(panels, 1, figsize=(max(3.0, width / 12), 1.6 * panels), squeeze=False)
    axes[0, 0].imshow(pixels, cmap="gray")
    axes[0, 0].set_title(title or "image", fontsize=9)
    shown = None
    for t, word in enumerate(words):
        ax = axes[t + 1, 0]
        ax.imshow(pixels, cmap="gray")
        shown = ax.imshow(weights[t].float().cpu().numpy(), cmap="magma", alpha=0.6, vmin=0, vmax=1,
                          extent=(-0.5, width - 0.5, height - 0.5, -0.5), interpolation="nearest")
        ax.set_title(word, fontsize=9)
    for ax in axes[:, 0]:
        ax.set_xticks([])
        ax.set_yticks([])
    if shown is not None:
        colorbar(fig, shown, axes[1:, 0].tolist())
    return fig
