"""The local sweep runner and its report: jobs in-process through Hydra's launcher, resume, bad input."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml
from conftest import CONF, ROOT
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from attnmem.tools import sweep, sweep_report, sweep_spec

TINY = {
    "data.source.num_train": {"value": 100},
    "data.source.num_val": {"value": 50},
    "data.source.num_test": {"value": 50},
    "data.batch_size": {"value": 50},
    "trainer.max_epochs": {"value": 2},
    "trainer.enable_progress_bar": {"value": False},
    "callbacks.plots": {"value": "null"},
}


def _write(tmp_path: Path, **changes) -> Path:
    spec = {
        "program": "train.py",
        "name": "tiny",
        "method": "grid",
        "metric": {"name": "val/acc", "goal": "maximize"},
        "parameters": {"model.hops": {"values": [1, 2]}, "seed": {"values": [0, 1]}, **TINY},
        "command": ["${env}", "${interpreter}", "${program}", "${args_no_hyphens}"],
    }
    for key, value in changes.items():
        spec[key] = value
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch, tmp_path):
    # program: train.py is found from the working directory; outputs go under ATTNMEM_ROOT
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("ATTNMEM_ROOT", str(tmp_path))


def _error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        sweep.main(argv)
    assert exit_info.value.code == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"metod": "grid"}, "unknown key 'metod'"),
        ({"parameters": {"model.hopz": {"values": [1, 2]}}}, "parameters.model.hopz: not a config key or group"),
        ({"parameters": {"model.hops": {"values": []}}}, "parameters.model.hops.values: an empty"),
        ({"parameters": {"model.hops": {"value": None}}}, "parameters.model.hops: a null value"),
        ({"parameters": {"model.hops": {"valuez": [1]}}}, "parameters.model.hops: unknown key 'valuez'"),
        ({"method": "random"}, "run_cap: method random needs an integer run_cap"),
        ({"parameters": {"attention": {"values": ["dot", "nope"]}}}, "job 1 (attention=nope"),
    ],
)
def test_bad_sweep_file_is_one_line_naming_file_and_key_before_any_job(tmp_path, capsys, changes, expected):
    path = _write(tmp_path, **changes)
    err = _error(capsys, [str(path)])
    assert str(path) in err and expected in err, err
    assert not (tmp_path / "outputs").exists()  # no job started


@pytest.mark.slow  # a few tiny training runs
def test_grid_runs_in_process_resumes_and_reports(tmp_path, capsys):
    params = {"model.hops": {"values": [1, 0]}, "seed": {"values": [0, 1]}, **TINY}  # hops=0: a failing job
    out = sweep.run(_write(tmp_path, parameters=params))
    assert out.parent == tmp_path / "outputs" / "sweeps" / "tiny"
    done = {i: (out / str(i) / "metrics.json").is_file() for i in range(4)}
    assert done == {0: True, 1: True, 2: False, 3: False}  # the failed jobs did not stop job 1
    overrides = yaml.safe_load((out / "0" / ".hydra" / "overrides.yaml").read_text())
    assert overrides[:2] == ["model.hops=1", "seed=0"]
    rows = list(csv.DictReader(open(out / "summary.csv")))
    assert [(r["job"], r["state"], r["model.hops"], r["seed"]) for r in rows] == [
        ("0", "finished", "1", "0"),
        ("1", "finished", "1", "1"),
        ("2", "failed", "0", "0"),
        ("3", "failed", "0", "1"),
    ]
    accs = [json.loads((out / str(i) / "metrics.json").read_text())["val/acc"] for i in (0, 1)]
    mean, std = sum(accs) / 2, abs(accs[0] - accs[1]) / 2**0.5
    text = (out / "summary.md").read_text()
    assert (
        f"| 1 | 2 | {100 * mean:.1f}% ± {100 * std:.1f}% | {100 * max(accs):.1f}% | seed={accs.index(max(accs))} |"
        in text
    )
    assert "the seed with the highest `val/acc` (validation)" in text
    assert "job 2 (failed), job 3 (failed)" in text
    assert (out / "summary.png").stat().st_size > 1000
    # resume: finished jobs are skipped, the rest run again (job 1 made unfinished on purpose)
    kept = (out / "0" / "metrics.json").stat().st_mtime_ns
    (out / "1" / "metrics.json").unlink()
    capsys.readouterr()
    sweep.main([str(tmp_path / "tiny.yaml"), "--resume", str(out)])
    assert (out / "0" / "metrics.json").stat().st_mtime_ns == kept
    again = json.loads((out / "1" / "metrics.json").read_text())["val/acc"]
    assert again == accs[1]  # same config and seed: the same result
    assert "3 of 4 jobs to run" in capsys.readouterr().out  # job 1 and the two failed ones


def test_report_from_a_wandb_export_csv_equals_the_directory_report(tmp_path):
    spec = sweep_spec.load_spec(_write(tmp_path))
    rows = [
        {"job": str(i), "state": "finished", "model.hops": h, "seed": s, "val/acc": a, "val/loss": 1 - a}
        for i, (h, s, a) in enumerate([(1, 0, 0.5), (1, 1, 0.7), (2, 0, 0.9), (2, 1, 0.8)])
    ]
    rows.append({"job": "4", "state": "crashed", "model.hops": 2, "seed": 2})
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "sweep.yaml").write_text(
        yaml.safe_dump({"spec": spec, "jobs": [[f"model.hops={r['model.hops']}", f"seed={r['seed']}"] for r in rows]})
    )
    for r in rows[:4]:
        (out / r["job"]).mkdir()
        (out / r["job"] / "metrics.json").write_text(json.dumps({"val/acc": r["val/acc"], "val/loss": r["val/loss"]}))
    sweep_report.report(out)
    table = (out / "summary.md").read_text()
    assert "| 1 | 2 | 60.0% ± 14.1% | 70.0% | seed=1 |" in table
    assert "| 2 | 2 | 85.0% ± 7.1% | 90.0% | seed=0 |" in table
    # a W&B runs export: Name, State, config columns, summary metrics
    export = tmp_path / "export.csv"
    with open(export, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["Name", "State", "model.hops", "seed", "val/acc", "val/loss"])
        writer.writeheader()
        writer.writerows(
            [
                {
                    "Name": f"run-{r['job']}",
                    "State": r["state"],
                    **{k: v for k, v in r.items() if k not in ("job", "state")},
                }
                for r in rows
            ]
        )
    sweep.main(["report", str(export), "--sweep", str(tmp_path / "tiny.yaml")])
    from_csv = (tmp_path / "export" / "summary.md").read_text()
    assert from_csv.replace("run-4", "4") == table.replace("(not run)", "(crashed)")


def test_report_with_no_finished_job_is_one_line(tmp_path, capsys):
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "sweep.yaml").write_text(
        yaml.safe_dump({"spec": sweep_spec.load_spec(_write(tmp_path)), "jobs": [["model.hops=1", "seed=0"]]})
    )
    err = _error(capsys, ["report", str(out)])
    assert "no finished jobs" in err
    assert "no sweep.yaml" in _error(capsys, ["report", str(tmp_path)])


def test_random_draws_are_seeded_and_dry_run_prints_the_jobs(tmp_path, capsys):
    params = {
        "optimizer.lr": {"distribution": "log_uniform_values", "min": 1e-4, "max": 1e-1},
        "model.hops": {"values": [1, 2, 3]},
        "model.embed_dim": {"distribution": "int_uniform", "min": 8, "max": 64},
    }
    spec = sweep_spec.load_spec(_write(tmp_path, method="random", run_cap=5, parameters=params))
    first, again = sweep_spec.random_points(spec, seed=3), sweep_spec.random_points(spec, seed=3)
    assert first == again and first != sweep_spec.random_points(spec, seed=4) and len(first) == 5
    assert all(1e-4 <= p["optimizer.lr"] <= 1e-1 and 8 <= p["model.embed_dim"] <= 64 for p in first)
    sweep.main([str(ROOT / "sweeps" / "memn2n_hops.yaml"), "--dry-run", "data.source.num_train=10"])
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1] == "27 jobs"
    assert (
        printed[0]
        == "0: python train.py model=memn2n data.tasks=[1] model.hops=1 seed=0 trainer.max_epochs=20 data.source.num_train=10"
    )


@pytest.mark.slow  # a few tiny training runs
def test_bayes_runs_optuna_trials(tmp_path):
    params = {
        "optimizer.lr": {"distribution": "log_uniform_values", "min": 1e-3, "max": 1e-1},
        "model.hops": {"values": [1, 2]},
        **TINY,
    }
    path = _write(tmp_path, method="bayes", run_cap=2, parameters=params)
    assert sweep_spec.optuna_overrides(sweep_spec.load_spec(path))[:2] == [
        "optimizer.lr=tag(log, interval(0.001, 0.1))",
        "model.hops=choice(1, 2)",
    ]
    out = sweep.run(path)
    assert sorted(p.parent.name for p in out.glob("*/metrics.json")) == ["0", "1"]
    assert (out / "optimization_results.yaml").is_file()
    assert "runs" in (out / "summary.md").read_text()


def test_optuna_hparams_search_composes(tmp_path):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("train", overrides=["hparams_search=memn2n_optuna"], return_hydra_config=True)
    GlobalHydra.instance().clear()
    sweeper = cfg.hydra.sweeper
    assert sweeper._target_ == "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper"
    assert sweeper.sampler._target_ == "optuna.samplers.TPESampler" and sweeper.direction == "maximize"
    assert set(sweeper.params) == {"optimizer.lr", "model.embed_dim", "model.hops"}
    assert cfg.monitor == "val/acc" and cfg.hydra.mode.name == "MULTIRUN"
    assert cfg.model._target_ == "attnmem.models.memn2n.MemN2N"
