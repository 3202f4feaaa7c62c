"""Same config and seed give the same metrics; a resumed run ends where an unbroken one does; rerun repeats a run."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import torch
from conftest import CONF, FAST
from hydra.core.global_hydra import GlobalHydra

from attnmem.callbacks import rng_state
from attnmem.runtime import run
from attnmem.tools import rerun

# MemN2N on generated bAbI: shuffled batches and random noise (RN) both draw from the global RNGs
MEMN2N = [
    *FAST,
    "data.tasks=[2]",
    "data.source.num_train=200",
    "data.source.num_val=60",
    "data.source.num_test=60",
    "data.batch_size=25",
    "model.hops=2",
    "callbacks.plots=null",
]
# NTM on copy: batches drawn from generators seeded by (data seed, step), resumed mid-way by epoch
NTM = [
    *FAST,
    "model=ntm",
    "model.controller_size=16",
    "model.memory_locations=12",
    "model.memory_width=6",
    "data.task.max_length=4",
    "data.steps_per_epoch=6",
    "data.batch_size=4",
    "data.num_val=8",
    "data.num_test=8",
    "data.test_lengths=[6]",
    "callbacks.plots=null",
]


def _metrics(path: Path) -> dict[str, float]:
    return {k: v for k, v in json.loads(path.read_text()).items() if not k.endswith("_seconds")}


def _train(compose_cfg, run_dir: Path, *overrides: str) -> dict[str, float]:
    run.train(compose_cfg(*overrides, run_dir=run_dir))
    return _metrics(run_dir / "metrics.json")


def test_same_config_and_seed_give_identical_metrics(compose_cfg, tmp_path):
    first = _train(compose_cfg, tmp_path / "a", *MEMN2N, "trainer.max_epochs=3", "seed=5")
    second = _train(compose_cfg, tmp_path / "b", *MEMN2N, "trainer.max_epochs=3", "seed=5")
    assert first == second
    assert first != _train(compose_cfg, tmp_path / "c", *MEMN2N, "trainer.max_epochs=3", "seed=6")


def test_resumed_memn2n_ends_where_an_unbroken_run_ends(compose_cfg, tmp_path):
    straight = _train(compose_cfg, tmp_path / "straight", *MEMN2N, "trainer.max_epochs=4")
    _train(compose_cfg, tmp_path / "broken", *MEMN2N, "trainer.max_epochs=2")
    (tmp_path / "broken" / "metrics.json").unlink()  # stopped after epoch 2: a finished run would be read-only
    ckpt = torch.load(tmp_path / "broken" / "checkpoints" / "last.ckpt", weights_only=False)
    assert {"torch", "numpy", "python", "datamodule"} <= set(ckpt["rng_states"])
    resumed = _train(compose_cfg, tmp_path / "broken", *MEMN2N, "trainer.max_epochs=4", "ckpt_path=last")
    assert resumed == straight
    # without the saved random states the resumed run shuffles differently: the test can tell
    _train(compose_cfg, tmp_path / "plain", *MEMN2N, "trainer.max_epochs=2", "~callbacks.rng_state")
    (tmp_path / "plain" / "metrics.json").unlink()
    plain = _train(
        compose_cfg, tmp_path / "plain", *MEMN2N, "trainer.max_epochs=4", "resume=auto", "~callbacks.rng_state"
    )
    assert plain["epoch"] == straight["epoch"] and plain != straight


def test_resumed_ntm_on_copy_ends_where_an_unbroken_run_ends(compose_cfg, tmp_path):
    straight = _train(compose_cfg, tmp_path / "straight", *NTM, "trainer.max_epochs=3")
    _train(compose_cfg, tmp_path / "broken", *NTM, "trainer.max_epochs=1")
    (tmp_path / "broken" / "metrics.json").unlink()
    assert _train(compose_cfg, tmp_path / "broken", *NTM, "trainer.max_epochs=3", "resume=auto") == straight


def test_rng_states_round_trip_with_the_datamodules_generators():
    class Data:
        def __init__(self) -> None:
            self.rng, self.gen, self.np_gen = (
                random.Random(1),
                torch.Generator().manual_seed(2),
                np.random.default_rng(3),
            )

    data = Data()
    states = rng_state.collect(data)

    def draw() -> list[float]:
        return [
            random.random(),
            float(torch.rand(1)),
            float(np.random.rand()),
            data.rng.random(),
            float(torch.rand(1, generator=data.gen)),
            float(data.np_gen.random()),
        ]

    first = draw()
    assert draw() != first
    rng_state.restore(states, data)
    assert draw() == first


def test_rerun_repeats_a_run_from_its_manifest(compose_cfg, tmp_path):
    first = _train(compose_cfg, tmp_path / "run", *MEMN2N, "trainer.max_epochs=2", "seed=3")
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert "seed=3" in manifest["command"]["overrides"]
    GlobalHydra.instance().clear()
    again = tmp_path / "again"
    rerun.rerun(tmp_path / "run", [f"hydra.run.dir={again}"], conf_dir=CONF)
    assert _metrics(again / "metrics.json") == first
    assert json.loads((again / "manifest.json").read_text())["command"]["overrides"] == manifest["command"]["overrides"]
