"""Zachary's karate club (Zachary 1977) as bundled with networkx: the two factions from two labelled members."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import networkx as nx
import torch

from attnmem.data.graph.graph import Graph, undirected

CLUBS = ("Mr. Hi", "Officer")  # networkx's `club` attribute: the instructor's faction, the administrator's


class Karate:
    """34 members, 78 friendships, the faction each joined after the split (`club`); features one-hot (identity).

    Only the `labelled` members are known (the instructor, node 0, and the administrator, node 33, as in
    Kipf & Welling's demo); the other 32 are the test split. No member is left to validate on, so the
    validation split is the labelled members themselves: the monitored `val/loss` is their training loss,
    and the checkpoint it selects never looks at a test node.
    """

    data_files: list[Path] = []

    def __init__(self, *, labelled: Sequence[int] = (0, 33)) -> None:
        if not labelled or any(not 0 <= n < 34 for n in labelled) or len(set(labelled)) != len(labelled):
            raise ValueError(f"data.source.labelled must be distinct node numbers in [0, 33], got {list(labelled)}")
        self.labelled = list(labelled)

    def prepare(self) -> None:
        """Nothing to fetch: networkx bundles the graph."""

    def load(self) -> Graph:
        """The club's graph; train and val: the labelled members; test: the others."""
        club = nx.karate_club_graph()
        n = club.number_of_nodes()
        edges = torch.tensor(list(club.edges()), dtype=torch.long).T  # (2, 78)
        labels = torch.tensor([CLUBS.index(club.nodes[v]["club"]) for v in range(n)])
        known = torch.zeros(n, dtype=torch.bool)
        known[self.labelled] = True
        return Graph(
            features=torch.eye(n),
            edge_index=undirected(edges, n),
            labels=labels,
            masks={"train": known, "val": known.clone(), "test": ~known},
            classes=list(CLUBS),
            nodes=[str(v) for v in range(n)],
        )
