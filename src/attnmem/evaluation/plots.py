"""Figures of a run: attention maps, memory weightings, learning curves, energy and capacity curves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and CI
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from torch import Tensor  # noqa: E402

from attnmem.core.atomic import replacing  # noqa: E402


def save(fig: Figure, path: Path) -> Path:
    """Write a figure as PNG under a temporary name, then rename, and close it."""
    with replacing(path) as tmp:
        fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
    plt.close(fig)
    return path


@torch.no_grad()
def eval_outputs(net: torch.nn.Module, batch: dict[str, Tensor]) -> Any:
    """The net's output on `batch` in eval mode, for plots; its train/eval mode is restored."""
    was_training = net.training
    net.eval()
    out = net(batch)
    net.train(was_training)
    return out


def val_examples(module: Any, datamodule: Any, num_examples: int) -> tuple[dict[str, Tensor], Any]:
    """The first `num_examples` validation examples on the module's device, and its net's eval-mode output."""
    batch = next(iter(datamodule.val_dataloader()))
    batch = {k: v[:num_examples].to(module.device) for k, v in batch.items()}
    return batch, eval_outputs(module.net, batch)


def colorbar(fig: Figure, image: Any, ax: Any, label: str = "attention weight (0-1)") -> None:
    """A labelled colour bar beside `ax` for the heatmap `image`."""
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.02, label=label)


def hop_attention(sentences: list[str], weights: Tensor, title: str) -> Figure:
    """Story sentences as rows, hops as columns, attention weight as colour (Sukhbaatar et al., Table 1)."""
    num_sentences, hops = weights.shape  # (S, hops)
    fig, ax = plt.subplots(figsize=(3.8 + 0.9 * hops + 0.07 * max(map(len, sentences), default=10),
                                    1.0 + 0.3 * num_sentences))
    image = ax.imshow(weights.numpy(), cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(hops), [f"hop {k + 1}" for k in range(hops)])
    ax.set_yticks(range(num_sentences), sentences, fontsize=8)
    for s in range(num_sentences):
        for k in range(hops):
            w = float(weights[s, k])
            ax.text(k, s, f"{w:.2f}", ha="center", va="center", fontsize=7, color="white" if w > 0.6 else "black")
    ax.set_xlabel("hop (memory layer)")
    ax.set_ylabel("story sentence (memory slot)")
    colorbar(fig, image, ax)
    ax.set_title(f"memory attention over the story, per hop\n{title}", fontsize=9)
    return fig


