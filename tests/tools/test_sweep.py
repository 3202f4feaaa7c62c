"""The local sweep runner and its report: jobs in-process through Hydra's launcher, resume, bad input."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml
from conftest import CONF, ROOT, SWEEPS, one_line
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from attnmem.core.errors import UserError
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


DROP = object()  # a key _write leaves out


def _write(tmp_path: Path, **changes) -> Path:
    spec = {
        "program": "train.py",
        "name": "tiny",
        "method": "grid",
        "metric": {"name": "val/acc", "goal": "maximize"},
        "parameters": {"model.hops": {"values": [1, 2]}, "seed": {"values": [0, 1]}, **TINY},
        "command": ["${env}", "${interpreter}", "${program}", "${args_no_hyphens}"],
    }
    spec = {k: v for k, v in {**spec, **changes}.items() if v is not DROP}
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch, tmp_path):
    # the configs are the package's, whatever the working directory; outputs go under ATTNMEM_ROOT
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


def test_an_override_of_a_key_the_config_lacks_says_how_to_add_it(tmp_path, capsys):
    err = _error(capsys, [str(_write(tmp_path)), "model.nope=1"])
    assert "job 0" in err and "Could not override 'model.nope'" in err and "use +model.nope=1" in err, err


@pytest.mark.slow  # a few tiny training runs
def test_grid_runs_in_process_resumes_and_reports(tmp_path, capsys):
    params = {"model.hops": {"values": [1, 0]}, "seed": {"values": [0, 1]}, **TINY}  # hops=0: a failing job
    with pytest.raises(UserError, match=r"^sweep tiny: 2 of 4 jobs failed \(job 2, job 3: errors above"):
        sweep.run(_write(tmp_path, parameters=params))  # after its report
    (out,) = (tmp_path / "outputs" / "sweeps" / "tiny").iterdir()
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
    with pytest.raises(SystemExit) as failed:  # jobs 2 and 3 fail again
        sweep.main([str(tmp_path / "tiny.yaml"), "--resume", str(out)])
    assert failed.value.code == 1
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
    sweep.main([str(SWEEPS / "memn2n_hops.yaml"), "--dry-run", "data.source.num_train=10"])
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
    assert cfg.model._target_ == "attnmem.tasks.qa_nets.MemN2NQA"


# W&B's sweep-configuration schema (github.com/wandb/sweeps, config/schema.json and schema.py) as the local
# runner applies it: what W&B refuses stops with one line naming the file and key, before any job
LR = "optimizer.lr"
REFUSED = [
    ({"method": "random", "run_cap": 3, "parameters": {LR: {"min": 0.1, "max": 0.01}}}, "lr: min (0.1) > max (0.01)"),
    (
        {"method": "random", "run_cap": 3, "parameters": {LR: {"distribution": "uniform", "min": 0.1, "max": 0.01}}},
        "lr: min (0.1) > max (0.01): W&B needs min < max; swap them",
    ),
    (
        {"method": "random", "run_cap": 3, "parameters": {"model.hops": {"min": 2, "max": 2}}},
        "hops: min (2) = max (2): W&B needs min < max; for one value write value: 2",
    ),
    (
        {
            "method": "random",
            "run_cap": 3,
            "parameters": {LR: {"distribution": "log_uniform_values", "min": 0, "max": 1}},
        },
        "lr.min: log_uniform_values takes values > 0, got 0",
    ),
    (
        {"method": "random", "run_cap": 3, "parameters": {LR: {"distribution": "log_uniform", "min": -9, "max": -2}}},
        "lr.distribution: W&B refuses log_uniform (bounds as logs): use log_uniform_values",
    ),
    (
        {
            "method": "random",
            "run_cap": 3,
            "parameters": {LR: {"distribution": "q_uniform", "min": 0, "max": 1, "q": 0}},
        },
        "lr.q: must be > 0, got 0",
    ),
    (
        {"method": "random", "run_cap": 3, "parameters": {LR: {"distribution": "normal", "sigma": -1}}},
        "lr.sigma: must be >= 0, got -1",
    ),
    (
        {
            "method": "random",
            "run_cap": 3,
            "parameters": {"model.hops": {"distribution": "int_uniform", "min": 1, "max": 3.5}},
        },
        "hops: int_uniform takes integer min and max",
    ),
    (
        {"method": "random", "run_cap": 3, "parameters": {LR: {"distribution": "gaussian"}}},
        "lr.distribution: 'gaussian' is not one of constant, categorical",
    ),
    (
        {"method": "random", "run_cap": 3, "parameters": {LR: {"distribution": "uniform", "min": 0.1}}},
        "lr: distribution uniform needs min and max (missing max)",
    ),
    (
        {"parameters": {"model.hops": {"values": [1, 2], "min": 1}}},
        "hops: 'min' does not go with distribution categorical (it takes values)",
    ),
    (
        {"method": "random", "run_cap": 3, "parameters": {"model.hops": {"values": [1, 2], "probabilities": [0.5]}}},
        "hops.probabilities: one number per value (2)",
    ),
    (
        {
            "method": "random",
            "run_cap": 3,
            "parameters": {"model.hops": {"values": [1, 2], "probabilities": [0.5, 0.6]}},
        },
        "hops.probabilities: [0.5, 0.6] are not >= 0 with sum 1",
    ),
    (
        {"parameters": {LR: {"min": 0.001, "max": 0.1}}},
        "lr: a grid sweep takes value, values, or int_uniform/q_uniform",
    ),
    (
        {"parameters": {"model.hops": {"values": [1, 2], "probabilities": [0.5, 0.5]}}},
        "hops: a grid sweep takes value, values, or int_uniform/q_uniform bounds, not categorical_w_probabilities",
    ),
    ({"method": "bayes", "run_cap": 2, "metric": DROP}, "metric: method bayes needs a metric"),
    (
        {"method": "bayes", "run_cap": 2, "parameters": {LR: {"distribution": "q_uniform", "min": 0.1, "max": 1}}},
        "lr: distribution q_uniform has no Optuna counterpart",
    ),
    ({"metric": {"name": "val/acc", "goal": "max"}}, "metric.goal: 'max' is not minimize or maximize"),
    ({"metric": {"name": "val/acc", "mode": "max"}}, "metric: unknown key 'mode'"),
    ({"metric": {"goal": "maximize"}}, "metric: needs a name"),
    ({"metric": {"name": "val/acc", "impute": "mean"}}, "metric.impute: 'mean' is not latest or best or worst"),
    ({"program": ["train.py"]}, "program: expected a string"),
    ({"parameters": {"+trainer.max_steps": {"value": 3}}}, "parameters.+trainer.max_steps: W&B takes names of letters"),
    ({"parameters": {"model": {"parameters": {"hops": {"value": 1}}}}}, "parameters.model: nested parameters"),
    ({"parameters": {}}, "parameters: expected a mapping of at least one parameter"),
    ({"run_cap": 0}, "run_cap: 0 is not a positive integer"),
    ({"scheduler": {"engine": "wandb"}}, "scheduler: for W&B Launch only"),
]


@pytest.mark.parametrize(
    ("changes", "expected"), REFUSED, ids=[e.split(":")[0] + str(i) for i, (_, e) in enumerate(REFUSED)]
)
def test_what_wandb_refuses_is_one_line_naming_the_file_and_key(tmp_path, capsys, changes, expected):
    path = _write(tmp_path, **changes)
    err = _error(capsys, [str(path), "--dry-run"])  # a sweep file W&B accepts would print its jobs and return
    assert err.startswith(f"error: {path}: ") and expected in err, err


def test_what_wandb_accepts_is_filled_in_as_wandb_fills_it(tmp_path):
    params = {
        "model.hops": {"min": 1, "max": 3},  # integers: int_uniform
        LR: {"min": 0.001, "max": 0.1},  # floats: uniform
        "data.batch_size": {"min": 8, "max": 64.0},  # one float: uniform
        "model.embed_dim": {"distribution": "constant", "value": 20},
        "attention": {"distribution": "categorical", "values": ["dot", "bilinear"]},
    }
    spec = sweep_spec.load_spec(_write(tmp_path, method="random", run_cap=20, metric=DROP, parameters=params))
    assert "metric" not in spec  # random (and grid) need no metric in W&B
    kinds = {k: p["distribution"] for k, p in spec["parameters"].items()}
    assert kinds == {
        "model.hops": "int_uniform",
        LR: "uniform",
        "data.batch_size": "uniform",
        "model.embed_dim": "constant",
        "attention": "categorical",
    }
    for point in sweep_spec.random_points(spec, seed=0):
        assert isinstance(point["model.hops"], int) and 1 <= point["model.hops"] <= 3
        assert 0.001 <= point[LR] <= 0.1 and point["model.embed_dim"] == 20
    spec = sweep_spec.load_spec(_write(tmp_path, metric={"name": "val/loss"}, controller={"type": "local"}))
    assert spec["metric"] == {"name": "val/loss", "goal": "minimize"}  # W&B's default goal


def test_a_grid_steps_int_uniform_and_q_uniform_bounds_as_wandb(tmp_path):
    params = {"model.hops": {"min": 1, "max": 3}, LR: {"distribution": "q_uniform", "min": 0.0, "max": 0.3, "q": 0.1}}
    spec = sweep_spec.load_spec(_write(tmp_path, parameters=params))
    assert [p["model.hops"] for p in sweep_spec.grid_points(spec)] == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert sweep_spec.grid_values(spec["parameters"][LR]) == pytest.approx(
        [0.0, 0.1, 0.2]
    )  # numpy.arange: max left out
    assert sweep.plan({**spec, "run_cap": 4}, 0, []) == [
        ["model.hops=1", f"{LR}=0.0"],
        ["model.hops=1", f"{LR}=0.1"],
        ["model.hops=1", f"{LR}=0.2"],
        ["model.hops=2", f"{LR}=0.0"],
    ]  # a grid's run_cap: its first points, as W&B stops there


def test_every_wandb_distribution_draws_in_its_range_with_its_type(tmp_path):
    params = {
        "a": {"distribution": "q_uniform", "min": 0, "max": 10, "q": 2},
        "b": {"distribution": "inv_log_uniform_values", "min": 0.01, "max": 1.0},
        "c": {"distribution": "q_log_uniform_values", "min": 1, "max": 100, "q": 1},
        "d": {"distribution": "q_normal", "mu": 5, "sigma": 2, "q": 0.5},
        "e": {"distribution": "log_normal"},
        "f": {"distribution": "beta", "a": 2, "b": 3},
        "g": {"distribution": "q_beta", "q": 0.25},
        "h": {"values": ["x", "y"], "probabilities": [1.0, 0.0]},
    }
    spec = sweep_spec.load_spec(_write(tmp_path, method="random", run_cap=50, parameters=params))
    points = sweep_spec.random_points(spec, seed=1)
    assert all(p["a"] in (0, 2, 4, 6, 8, 10) and isinstance(p["a"], int) for p in points)
    assert all(0.01 <= p["b"] <= 1.0 and 1 <= p["c"] <= 100 and isinstance(p["c"], int) for p in points)
    assert all((p["d"] * 2).is_integer() and p["e"] > 0 and 0 <= p["f"] <= 1 for p in points)
    assert all(p["g"] in (0.0, 0.25, 0.5, 0.75, 1.0) and p["h"] == "x" for p in points)
    assert spec["parameters"]["e"] == {"distribution": "log_normal", "mu": 0.0, "sigma": 1.0}  # W&B's defaults


def test_a_grid_without_metric_runs_and_is_ranked_by_what_its_jobs_monitor(tmp_path):
    params = {"model.hops": {"values": [1, 2]}, **TINY, "trainer.max_epochs": {"value": 1}}
    out = sweep.run(_write(tmp_path, metric=DROP, run_cap=1, parameters=params))
    assert [p.parent.name for p in out.glob("*/metrics.json")] == ["0"]  # run_cap=1: the first point only
    saved = yaml.safe_load((out / "sweep.yaml").read_text())
    assert saved["spec"]["metric"] == {"name": "val/acc", "goal": "maximize"}  # the QA family's monitor
    assert "the seed with the highest `val/acc`" in (out / "summary.md").read_text()


def test_a_wandb_export_of_a_sweep_without_metric_asks_for_one(tmp_path, capsys):
    path = _write(tmp_path, metric=DROP)
    export = tmp_path / "export.csv"
    export.write_text("Name,State,model.hops,seed,val/acc\nrun-0,finished,1,0,0.5\n")
    err = _error(capsys, ["report", str(export), "--sweep", str(path)])
    assert f"{path}: metric: needed to rank a W&B export" in err


def test_early_terminate_is_accepted_and_said_to_be_w_and_bs_only(tmp_path, capsys):
    path = _write(tmp_path, early_terminate={"type": "hyperband", "min_iter": 3})
    sweep.main([str(path), "--dry-run"])
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "early_terminate is applied by W&B's agent only" in notes[0] and str(path) in notes[0]


def test_an_override_that_needs_a_group_the_sweep_chooses_is_applied_to_every_job(tmp_path):
    # data.source.data_dir exists only once the sweep's data=babi is chosen: the run directory is named from
    # the first job's config, not from the extra overrides alone (which once failed with a stack trace)
    folder = tmp_path / "en"
    folder.mkdir()
    story = "1 Mary moved to the bathroom.\n2 John went to the hallway.\n3 Where is Mary?\tbathroom\t1\n"
    (folder / "qa1_tiny_train.txt").write_text("".join(story.replace("Mary", f"P{k}") for k in range(30)))
    params = {"data": {"value": "babi"}, "seed": {"values": [0]}, "trainer.max_epochs": {"value": 1},
              "trainer.enable_progress_bar": {"value": False}, "callbacks.plots": {"value": "null"}}
    out = sweep.run(_write(tmp_path, parameters=params), extra=[f"data.source.data_dir={folder}",
                                                                 "data.source.cache=false"])
    assert (out / "0" / "metrics.json").is_file() and out.parent.name == "tiny"


def test_replicas_fold_a_sweeps_seeds_into_jobs_and_its_report_unfolds_them(tmp_path, capsys):
    from attnmem.replicas.sweep import fold

    jobs = [["a=1", "seed=0"], ["a=1", "seed=1"], ["a=1", "seed=2"], ["a=1", "seed=5"], ["a=2", "seed=0"]]
    assert fold(jobs, 2, "train/error:min") == [
        ["a=1", "seed=0", "replicas=2", "replica_select=train/error:min"],
        ["a=1", "seed=2", "replicas=1"],  # consecutive seeds only, at most R of them
        ["a=1", "seed=5", "replicas=1"],
        ["a=2", "seed=0", "replicas=1"],
    ]
    sweep.main(["paper/memn2n_babi1k", "--dry-run", "--replicas", "10"])
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1] == "20 jobs"  # 20 tasks x 10 seeds as 20 jobs of 10 replicas, picked by training error
    assert printed[0].endswith("seed=0 replicas=10 replica_select=train/error:min")
    params = {"model.hops": {"value": 1}, "seed": {"values": [0, 1]}, **TINY}
    out = sweep.run(_write(tmp_path, parameters=params), replicas=2)
    metrics = json.loads((out / "0" / "metrics.json").read_text())
    assert not (out / "1").exists() and metrics["replicas"] == 2
    rows = list(csv.DictReader(open(out / "summary.csv")))
    assert [(r["job"], r["seed"], float(r["val/acc"])) for r in rows] == [
        ("0", str(r), pytest.approx(metrics[f"replicas/{r}/val/acc"])) for r in range(2)
    ]
    assert "\n| 2 | " in (out / "summary.md").read_text()  # n: two seeds in the setting's mean


@pytest.mark.parametrize(("jobs", "replicas", "fragments"), [
    ([["a=1", "seed=0"]], 0, ["--replicas 0", ">= 1"]),
    ([["a=1"]], 10, ["--replicas 10", "integer seed=<n>", "a=1"]),
    ([["a=1", "seed=x"]], 10, ["--replicas 10", "seed=x"]),
])
def test_seeds_that_cannot_fold_into_replicas_are_one_line(jobs, replicas, fragments):
    from conftest import one_line

    from attnmem.core.errors import UserError
    from attnmem.replicas.sweep import fold

    with pytest.raises(UserError) as err:
        fold(jobs, replicas)
    one_line(str(err.value), *fragments)


def test_jobs_that_differ_only_in_their_seed_are_composed_once(monkeypatch):
    calls = []
    real = sweep.compose
    monkeypatch.setattr(sweep, "compose", lambda name, overrides: calls.append(overrides) or real(name, overrides))
    jobs = [["model.hops=1", f"seed={s}"] for s in range(5)] + [["model.hops=2", "seed=0"], ["model.hops=1", "seed=x"]]
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        sweep.check_jobs(jobs, Path("x.yaml"))
    GlobalHydra.instance().clear()
    assert calls == [jobs[0], jobs[5], jobs[6]]  # a seed that is not an integer is composed on its own


def test_a_failed_jobs_error_is_what_its_return_value_raises_without_the_line_hydra_writes(capsys):
    from hydra.core.utils import JobReturn, JobStatus

    error = ValueError("boom")
    assert sweep._job_error(JobReturn(status=JobStatus.FAILED, _return_value=error)) is error
    assert capsys.readouterr().err == ""
    with pytest.raises(ValueError, match="the job did not fail"):
        sweep._job_error(JobReturn(status=JobStatus.COMPLETED, _return_value=3))


def _started(tmp_path: Path, **changes) -> tuple[Path, Path]:
    """A sweep file and the directory of a sweep of it as the runner saves it before its first job (no job run)."""
    path = _write(tmp_path, **changes)
    spec = sweep_spec.load_spec(path)
    out = tmp_path / "outputs" / "sweeps" / "tiny" / "started"
    sweep._save(out, path, spec, sweep.plan(spec, 0, []), [], 0, 1)
    return path, out


@pytest.mark.parametrize(
    ("edit", "argv", "changed"),
    [
        ({"parameters": {"model.hops": {"values": [1, 3]}, "seed": {"values": [0, 1]}, **TINY}}, [],
         "parameters.model.hops.values"),
        ({"run_cap": 2, "metric": {"name": "val/loss", "goal": "minimize"}}, [], "metric.name; metric.goal; run_cap"),
        ({}, ["trainer.max_epochs=3"], "overrides trainer.max_epochs=3 (it ran with none)"),
        ({}, ["--seed", "3"], "--seed 3 (it ran with --seed 0)"),
        ({}, ["--replicas", "2"], "--replicas 2 (it ran with --replicas 1)"),
    ],
)
def test_a_resume_that_would_change_the_sweep_is_refused_naming_the_change(tmp_path, capsys, edit, argv, changed):
    path, out = _started(tmp_path)
    before = (out / "sweep.yaml").read_bytes()
    _write(tmp_path, **edit)  # the same file edited, under the same name
    err = _error(capsys, [str(path), "--resume", str(out), *argv])
    one_line(err, f"error: --resume {out}: this command changes the sweep it resumes ({changed}), and a resumed sweep "
             f"runs only the jobs saved in its sweep.yaml: to resume it, give {path} as it was",
             f"start a new sweep: python -m attnmem.tools.sweep {path}", "(without --resume)")
    assert (out / "sweep.yaml").read_bytes() == before  # the old grid's record untouched, no job run
    assert sorted(p.name for p in out.iterdir()) == ["sweep.yaml"]


def test_a_sweep_whose_job_failed_exits_non_zero_after_its_report(tmp_path, capsys, monkeypatch):
    from hydra.core.utils import JobReturn, JobStatus

    def launch(jobs: list[list[str]], base: list[str]) -> list[JobReturn]:  # job 0 finishes, job 1 fails
        out = Path(next(o for o in base if o.startswith("hydra.sweep.dir=")).partition("=")[2])
        (out / "0").mkdir()
        (out / "0" / "metrics.json").write_text(json.dumps({"val/acc": 0.5, "val/loss": 1.0}))
        (out / "1").mkdir()
        return [JobReturn(status=JobStatus.COMPLETED, _return_value=0.5),
                JobReturn(status=JobStatus.FAILED, _return_value=ValueError("boom"))]

    monkeypatch.setattr(sweep, "_launch", launch)
    path = _write(tmp_path, parameters={"model.hops": {"values": [1, 2]}, "seed": {"value": 0}, **TINY})
    with pytest.raises(SystemExit) as done:
        sweep.main([str(path)])
    assert done.value.code == 1
    (out,) = (tmp_path / "outputs" / "sweeps" / "tiny").iterdir()
    assert "| 1 | 1 | 50.0%" in (out / "summary.md").read_text()  # the report came first
    *_, job, last = capsys.readouterr().err.strip().splitlines()
    assert job == "error: job 1 failed: ValueError: boom"
    assert last == (f"error: sweep tiny: 1 of 2 jobs failed (job 1: errors above; the report covers the finished "
                    f"ones): fix the cause, then run them again with: python -m attnmem.tools.sweep {path} "
                    f"--resume {out}")
