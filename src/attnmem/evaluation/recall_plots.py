"""The recall family's figures: examples with the model's answers, and accuracy at each position of a set."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and CI
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from torch import Tensor  # noqa: E402

# a cell: not scored, scored and right, scored and wrong
CELLS = ListedColormap(["#e8e8e8", "#2e9e4f", "#d62728"])


def recall_examples(inputs: Tensor, targets: Tensor, predicted: Tensor, scored: Tensor) -> Figure:
    """Each example as a strip of its tokens (ids written in the cells); a scored position is green where the model's
    answer is the target, red where not, the answer written under a red cell.

    Shapes:
        inputs, targets, predicted, scored: (n, T); scored True where a position's answer counts
    """
    cells = torch.where(scored, 1 + (predicted != targets).long(), 0)  # (n, T): 0 not scored, 1 right, 2 wrong
    n, steps = inputs.shape
    fig, ax = plt.subplots(figsize=(max(4.0, 0.16 * steps + 1.0), 0.5 * n + 1.0), layout="constrained")
    ax.imshow(cells.numpy(), cmap=CELLS, vmin=0, vmax=2, aspect="auto", interpolation="nearest")
    if steps <= 128:  # ids only where they fit
        for i, t in torch.cartesian_prod(torch.arange(n), torch.arange(steps)).tolist():
            ax.text(t, i - 0.15, str(int(inputs[i, t])), ha="center", va="center", fontsize=5)
            if cells[i, t] == 2:
                ax.text(t, i + 0.25, f"→{int(predicted[i, t])}", ha="center", va="center", fontsize=4, color="white")
    right, count = int((cells == 1).sum()), int(scored.sum())
    ax.set_title(f"validation examples: green right, red wrong (→ the model's answer); {right} of {count} right",
                 fontsize=9)
    ax.set_xlabel("position")
    ax.set_ylabel("example")
    ax.set_yticks(range(n))
    return fig


def accuracy_by_position(correct: Tensor, count: Tensor) -> Figure:
    """Accuracy at each position that holds a scored answer in the set, with the number of answers it holds.

    Shapes:
        correct, count: (T,) the right answers and the scored answers at each position
    """
    where = (count > 0).nonzero().flatten()
    acc = correct[where].double() / count[where].double()
    fig, ax = plt.subplots(figsize=(7.0, 3.0), layout="constrained")
    ax.bar(where.numpy(), acc.numpy(), width=0.8, color="#2e9e4f")
    ax.set_ylim(0.0, 1.02)
    ax.set_xlabel("position of the answer")
    ax.set_ylabel("accuracy")
    ax.set_title(f"accuracy by position over {int(count.sum())} scored answers "
                 f"({int(count[where].min())}-{int(count[where].max())} a position)", fontsize=9)
    return fig
