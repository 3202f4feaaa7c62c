"""Cora (McCallum et al. 2000; Sen et al. 2008) from its original LINQS release, `cora.tgz`, checked by sha256.

Not the Planetoid pickles: a pickle can run code when loaded. The archive holds `cora/cora.content`
(`paper w1 ... w1433 class` per line, binary word features) and `cora/cora.cites` (`cited citing`).
"""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import cast

import torch

from attnmem.core.download import Remote, check_sha256, fetch
from attnmem.core.errors import UserError
from attnmem.data.catalog import DATASETS, fetch_hint
from attnmem.data.graph.graph import Graph, check_split_options, row_normalized, split_nodes, undirected
from attnmem.data.graph.text_files import SELF_LOOPS, parse_edges, parse_features, parse_labels, rows

_REMOTE = DATASETS["cora"].remotes[0]  # the URL, name and sha256 pinned once, in the catalog of the data folder
URL, ARCHIVE, SHA256 = _REMOTE.url, _REMOTE.name, cast(str, _REMOTE.sha256)  # the catalog pins its sha256
MEMBERS = ("cora.content", "cora.cites")


def read_members(archive: Path) -> dict[str, str]:
    """The text of `cora.content` and `cora.cites` in the archive, wherever its folder; nothing is extracted."""
    texts = {}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar.getmembers():
            name = member.name.rsplit("/", 1)[-1]
            if member.isfile() and name in MEMBERS:
                file = tar.extractfile(member)
                assert file is not None  # a regular file (isfile above)
                texts[name] = file.read().decode("utf-8")
    missing = [m for m in MEMBERS if m not in texts]
    if missing:
        raise UserError(f"{archive}: no {missing[0]} in the archive: is it LINQS's cora.tgz? ({URL})")
    return texts


class Cora:
    """The Cora citation graph: 2708 papers, 1433 binary word features, 7 classes, 5429 citations (undirected).

    `data_dir/cora.tgz` is read, or downloaded from `url` when `download` is set; its sha256 must be
    `sha256`. Features are row-normalised (`normalize_features`) as in Kipf & Welling and GAT. The split is
    Planetoid's shape (20 per class, 500 val, 1000 test) drawn with `seed`, not Planetoid's own node list.
    """

    def __init__(
        self,
        *,
        data_dir: str,
        download: bool = False,
        url: str = URL,
        sha256: str = SHA256,
        normalize_features: bool = True,
        self_loops: str = "drop",
        train_per_class: int = 20,
        num_val: int = 500,
        num_test: int | None = 1000,
        seed: int = 0,
    ) -> None:
        if self_loops not in SELF_LOOPS:
            raise ValueError(f"data.source.self_loops must be one of {SELF_LOOPS}, got {self_loops!r}")
        check_split_options(train_per_class, num_val, num_test)
        self.archive, self.download, self.url, self.sha256 = Path(data_dir) / ARCHIVE, download, url, sha256
        self.normalize_features, self.self_loops = normalize_features, self_loops
        self.train_per_class, self.num_val, self.num_test, self.seed = train_per_class, num_val, num_test, seed
        self.data_files = [self.archive]

    def prepare(self) -> None:
        """Download the archive when it is missing and `download` is set; else say where to put it."""
        if self.archive.is_file():
            return
        if not self.download:
            hint = fetch_hint(self.archive) or (f": set data.source.download=true to fetch it from {self.url}, "
                                                "or put the file there")
            raise UserError(f"no {ARCHIVE} in {self.archive.parent}{hint}")
        fetch(Remote(url=self.url, name=ARCHIVE, sha256=self.sha256), self.archive.parent, label=f"cora: {ARCHIVE}")

    def load(self) -> Graph:
        """The graph of the checked archive."""
        check_sha256(self.archive, self.sha256, str(self.archive))
        texts = read_members(self.archive)
        content = rows(texts["cora.content"])
        where = {m: f"{self.archive}:{m}" for m in MEMBERS}
        names, features = parse_features([(n, fields[:-1]) for n, fields in content], where["cora.content"])
        index = {name: i for i, name in enumerate(names)}
        labels, classes = parse_labels(
            [(n, [fields[0], fields[-1]]) for n, fields in content], where["cora.content"], index, where["cora.content"]
        )
        edges = parse_edges(
            rows(texts["cora.cites"]), where["cora.cites"], index, where["cora.content"], self.self_loops
        )
        masks = split_nodes(
            labels,
            len(classes),
            train_per_class=self.train_per_class,
            num_val=self.num_val,
            num_test=self.num_test,
            generator=torch.Generator().manual_seed(self.seed),
            where=where["cora.content"],
        )
        features = row_normalized(features) if self.normalize_features else features
        return Graph(
            features=features,
            edge_index=undirected(edges, len(names)),
            labels=labels,
            masks=masks,
            classes=classes,
            nodes=names,
        )
