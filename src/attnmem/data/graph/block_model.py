"""A seeded stochastic block model (Holland et al. 1983) whose node features carry a weak sign of the community."""

from __future__ import annotations

from pathlib import Path

import torch

from attnmem.data.graph.graph import Graph, check_split_options, split_nodes, undirected


class BlockModel:
    """`nodes` nodes in `communities` equal communities; each pair is an edge with probability `p_in` inside a
    community and `p_out` across. A node's features are its community's centre plus N(0, I) noise, the centres
    random directions of length `signal`: small enough that features alone classify poorly, while the edges
    (p_in ≫ p_out) say much more. Splits as Planetoid's: `train_per_class`, `num_val`, `num_test` (null: the rest).
    """

    data_files: list[Path] = []

    def __init__(
        self,
        *,
        communities: int = 4,
        nodes: int = 400,
        p_in: float = 0.1,
        p_out: float = 0.01,
        num_features: int = 16,
        signal: float = 1.0,
        train_per_class: int = 20,
        num_val: int = 100,
        num_test: int | None = None,
        seed: int = 0,
    ) -> None:
        if communities < 2 or nodes < communities:
            raise ValueError(
                f"data.source.communities must be >= 2 and <= data.source.nodes, got {communities} and {nodes}"
            )
        for name, p in {"p_in": p_in, "p_out": p_out}.items():
            if not 0 <= p <= 1:
                raise ValueError(f"data.source.{name} must be in [0, 1], got {p}")
        if num_features < 1 or signal < 0:
            raise ValueError(f"data.source.num_features must be >= 1 and signal >= 0, got {num_features} and {signal}")
        check_split_options(train_per_class, num_val, num_test)
        self.communities, self.nodes, self.p_in, self.p_out = communities, nodes, p_in, p_out
        self.num_features, self.signal = num_features, signal
        self.train_per_class, self.num_val, self.num_test, self.seed = train_per_class, num_val, num_test, seed

    def prepare(self) -> None:
        """Nothing to fetch: the graph is generated."""

    def load(self) -> Graph:
        """The generated graph, the same for the same options and `seed`."""
        generator = torch.Generator().manual_seed(self.seed)
        n, c = self.nodes, self.communities
        labels = (torch.arange(n) % c)[torch.randperm(n, generator=generator)]  # (N,) balanced communities
        same = labels.unsqueeze(0) == labels.unsqueeze(1)  # (N, N)
        p = torch.where(same, self.p_in, self.p_out)
        drawn = torch.rand(n, n, generator=generator) < p
        edges = torch.triu(drawn, diagonal=1).nonzero().T  # (2, E) each pair drawn once
        centres = torch.randn(c, self.num_features, generator=generator)
        centres = self.signal * centres / centres.norm(dim=-1, keepdim=True)  # (C, F)
        features = centres[labels] + torch.randn(n, self.num_features, generator=generator)  # (N, F)
        masks = split_nodes(
            labels,
            c,
            train_per_class=self.train_per_class,
            num_val=self.num_val,
            num_test=self.num_test,
            generator=generator,
            where="data=sbm",
        )
        return Graph(
            features=features,
            edge_index=undirected(edges, n),
            labels=labels,
            masks=masks,
            classes=[f"community {k}" for k in range(c)],
            nodes=[str(v) for v in range(n)],
        )
