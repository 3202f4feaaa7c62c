"""The graph family's sources: the karate club, the block model, edge-list files, Cora's archive (offline)."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest
import torch
from conftest import one_line

from attnmem.core.errors import UserError
from attnmem.data.graph.block_model import BlockModel
from attnmem.data.graph.cora import Cora
from attnmem.data.graph.datamodule import GraphDataModule
from attnmem.data.graph.edge_list_files import GraphFiles
from attnmem.data.graph.graph import split_nodes, undirected
from attnmem.data.graph.karate import Karate


def test_undirected_adds_reverse_edges_and_drops_duplicates_and_self_loops():
    edges = torch.tensor([[0, 1, 2, 1], [1, 0, 2, 2]])
    assert undirected(edges, 3).tolist() == [[0, 1, 1, 2], [1, 0, 2, 1]]


def test_karate_club_two_labelled_members_and_32_test_nodes():
    graph = Karate().load()
    assert graph.features.shape == (34, 34) and torch.equal(graph.features, torch.eye(34))
    assert graph.edge_index.shape == (2, 156)  # 78 friendships, both directions
    assert graph.labels[0] == 0 and graph.labels[33] == 1  # Mr. Hi's, the Officer's
    assert graph.labels.bincount().tolist() == [17, 17]
    assert graph.masks["train"].nonzero().flatten().tolist() == [0, 33]
    assert torch.equal(graph.masks["val"], graph.masks["train"])  # no other node may be looked at
    assert graph.masks["test"].sum() == 32 and not (graph.masks["test"] & graph.masks["train"]).any()


def test_split_nodes_per_class_disjoint_and_unlabelled_left_out():
    labels = torch.tensor([0, 1, 0, 1, -1, 0, 1, 0, 1, -1])
    masks = split_nodes(
        labels, 2, train_per_class=2, num_val=2, num_test=None, generator=torch.Generator().manual_seed(0), where="x"
    )
    assert labels[masks["train"]].bincount().tolist() == [2, 2]
    assert [int(m.sum()) for m in masks.values()] == [4, 2, 2]
    assert not (masks["train"] & masks["val"]).any() and not (masks["val"] & masks["test"]).any()
    assert not any(m[[4, 9]].any() for m in masks.values())
    with pytest.raises(UserError) as err:
        split_nodes(labels, 2, train_per_class=5, num_val=0, num_test=None, generator=torch.Generator(), where="x")
    one_line(str(err.value), "x: class 0 has 4 labelled node(s)", "train_per_class=5: lower it")


def test_block_model_is_seeded_balanced_and_assortative():
    source = BlockModel(communities=4, nodes=400, p_in=0.1, p_out=0.01, seed=3)
    graph, again = source.load(), source.load()
    assert torch.equal(graph.edge_index, again.edge_index) and torch.equal(graph.features, again.features)
    assert graph.labels.bincount().tolist() == [100] * 4
    src, dst = graph.edge_index
    inside = (graph.labels[src] == graph.labels[dst]).float().mean()
    # expected pairs: inside 4·C(100,2)·0.1 = 1980, across 6·100²·0.01 = 600: 77% of edges inside
    assert 0.72 < inside < 0.82
    assert [int(m.sum()) for m in graph.masks.values()] == [80, 100, 220]


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    return {
        "edges": _write(tmp_path / "edges.txt", "# a triangle and a tail\na b\nb c\nc a\nc d\n"),
        "features": _write(tmp_path / "features.txt", "a 1 0\nb 0 1\nc 1 1\nd 0 0\n"),
        "labels": _write(tmp_path / "labels.txt", "a x\nb x\nc y\nd y\n"),
    }


def test_edge_list_files_read_features_labels_and_undirected_edges(files):
    graph = GraphFiles(**files, train_per_class=1, num_val=1).load()
    assert graph.nodes == ["a", "b", "c", "d"] and graph.classes == ["x", "y"]
    assert graph.labels.tolist() == [0, 0, 1, 1]
    assert graph.features.tolist() == [[1, 0], [0, 1], [1, 1], [0, 0]]
    assert graph.edge_index.shape == (2, 8)
    assert [int(m.sum()) for m in graph.masks.values()] == [2, 1, 1]
    one_hot = GraphFiles(edges=files["edges"], labels=files["labels"], train_per_class=1, num_val=1).load()
    assert torch.equal(one_hot.features, torch.eye(4)) and one_hot.nodes == ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    ("name", "text", "fragments"),
    [
        ("edges", "a b\nb e\n", ["edges.txt:2: node 'e' has no features in", "add a line for it there"]),
        ("edges", "a b\nc c\n", ["edges.txt:2: self-loop 'c' -> 'c'", "data.source.self_loops=drop"]),
        ("edges", "a b\na b c\n", ["edges.txt:2: expected 'source target', got 'a b c'"]),
        ("labels", "a x\nz y\n", ["labels.txt:2: node 'z' is not in", "features.txt: add it there, or remove"]),
        ("features", "a 1 0\nb 0\n", ["features.txt:2: node 'b' has 1 features, the first line 2"]),
        ("features", "a 1 0\nb 0 q\n", ["features.txt:2: a feature of node 'b' is not a number"]),
    ],
)
def test_bad_graph_files_are_one_line_naming_file_and_line(tmp_path, files, name, text, fragments):
    files[name] = _write(tmp_path / f"{name}.txt", text)
    with pytest.raises(UserError) as err:
        GraphFiles(**files, train_per_class=1, num_val=0).load()
    one_line(str(err.value), *fragments)


def test_self_loops_drop_skips_them(tmp_path, files):
    files["edges"] = _write(tmp_path / "edges.txt", "a b\nc c\nc d\n")
    graph = GraphFiles(**files, self_loops="drop", train_per_class=1, num_val=0).load()
    assert graph.edge_index.tolist() == [[0, 1, 2, 3], [1, 0, 3, 2]]


def _cora_archive(path: Path) -> str:
    """A tiny archive in the layout of LINQS's cora.tgz: 6 papers of 2 classes, 4 word features; its sha256."""
    content = "".join(
        f"{p}\t{' '.join('1' if (p + k) % 3 == 0 else '0' for k in range(4))}\t{c}\n"
        for p, c in zip(range(10, 16), ["Theory", "Neural_Networks"] * 3)
    )
    cites = "10\t11\n12\t10\n13\t14\n15\t15\n"  # a paper citing itself: dropped
    with tarfile.open(path, "w:gz") as tar:
        for name, text in (("cora/cora.content", content), ("cora/cora.cites", cites)):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_cora_downloads_checks_sha256_and_reads_the_original_format(tmp_path):
    served = tmp_path / "served" / "cora.tgz"
    served.parent.mkdir()
    digest = _cora_archive(served)
    data_dir = tmp_path / "data"
    dm = GraphDataModule(
        source=Cora(
            data_dir=str(data_dir),
            download=True,
            url=served.as_uri(),
            sha256=digest,
            train_per_class=1,
            num_val=2,
            num_test=None,
        )
    )
    dm.prepare_data()
    dm.setup()
    assert (data_dir / "cora.tgz").read_bytes() == served.read_bytes()
    graph = dm.graph
    assert graph.classes == ["Neural_Networks", "Theory"] and graph.nodes[0] == "10"
    assert graph.labels.tolist() == [1, 0, 1, 0, 1, 0]
    assert torch.allclose(graph.features.sum(-1)[graph.features.sum(-1) > 0], torch.tensor(1.0))  # row-normalised
    assert graph.edge_index.shape == (2, 6)  # 3 citations both ways; 15 -> 15 dropped
    assert dm.dims.num_features == 4 and dm.dims.num_classes == 2 and dm.data_files == [data_dir / "cora.tgz"]


def test_cora_checksum_mismatch_and_missing_archive_are_one_line(tmp_path):
    served = tmp_path / "cora.tgz"
    _cora_archive(served)
    data_dir = tmp_path / "data"
    source = Cora(data_dir=str(data_dir), download=True, url=served.as_uri(), sha256="0" * 64)
    with pytest.raises(UserError) as err:
        source.prepare()
    one_line(str(err.value), served.as_uri(), "is not the pinned 0000", "the download was deleted")
    assert not (data_dir / "cora.tgz").exists() and not list(data_dir.iterdir())  # nothing half-written kept
    with pytest.raises(UserError) as err:
        Cora(data_dir=str(data_dir)).prepare()
    one_line(str(err.value), f"no cora.tgz in {data_dir}", "data.source.download=true")
