"""Reading a graph from text: rows of whitespace-separated fields, each error naming its file and line and the fix.

Shared by the edge-list reader (`GraphFiles`) and Cora's original release (`Cora`): node features
(`name x1 ... xF`), labels (`name label`) and edges (`source target`, read as undirected).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from attnmem.core.errors import UserError
from attnmem.core.text import read_utf8

Rows = list[tuple[int, list[str]]]  # (line number, fields) of each line that is neither empty nor a comment
SELF_LOOPS = ("error", "drop")


def rows(text: str) -> Rows:
    """The fields of each non-empty line of `text` that does not start with '#', with its 1-based number."""
    lines = ((n, line.split()) for n, line in enumerate(text.splitlines(), 1) if not line.lstrip().startswith("#"))
    return [(n, fields) for n, fields in lines if fields]


def read_rows(path: Path) -> Rows:
    """`rows` of a UTF-8 file; a missing file is one line naming it."""
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    return rows(read_utf8(path, "graph files"))


def parse_features(data: Rows, where: str) -> tuple[list[str], Tensor]:
    """Node names and features from rows `name x1 ... xF` (F the same on every line): names, (N, F)."""
    names: list[str] = []
    values: list[list[float]] = []
    index: dict[str, int] = {}  # name -> its line
    for n, fields in data:
        if len(fields) < 2:
            raise UserError(
                f"{where}:{n}: expected 'node x1 ... xF', got {' '.join(fields)!r}: "
                "write the node's name, then its features"
            )
        if values and len(fields) - 1 != len(values[0]):
            raise UserError(
                f"{where}:{n}: node {fields[0]!r} has {len(fields) - 1} features, the first line "
                f"{len(values[0])}: give every node the same number"
            )
        if fields[0] in index:
            raise UserError(
                f"{where}:{n}: node {fields[0]!r} again (first on line {index[fields[0]]}): keep one line per node"
            )
        try:
            values.append([float(x) for x in fields[1:]])
        except ValueError:
            raise UserError(
                f"{where}:{n}: a feature of node {fields[0]!r} is not a number: {' '.join(fields[1:])[:60]!r}"
            ) from None
        index[fields[0]] = n
        names.append(fields[0])
    if not names:
        raise UserError(f"{where}: no node in the file: write one line 'node x1 ... xF' per node")
    return names, torch.tensor(values, dtype=torch.float32)


def parse_labels(data: Rows, where: str, nodes: dict[str, int], features: str) -> tuple[Tensor, list[str]]:
    """Labels from rows `name label` of known `nodes` (name -> index), -1 for the unlisted: (N,), class names
    in sorted order; `features` names where the nodes come from, for errors."""
    labels = torch.full((len(nodes),), -1, dtype=torch.long)
    seen: dict[str, int] = {}  # name -> its line
    for n, fields in data:
        if len(fields) != 2:
            raise UserError(
                f"{where}:{n}: expected 'node label', got {' '.join(fields)!r}: one node and its label per line"
            )
        if fields[0] not in nodes:
            raise UserError(f"{where}:{n}: node {fields[0]!r} is not in {features}: add it there, or remove this line")
        if fields[0] in seen:
            raise UserError(
                f"{where}:{n}: node {fields[0]!r} labelled again (first on line {seen[fields[0]]}): "
                "keep one label per node"
            )
        seen[fields[0]] = n
    classes = sorted({fields[1] for _, fields in data})
    for _, fields in data:
        labels[nodes[fields[0]]] = classes.index(fields[1])
    if not classes:
        raise UserError(f"{where}: no label in the file: write one line 'node label' per labelled node")
    return labels, classes


def parse_edges(data: Rows, where: str, nodes: dict[str, int], features: str, self_loops: str) -> Tensor:
    """Edges from rows `source target` between known `nodes`; a self-loop is refused (`self_loops=error`,
    the models add every node's own) or skipped (`drop`): (2, E), as listed."""
    edges = []
    for n, fields in data:
        if len(fields) != 2:
            raise UserError(
                f"{where}:{n}: expected 'source target', got {' '.join(fields)!r}: one edge per "
                "line, two node names separated by whitespace"
            )
        for name in fields:
            if name not in nodes:
                raise UserError(
                    f"{where}:{n}: node {name!r} has no features in {features}: add a line for it "
                    "there, or remove this edge"
                )
        if fields[0] == fields[1]:
            if self_loops == "error":
                raise UserError(
                    f"{where}:{n}: self-loop {fields[0]!r} -> {fields[1]!r}: the models add every "
                    "node's self-loop themselves (Ã = A + I); remove the line, or set "
                    "data.source.self_loops=drop to skip such lines"
                )
            continue
        edges.append((nodes[fields[0]], nodes[fields[1]]))
    return torch.tensor(edges, dtype=torch.long).reshape(-1, 2).T
