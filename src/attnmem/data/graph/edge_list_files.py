"""A user's graph from text files: an edge list, node features (optional) and labels."""

from __future__ import annotations

from pathlib import Path

import torch

from attnmem.data.graph.graph import Graph, check_split_options, split_nodes, undirected
from attnmem.data.graph.text_files import SELF_LOOPS, parse_edges, parse_features, parse_labels, read_rows


class GraphFiles:
    """A graph read from `edges` (`source target` per line, undirected), `labels` (`node label`) and
    `features` (`node x1 ... xF`; null: one-hot features of the nodes named in the edges and labels).

    Lines starting with '#' are comments. Every node of an edge or label needs a features line; a
    self-loop is an error unless `self_loops=drop` (the models add each node's own). Labelled nodes are
    split as Planetoid's: `train_per_class` per class, `num_val`, `num_test` (null: the rest), seeded by `seed`.
    """

    def __init__(
        self,
        *,
        edges: str,
        labels: str,
        features: str | None = None,
        self_loops: str = "error",
        train_per_class: int = 20,
        num_val: int = 500,
        num_test: int | None = None,
        seed: int = 0,
    ) -> None:
        if self_loops not in SELF_LOOPS:
            raise ValueError(f"data.source.self_loops must be one of {SELF_LOOPS}, got {self_loops!r}")
        check_split_options(train_per_class, num_val, num_test)
        self.edges, self.labels = Path(edges), Path(labels)
        self.features = Path(features) if features is not None else None
        self.self_loops = self_loops
        self.train_per_class, self.num_val, self.num_test, self.seed = train_per_class, num_val, num_test, seed
        self.data_files = [p for p in (self.edges, self.features, self.labels) if p is not None]

    def prepare(self) -> None:
        """Nothing to fetch: the files are the user's."""

    def load(self) -> Graph:
        """The graph of the files; one line naming the file and line for a mistake in them."""
        edge_rows, label_rows = read_rows(self.edges), read_rows(self.labels)
        if self.features is not None:
            names, features = parse_features(read_rows(self.features), str(self.features))
            source = str(self.features)
        else:  # one-hot features of every node the edges and labels name, in order of appearance
            named = [f for _, fields in edge_rows for f in fields[:2]] + [fields[0] for _, fields in label_rows]
            names = list(dict.fromkeys(named))
            features, source = torch.eye(len(names)), "the edges"
        index = {name: i for i, name in enumerate(names)}
        labels, classes = parse_labels(label_rows, str(self.labels), index, source)
        edges = parse_edges(edge_rows, str(self.edges), index, source, self.self_loops)
        masks = split_nodes(
            labels,
            len(classes),
            train_per_class=self.train_per_class,
            num_val=self.num_val,
            num_test=self.num_test,
            generator=torch.Generator().manual_seed(self.seed),
            where=str(self.labels),
        )
        return Graph(
            features=features,
            edge_index=undirected(edges, len(names)),
            labels=labels,
            masks=masks,
            classes=classes,
            nodes=names,
        )
