"""W&B in offline mode, in-process: the resolved config, tags, final metrics, and the same run after a resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import FAST
from omegaconf import OmegaConf

from attnmem.runtime import run

wandb = pytest.importorskip("wandb")

TINY = [
    *FAST,
    "logger=wandb",
    "tags=[sweep,test]",
    "data.source.num_train=100",
    "data.source.num_val=50",
    "data.source.num_test=50",
    "data.batch_size=50",
    "callbacks.plots.num_examples=1",
]


@pytest.fixture
def seen(monkeypatch, tmp_path) -> dict:
    """What the W&B run held just before run.py finished it (W&B 0.31 keeps offline runs in a binary file)."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    runs: dict = {}
    finish = run._finish_wandb

    def spy(trainer):
        if wandb.run is not None:
            runs.setdefault("runs", []).append(
                {
                    "id": wandb.run.id,
                    "config": wandb.run.config.as_dict(),
                    "tags": list(wandb.run.tags),
                    "dir": Path(wandb.run.dir),
                    "summary": dict(wandb.run.summary),
                }
            )
        finish(trainer)

    monkeypatch.setattr(run, "_finish_wandb", spy)
    return runs


def test_offline_run_logs_resolved_config_tags_and_final_metrics(compose_cfg, tmp_path, seen):
    cfg = compose_cfg(*TINY, "trainer.max_epochs=1")
    run.train(cfg)
    (logged,) = seen["runs"]
    assert logged["config"] == OmegaConf.to_container(cfg, resolve=True)
    assert logged["tags"] == ["sweep", "test"]
    (offline,) = (tmp_path / "run" / "wandb").glob(f"offline-run-*-{logged['id']}")  # beside the run's files
    assert logged["dir"].is_dir() and offline in logged["dir"].parents
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert {k: logged["summary"][k] for k in metrics} == metrics
    assert wandb.run is None  # finished, so the next job of a sweep starts its own run


def test_resume_continues_the_same_wandb_run(compose_cfg, tmp_path, seen):
    run.train(compose_cfg(*TINY, "trainer.max_epochs=1"))
    first = seen["runs"][0]["id"]
    ckpt = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=False)
    assert ckpt["wandb_run_id"] == first
    (tmp_path / "run" / "metrics.json").unlink()  # stopped before its end: a finished run would be read-only
    run.train(compose_cfg(*TINY, "trainer.max_epochs=2", "resume=auto"))
    assert seen["runs"][1]["id"] == first
    assert seen["runs"][1]["summary"]["epoch"] == 2


def test_a_raising_run_is_finished(compose_cfg, seen, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    cfg = compose_cfg(*TINY, "trainer.max_epochs=1")
    monkeypatch.setattr(run, "_evaluate_best", boom)
    with pytest.raises(RuntimeError, match="boom"):
        run.train(cfg)
    assert len(seen["runs"]) == 1 and wandb.run is None
