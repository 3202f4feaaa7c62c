"""The patterns family end to end: train.py's pipeline with the classical and modern nets, metrics, plots."""

from __future__ import annotations

import json

import torch
from conftest import FAST

from attnmem.runtime import run
from attnmem.tasks.patterns import energy_monotone, overlaps


def test_overlap_and_monotone_by_hand():
    targets = torch.tensor([[1.0, -1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    states = torch.tensor([[0.3, -2.0, 0.0, -1.0], [-1.0, -1.0, -1.0, -1.0]])  # 0 counts as +1
    torch.testing.assert_close(overlaps(states, targets), torch.tensor([0.5, -1.0]))
    energy = torch.tensor([[3.0, 2.0, 2.0], [3.0, 2.0, 2.5]])
    assert energy_monotone(energy).tolist() == [True, False]


def test_classical_run_writes_metrics_and_plots_in_one_epoch(compose_cfg, tmp_path):
    cfg = compose_cfg("model=hopfield", "data.size=64", "data.load=0.05", "data.noise=0.1", *FAST)
    assert cfg.data._target_.endswith("PatternsDataModule")
    run.train(cfg)
    out = tmp_path / "run"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["epoch"] == 1 and metrics["params"] == 0
    assert metrics["test/overlap"] == 1.0 and metrics["test/recall"] == 1.0 and metrics["test/overlap_min"] == 1.0
    assert metrics["test/energy_monotone"] == 1.0 and metrics["test/steps"] >= 1
    assert {"energy.png", "patterns.png"} <= {p.name for p in (out / "plots").iterdir()}


def test_modern_run_with_a_learned_score_trains(compose_cfg, tmp_path):
    cfg = compose_cfg("model=modern_hopfield", "attention=bilinear", "data.size=32", "data.num_patterns=16",
                      "data.noise=0.2", "data.probes_per_pattern=32", "data.batch_size=256", "trainer.max_epochs=10",
                      "optimizer.lr=0.05", "callbacks.plots=null", *FAST)
    run.train(cfg)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["epoch"] == 10 and metrics["params"] == 32 * 32
    assert metrics["train/loss"] < 0.5 and metrics["test/overlap"] > 0.9
