"""Every W&B sweep file in sweeps/ is well formed, and every job `wandb agent` would start composes."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import CONF, SWEEPS
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from attnmem.tools import sweep_spec

FILES = sorted(SWEEPS.glob("*.yaml")) + sorted(
    p for p in (SWEEPS / "paper").glob("*.yaml") if p.name != "figures.yaml" and ".protocol." not in p.name
)  # the paper protocols are sweep files too (their sidecars and figures are not)


def _points(spec: dict, groups: set[str]) -> list[dict]:
    """Grid: every point, or when that is larger, every combination of the group choices (the other keys at their
    first value: each key present under each recipe) and every value of every other parameter under the first
    (compose checks keys, types and group options; a value's type does not depend on the groups). Random and bayes:
    run_cap seeded draws."""
    params = spec["parameters"]
    if spec["method"] != "grid":
        return sweep_spec.random_points(spec, seed=0)
    combos = sweep_spec.grid_points({"parameters": {k: p for k, p in params.items() if k in groups}})
    first = sweep_spec.first_point(spec)
    points = [{**first, **combo} for combo in combos] + [  # every group combination with every key present,
        {**first, **combos[0], key: value}  # and every value of every other key once
        for key, p in params.items()
        if key not in groups
        for value in sweep_spec.grid_values(p)
    ]
    full = sweep_spec.grid_points(spec)
    return full if len(full) <= len(points) else points  # the whole grid whenever it is no larger


def wandb_args(point: dict) -> list[str]:
    """W&B's own `${args_no_hyphens}` of a point (what `wandb agent` passes); the runner writes them without W&B."""
    utils = pytest.importorskip("wandb.sdk.launch.sweeps.utils")
    return utils.create_sweep_command_args({"args": {k: {"value": v} for k, v in point.items()}})["args_no_hyphens"]


def test_the_overrides_are_written_as_wandb_agent_writes_them():
    point = {"model.hops": 2, "optimizer.lr": 0.001, "attention": "dot", "data.tasks": [1, 2], "flag": False,
             "x": None, "y": 1e-05, "z": "a b"}
    assert sweep_spec.args_no_hyphens(point) == wandb_args(point)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_job_of_the_sweep_file_composes(path: Path):
    spec = sweep_spec.load_spec(path)
    assert spec["program"] == "train.py"
    assert spec["command"][-1] == "${args_no_hyphens}" and "${program}" in spec["command"]
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        groups = {k for k in spec["parameters"] if loader.get_group_options(k)}
        for point in _points(spec, groups):
            overrides = sweep_spec.args_no_hyphens(point)  # the exact strings wandb agent passes
            assert overrides == wandb_args(point)
            try:
                cfg = compose("train", overrides=overrides, return_hydra_config=True)
            except Exception as err:  # any Hydra error: this job would fail under wandb agent
                pytest.fail(f"{path.name}: {' '.join(overrides)}: {err}")
            for key, value in point.items():
                if key in groups:
                    assert cfg.hydra.runtime.choices[key] == value, (key, overrides)
                elif isinstance(value, (bool, int, float)):
                    assert OmegaConf.select(cfg, key) == value, (key, overrides)
    GlobalHydra.instance().clear()


def test_the_sweep_files_of_the_issue_exist():
    assert {"memn2n_scores", "memn2n_hops", "ntm_memory", "hopfield_capacity"} <= {p.stem for p in FILES}
