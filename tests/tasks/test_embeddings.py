"""The embeddings family end to end: word2vec learns bAbI's word classes, exports GloVe text, DCN and MemN2N load it."""

from __future__ import annotations

import csv
import json
import math

import pytest
import torch
from conftest import FAST, train_once
from hydra.utils import instantiate
from test_configs import _data_overrides

from attnmem.core.errors import UserError
from attnmem.data.babi_simulator import generate_babi
from attnmem.runtime import run

LOCATIONS = {"kitchen", "garden", "office", "bathroom", "hallway", "bedroom"}


@pytest.fixture(scope="module")
def word2vec_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("babi")
    (folder / "qa1_single-supporting-fact_train.txt").write_text("\n".join(generate_babi(1, 1500, 0, "train")) + "\n")
    analogies = folder / "questions.txt"
    analogies.write_text(": people-places\nmary john kitchen garden\njohn mary office bedroom\nmary john zebra x\n")
    return train_once(
        tmp_path_factory,
        "word2vec",
        "model=word2vec",
        "model.embed_dim=32",
        "data=babi_corpus",
        *FAST,
        f"data.source.data_dir={folder}",
        "data.min_count=1",
        "data.subsample=null",
        "data.batch_size=128",
        "trainer.max_epochs=4",
        f"+task.analogies={analogies}",
        f"+task.neighbours=[{','.join(sorted(LOCATIONS))},mary]",
        "optimizer.lr=0.02",
    )


def test_word2vec_learns_that_locations_are_alike(word2vec_run):
    rows = list(csv.DictReader((word2vec_run / "csv" / "metrics.csv").open()))
    val = [float(r["val/loss"]) for r in rows if r.get("val/loss")]
    assert val[-1] < 0.7 * 6 * math.log(2), val  # untrained, every logit is 0 (output vectors start at 0)
    neighbours = json.loads((word2vec_run / "neighbours.json").read_text())
    for word in LOCATIONS:
        assert len(LOCATIONS & set(neighbours[word][:5])) >= 3, (word, neighbours[word])
    metrics = json.loads((word2vec_run / "metrics.json").read_text())
    assert metrics["val/analogy_questions"] == 2 and 0 <= metrics["val/analogy_acc"] <= 1  # zebra is unknown
    assert (word2vec_run / "plots" / "words_pca.png").stat().st_size > 0


def _vectors(path):
    return {w: torch.tensor([float(v) for v in vs]) for w, *vs in (line.split(" ") for line in path.open())}


def test_the_vectors_are_glove_text_that_dcn_loads(word2vec_run, compose_cfg, tmp_path):
    vectors = _vectors(word2vec_run / "vectors.txt")
    assert {len(v) for v in vectors.values()} == {32} and "<pad>" not in vectors and LOCATIONS <= set(vectors)
    overrides = _data_overrides("squad", tmp_path)
    cfg = compose_cfg("model=dcn", "data=squad", *overrides, f"data.source.embeddings={word2vec_run}/vectors.txt")
    dm = instantiate(cfg.data)
    dm.prepare_data()
    dm.setup("fit")
    net = run.build_model(cfg.model, cfg.attention, dm.dims)
    shared = [w for w in dm.data.vocab if w in vectors]
    assert shared and net.embedding.weight.shape[1] == 32
    for word in shared:
        assert torch.allclose(net.embedding.weight[dm.data.vocab.index(word)], vectors[word])


def test_memn2n_starts_from_the_vectors_and_names_a_width_mismatch(word2vec_run, compose_cfg, tmp_path):
    vectors = _vectors(word2vec_run / "vectors.txt")
    overrides = [*_data_overrides("babi", tmp_path), f"data.source.embeddings={word2vec_run}/vectors.txt"]
    cfg = compose_cfg("model=memn2n", "data=babi", *overrides, "model.embed_dim=32")
    dm = instantiate(cfg.data)
    dm.prepare_data()
    dm.setup("fit")
    net = run.build_model(cfg.model, cfg.attention, dm.dims).memn2n  # the MemN2N its training adapter holds
    kitchen = dm.vocab.index("kitchen")
    for table in (*net.A, *net.C, net.B):
        assert torch.allclose(table.weight[kitchen], vectors["kitchen"])
    assert not table.weight[0].any()  # the pad stays zero
    cfg = compose_cfg("model=memn2n", "data=babi", *overrides, "model.embed_dim=20")
    with pytest.raises(
        UserError,
        match=r"^MemN2N: embed_dim=20 differs from the width 32 of the pretrained embeddings: build it with "
        r"embed_dim=32 \(in a run: model.embed_dim=32 for the vectors of data.source.embeddings\)$",
    ):
        run.build_model(cfg.model, cfg.attention, dm.dims)
