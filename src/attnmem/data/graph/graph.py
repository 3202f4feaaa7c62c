"""One graph for node classification (`Graph`) and what every graph source builds it with: edges, splits."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attnmem.core.errors import UserError

SPLITS = ("train", "val", "test")


@dataclass
class Graph:
    """Node features, undirected edges, labels (-1: unlabelled) and a bool mask per split over the N nodes."""

    features: Tensor  # (N, F) float32
    edge_index: Tensor  # (2, E) source, target: both directions of every edge, no self-loop, no duplicate
    labels: Tensor  # (N,) long
    masks: dict[str, Tensor]  # split -> (N,) bool
    classes: list[str]  # the name of each class
    nodes: list[str]  # the name of each node

    def batch(self) -> dict[str, Tensor]:
        """The whole graph as one batch: `features` first (its first dimension is the batch's), then the rest."""
        return {
            "features": self.features,
            "edge_index": self.edge_index,
            "labels": self.labels,
            **{f"{split}_mask": self.masks[split] for split in SPLITS},
        }


def undirected(edges: Tensor, num_nodes: int) -> Tensor:
    """`edges (2, E)` with both directions of each edge, duplicates and self-loops dropped, sorted: (2, E')."""
    both = torch.cat([edges, edges.flip(0)], dim=1)  # (2, 2E)
    both = both[:, both[0] != both[1]]
    keys = torch.unique(both[0] * num_nodes + both[1])  # sorted, unique
    return torch.stack([keys // num_nodes, keys % num_nodes])


def split_nodes(
    labels: Tensor,
    num_classes: int,
    *,
    train_per_class: int,
    num_val: int,
    num_test: int | None,
    generator: torch.Generator,
    where: str,
) -> dict[str, Tensor]:
    """Planetoid-style splits of the labelled nodes: `train_per_class` per class, then `num_val`, then `num_test`
    (null: all the rest) drawn at random; `where` names the data in errors."""
    order = torch.randperm(len(labels), generator=generator)
    order = order[labels[order] >= 0]  # labelled nodes, in random order
    per_class = []
    for c in range(num_classes):
        of_class = order[labels[order] == c]
        if len(of_class) < train_per_class:
            raise UserError(
                f"{where}: class {c} has {len(of_class)} labelled node(s), fewer than "
                f"data.source.train_per_class={train_per_class}: lower it"
            )
        per_class.append(of_class[:train_per_class])
    train = torch.cat(per_class)
    rest = order[~torch.isin(order, train)]
    num_test = len(rest) - num_val if num_test is None else num_test
    if num_val + num_test > len(rest) or num_test < 0:
        raise UserError(
            f"{where}: {len(rest)} labelled node(s) are left after training, fewer than "
            f"data.source.num_val={num_val} + num_test={num_test}: lower them"
        )
    picked = {"train": train, "val": rest[:num_val], "test": rest[num_val : num_val + num_test]}
    return {
        split: torch.zeros(len(labels), dtype=torch.bool).index_fill_(0, nodes, True) for split, nodes in picked.items()
    }


def check_split_options(train_per_class: int, num_val: int, num_test: int | None) -> None:
    """ValueError naming the option when a split size is out of range."""
    if train_per_class < 1:
        raise ValueError(f"data.source.train_per_class must be >= 1, got {train_per_class}")
    if num_val < 0 or (num_test is not None and num_test < 0):
        raise ValueError(
            f"data.source.num_val and num_test must be >= 0 (num_test null: the rest), got {num_val} and {num_test}"
        )


def row_normalized(features: Tensor) -> Tensor:
    """Each row divided by its sum (rows of zeros kept): the preprocessing of Kipf & Welling and GAT on Cora."""
    return features / features.sum(-1, keepdim=True).clamp_min(1e-12)
