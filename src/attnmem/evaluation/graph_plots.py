"""Figures of node classification: a graph coloured by predicted class, and attention weights on its edges."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and CI
import matplotlib.pyplot as plt  # noqa: E402
import networkx as nx  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from torch import Tensor  # noqa: E402

MAX_NODES = 300  # a larger graph is drawn as the breadth-first neighbourhood of its best-connected node


def drawn_graph(edge_index: Tensor, num_nodes: int, max_nodes: int = MAX_NODES) -> tuple[nx.Graph, dict]:
    """The graph to draw (at most `max_nodes` nodes) and its spring layout, seeded: the same picture every time."""
    graph: nx.Graph[int] = nx.Graph()
    graph.add_nodes_from(range(num_nodes))
    graph.add_edges_from(edge_index.T.tolist())
    if num_nodes > max_nodes:
        hub = max(graph.degree, key=lambda pair: pair[1])[0]
        kept = [hub, *(v for _, v in nx.bfs_edges(graph, hub))][:max_nodes]
        graph = graph.subgraph(kept).copy()
    return graph, nx.spring_layout(graph, seed=0)


def _legend(ax: plt.Axes, classes: list[str], cmap: matplotlib.colors.Colormap) -> None:
    handles = [plt.Line2D([], [], marker="o", ls="", color=cmap(c), label=name) for c, name in enumerate(classes)]
    handles += [
        plt.Line2D([], [], marker="o", ls="", mfc="none", mec="black", mew=2, label="labelled"),
        plt.Line2D([], [], marker="x", ls="", color="red", label="wrong"),
    ]
    ax.legend(handles=handles, loc="best", fontsize=8)


def predictions(
    edge_index: Tensor, pred: Tensor, labels: Tensor, labelled: Tensor, classes: list[str], title: str
) -> Figure:
    """Nodes coloured by predicted class; labelled (training) nodes ringed, wrong predictions crossed."""
    graph, pos = drawn_graph(edge_index, len(pred))
    nodes = list(graph.nodes)
    cmap = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(7, 6))
    nx.draw_networkx_edges(graph, pos, ax=ax, alpha=0.3, width=0.8)
    nx.draw_networkx_nodes(
        graph,
        pos,
        nodelist=nodes,
        ax=ax,
        node_size=120,
        node_color=[cmap(int(pred[v]) % 10) for v in nodes],
        edgecolors=["black" if labelled[v] else "white" for v in nodes],
        linewidths=[2.0 if labelled[v] else 0.5 for v in nodes],
    )
    wrong = [v for v in nodes if labels[v] >= 0 and labels[v] != pred[v]]
    ax.scatter([pos[v][0] for v in wrong], [pos[v][1] for v in wrong], marker="x", color="red", s=40, zorder=3)
    _legend(ax, classes, cmap)
    ax.set_title(title)
    ax.axis("off")
    return fig


def edge_attention(edge_index: Tensor, alpha: Tensor, pred: Tensor, title: str) -> Figure:
    """Each edge drawn the thicker and brighter the more attention (α_ij + α_ji)/2 of `alpha (N, N)` it has."""
    graph, pos = drawn_graph(edge_index, len(pred))
    edges = list(graph.edges)
    weights = [float(alpha[i, j] + alpha[j, i]) / 2 for i, j in edges]
    top = max(weights, default=1.0) or 1.0
    scale = 4.0 if len(edges) <= 200 else 1.5  # a dense drawing needs thin lines to stay legible
    cmap = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(7, 6))
    drawn = nx.draw_networkx_edges(
        graph,
        pos,
        ax=ax,
        edgelist=edges,
        width=[0.3 + scale * w / top for w in weights],
        edge_color=weights,  # type: ignore[arg-type]  # numbers through edge_cmap: networkx's stub lists colours only
        edge_cmap=plt.get_cmap("viridis"),
        edge_vmin=0,
        edge_vmax=top,
    )
    nx.draw_networkx_nodes(graph, pos, ax=ax, node_size=60, node_color=[cmap(int(pred[v]) % 10) for v in graph.nodes])
    if edges:
        assert isinstance(drawn, LineCollection)  # an undirected graph's edges: one collection
        fig.colorbar(drawn, ax=ax, fraction=0.046, pad=0.02, label="attention weight, mean of heads and directions")
    ax.set_title(title)
    ax.axis("off")
    return fig
