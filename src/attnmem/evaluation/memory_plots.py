"""Figures of a DNC's memory bookkeeping: usage over time and the temporal link matrix."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from torch import Tensor

from attnmem.evaluation.plots import colorbar

__all__ = ["dnc_memory"]


def dnc_memory(usage: Tensor, link: Tensor) -> Figure:
    """Usage u_t of each memory row over time `(T, N)` and the final link matrix L_T `(N, N)` (Graves et al.
    2016, Fig. 1), both cut to the rows that were used."""
    used = (usage.amax(0) > 0.05).nonzero().flatten()
    rows = slice(0, int(used.max()) + 1) if len(used) else slice(0, min(16, usage.shape[1]))
    usage, link = usage[:, rows], link[rows, rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.0, 4.0), layout="constrained",
                                      gridspec_kw={"width_ratios": [max(1.0, usage.shape[0] / 20), 1.0]})
    shown = left.imshow(usage.T.numpy(), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
    left.set(xlabel="time step", ylabel="memory row", title="usage u_t")
    colorbar(fig, shown, left, "usage (0-1)")
    shown = right.imshow(link.numpy(), cmap="magma", vmin=0.0, vmax=1.0, interpolation="nearest")
    right.set(xlabel="row j (written before)", ylabel="row i (written after)", title="link matrix L_T")
    colorbar(fig, shown, right, "L[i, j] (0-1)")
    return fig