def learning_curves(history: dict[str, dict[int, float]]) -> Figure:
    """Each metric per epoch, train and validation together, one panel per metric."""
    kinds = sorted({key.split("/")[-1] for key in history})
    fig, axes = plt.subplots(1, len(kinds), figsize=(4.5 * len(kinds), 3.5), squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        for key, points in sorted(history.items()):
            if key.split("/")[-1] == kind and points:
                epochs, values = zip(*sorted(points.items()))
                ax.plot(epochs, values, marker="o", markersize=3, label=key.split("/")[0])
        ax.set_xlabel("epoch")
        ax.set_ylabel(kind)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    return fig


def sequence_example(inputs: Tensor, targets: Tensor, outputs: Tensor, mask: Tensor, weights: Tensor | None,
                     read_heads: int) -> Figure:
    """Input, target and output over time as images, then each head's weighting as memory rows × time steps.

    As in Graves et al. 2014, Figures 6-7: `inputs (T, W_in)`, `targets`/`outputs (T, W_out)`
    (outputs as probabilities), `mask (T,)` the output phase, `weights (T, heads, N)` read heads first.
    """
    heads = 0 if weights is None else weights.shape[1]
    panels = [("input", inputs.T), ("target", (targets * mask[:, None]).T), ("output", (outputs * mask[:, None]).T)]
    if weights is not None and heads:  # only the memory rows the heads touch, a few either side (all after a wrap)
        used = (weights.amax((0, 1)) > 0.05).nonzero().flatten()
        low, high = max(0, int(used.min()) - 2), min(weights.shape[-1], int(used.max()) + 3)
        weights = weights[..., low:high]
        panels += [((f"{'read' if h < read_heads else 'write'} {h if h < read_heads else h - read_heads}\n"
                     f"rows {low}-{high - 1}"), weights[:, h].T) for h in range(heads)]
    heights = [max(2, p.shape[0]) for _, p in panels[:3]] + [24] * heads
    fig, axes = plt.subplots(len(panels), 1, figsize=(max(4.0, 0.09 * inputs.shape[0] + 1.5), 0.06 * sum(heights) + 2),
                             gridspec_kw={"height_ratios": heights}, squeeze=False, layout="constrained")
    for ax, (name, image) in zip(axes[:, 0], panels):
        shown = ax.imshow(image.numpy(), cmap="viridis" if "rows" in name else "Greys", vmin=0.0, vmax=1.0,
                          aspect="auto", interpolation="nearest")
        ax.set_ylabel(name, fontsize=8)
        ax.set_yticks([])
        if "rows" in name:
            colorbar(fig, shown, ax, "weighting (0-1)")
    axes[0, 0].set_title("input, target, output bits; each head's weighting over memory rows", fontsize=9)
    axes[-1, 0].set_xlabel("time step")
    return fig


def bit_errors_by_length(results: dict[str, dict[int, float]], train_max: int | None = None) -> Figure:
    """Bit errors per sequence against the test length, one line per model (`{model: {length: errors}}`)."""
    fig, ax = plt.subplots(figsize=(5.0, 3.5))
    for name, points in sorted(results.items()):
        lengths, errors = zip(*sorted(points.items()))
        ax.plot(lengths, errors, marker="o", label=name)
    if train_max is not None:
        ax.axvline(train_max, color="grey", linestyle=":", label="longest in training")
    ax.set_yscale("symlog", linthresh=1.0)  # 0 and a few hundred errors on one axis
    ax.set_xlabel("sequence length")
    ax.set_ylabel("bit errors per sequence")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig


def image_shape(size: int) -> tuple[int, int]:
    """Rows and columns to show N units as an image: the most nearly square factorisation (1 × N if prime)."""
    rows = max(r for r in range(1, int(size**0.5) + 1) if size % r == 0)
    return rows, size // rows


def energy_curves(energy: Tensor, title: str) -> Figure:
    """Energy per update step, one line per probe, from `energy (P, T+1)`."""
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    for i, curve in enumerate(energy.numpy()):
        ax.plot(range(len(curve)), curve, marker="o", markersize=3, label=f"probe {i}")
    ax.set_xlabel("update step (0 = the probe)")
    ax.set_ylabel("energy E")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def pattern_images(stored: Tensor, probes: Tensor, recalled: Tensor, overlap: Tensor) -> Figure:
    """Stored, probe and recalled patterns `(P, N)` as images side by side, one row per probe (a probe of x
    beside a stored and recalled y may have another size)."""
    rows = stored.shape[0]
    fig, axes = plt.subplots(rows, 3, figsize=(6.0, 0.4 + 1.8 * rows), squeeze=False)
    for i in range(rows):
        for j, (name, image) in enumerate((("stored", stored), ("probe", probes), ("recalled", recalled))):
            ax = axes[i, j]
            pixels = image[i].reshape(image_shape(image.shape[-1])).numpy()
            ax.imshow(pixels, cmap="gray", vmin=-1, vmax=1, aspect="auto")
            ax.set_xticks([])
            ax.set_yticks([])
            if i == 0:
                ax.set_title(name, fontsize=9)
        axes[i, 2].set_xlabel(f"overlap {float(overlap[i]):.3f}", fontsize=8)
    fig.tight_layout()
    return fig


def capacity_curve(curves: dict[str, list[tuple[float, float, float]]], critical: float = 0.138) -> Figure:
    """Mean final overlap vs load α = K/N, one line per network/size as `(alpha, mean, std)` points,
    with the classical capacity α_c ≈ 0.138 (Amit, Gutfreund & Sompolinsky 1985) marked."""
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    for label, points in curves.items():
        alphas, means, stds = zip(*sorted(points))
        ax.errorbar(alphas, means, yerr=stds, marker="o", markersize=3, capsize=2, label=label)
    ax.axvline(critical, color="gray", linestyle="--", label=f"α = {critical}")
    ax.set_xlabel("load α = K / N")
    ax.set_ylabel("mean final overlap m")
    ax.set_ylim(-0.05, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def coattention_heatmap(
    weights: Tensor, question: list[str], document: list[str], title: str, name: str = "coattention"
) -> Figure:
    """Attention weights `(Lq, Ld)` (`name`: coattention, BiDAF's C2Q) as a heatmap, question words as rows."""
    fig, ax = plt.subplots(figsize=(2.8 + 0.2 * len(document), 1.2 + 0.25 * len(question)), layout="constrained")
    image = ax.imshow(weights.numpy(), cmap="Blues", aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(document)), document, rotation=90, fontsize=7)
    ax.set_yticks(range(len(question)), question, fontsize=7)
    ax.set_xlabel("document word")
    ax.set_ylabel("question word")
    colorbar(fig, image, ax)
    ax.set_title(f"{name}, question × document\n{title}", fontsize=9)
    return fig


def pointer_iterations(start: Tensor, end: Tensor, document: list[str], answer: tuple[int, int], title: str) -> Figure:
    """Start and end probabilities `(K, Ld)` over document words, one row per decoder iteration (Xiong et al.
    2016, Figure 5); the reference span's first and last words are boxed."""
    iterations = start.shape[0]
    top = max(float(start.max()), float(end.max()), 1e-6)  # one colour scale for both panels, up to the largest p
    fig, axes = plt.subplots(2, 1, figsize=(2.5 + 0.2 * len(document), 1.6 + 0.5 * iterations), sharex=True)
    for ax, name, probs, mark in ((axes[0], "start", start, answer[0]), (axes[1], "end", end, answer[1])):
        image = ax.imshow(probs.numpy(), cmap="Reds", vmin=0.0, vmax=top, aspect="auto", interpolation="nearest")
        ax.set_yticks(range(iterations), [f"{name} {k + 1}" for k in range(iterations)], fontsize=7)
        if 0 <= mark < len(document):
            ax.add_patch(plt.Rectangle((mark - 0.5, -0.5), 1, iterations, fill=False, edgecolor="black", lw=1.2))
    axes[1].set_xticks(range(len(document)), document, rotation=90, fontsize=7)
    axes[1].set_xlabel("document word")
    axes[0].set_title(title, fontsize=9)
    fig.colorbar(image, ax=axes, fraction=0.02, pad=0.01, label="probability")
    return fig


def alignment_heatmap(weights: Tensor, source: list[str], target: list[str], title: str = "") -> Figure:
    """Source tokens as columns, target tokens as rows, attention weight as grey level (Bahdanau et al. 2015, Fig. 3).

    `weights (Lt, Ls)`; row t is the weighting used to predict target token t.
    """
    rows, cols = weights.shape
    fig, ax = plt.subplots(figsize=(2.0 + 0.32 * cols, 1.0 + 0.32 * rows), layout="constrained")
    image = ax.imshow(weights.numpy(), cmap="gray", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(cols), source, rotation=90, fontsize=8)
    ax.set_yticks(range(rows), target, fontsize=8)
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    ax.set_xlabel("source token")
    ax.set_ylabel("target token (the one predicted)")
    colorbar(fig, image, ax)
    ax.set_title(" — ".join(filter(None, ["cross attention, target × source", title])), fontsize=9)
    return fig


def head_heatmaps(weights: Tensor, source: list[str], target: list[str], title: str = "") -> Figure:
    """One source × target attention map per head, in a grid, from `weights (H, Lt, Ls)` (one layer)."""
    heads, rows, cols = weights.shape
    across = min(heads, 4)
    down = -(-heads // across)
    fig, axes = plt.subplots(down, across, figsize=(across * (1.0 + 0.22 * cols) + 1.0, down * (1.2 + 0.22 * rows)),
                             squeeze=False, layout="constrained")
    for h, ax in enumerate(axes.flat):
        if h >= heads:
            ax.axis("off")
            continue
        image = ax.imshow(weights[h].numpy(), cmap="gray", vmin=0.0, vmax=1.0, aspect="auto",
                          interpolation="nearest")
        ax.set_xticks(range(cols), source, rotation=90, fontsize=6)
        ax.set_yticks(range(rows), target if h % across == 0 else [], fontsize=6)
        ax.set_title(f"head {h + 1}", fontsize=8)
    for ax in axes[-1]:
        ax.set_xlabel("source token", fontsize=7)
    for ax in axes[:, 0]:
        ax.set_ylabel("target token", fontsize=7)
    colorbar(fig, image, axes)
    fig.suptitle(", ".join(filter(None, ["cross attention per head", title])), fontsize=9)
    return fig


def accuracy_by_length(buckets: dict[str, dict[str, float]], longer: dict[str, dict[int, float]],
                       title: str = "") -> Figure:
    """Left: token accuracy per source-length bucket within the trained range, one line per model
    (`{model: {"41-50": acc}}`, the shape of Bahdanau et al. 2015's Figure 2); right: exact match on the
    longer test lengths (`{model: {length: em}}`)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.0, 3.8))
    for name, points in sorted(buckets.items()):
        labels = sorted(points, key=lambda b: int(b.split("-")[0]))
        left.plot(labels, [points[b] for b in labels], marker="o", label=name)
    left.set_xlabel("source length")
    left.set_ylabel("token accuracy (test)")
    for name, by_length in sorted(longer.items()):
        lengths = sorted(by_length)
        right.plot([str(n) for n in lengths], [by_length[n] for n in lengths], marker="o", label=name)
    right.set_xlabel("source length (longer than training)")
    right.set_ylabel("exact match (test)")
    for ax in (left, right):
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def word_map(points: Tensor, words: list[str], title: str) -> Figure:
    """A scatter of 2-D word positions `points (N, 2)` (a PCA projection), each point labelled with its word."""
    fig, ax = plt.subplots(figsize=(7, 6))
    ax.scatter(points[:, 0], points[:, 1], s=12)
    for (x, y), word in zip(points.tolist(), words):
        ax.annotate(word, (x, y), fontsize=8, xytext=(3, 3), textcoords="offset points")
    ax.set(title=title, xlabel="principal component 1", ylabel="principal component 2")
    return fig
