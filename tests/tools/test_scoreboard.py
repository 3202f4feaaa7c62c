"""Paper protocols and the scoreboard, on small fake sweep directories: every cell, the selection rule, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import SWEEPS

from attnmem.core.errors import UserError
from attnmem.tools import protocol, scoreboard

PROTOCOL = {
    "title": "Tiny per task",
    "paper": "Someone et al.",
    "figures": "tiny",
    "rows": {"parameter": "data.tasks"},
    "metric": "val/error",
    "select": ["train/error", "train/loss"],
    "fail_above": 0.05,
}
FIGURES = {
    "tiny": {
        "source": "a table",
        "split": "test",
        "metric": "error (%)",
        "rows": {1: 0.1, 2: 8.3},
        "summary": {"mean": 4.2},
    }
}


def sweep_files(root: Path, name: str = "tiny", **changes) -> Path:
    """A sweep file, its protocol and the figures file in `root/sweeps/paper/`."""
    folder = root / "sweeps" / "paper"
    folder.mkdir(parents=True, exist_ok=True)
    spec = {
        "program": "train.py",
        "name": name,
        "method": "grid",
        "metric": {"name": "val/error", "goal": "minimize"},
        "parameters": {"data.tasks": {"values": [[1], [2]]}, "seed": {"values": [0, 1, 2]}},
    }
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    (folder / f"{name}.protocol.yaml").write_text(yaml.safe_dump(PROTOCOL | changes))
    (folder / "figures.yaml").write_text(yaml.safe_dump(FIGURES))
    return folder / f"{name}.yaml"


def sweep_dir(root: Path, sweep_file: Path, jobs: list[list[str]], metrics: dict[int, dict], seconds=None) -> Path:
    """A sweep directory as the runner leaves it: sweep.yaml, and a folder per job that ran."""
    out = root / "outputs" / "sweeps" / "tiny" / "2026-12-01_10-00-00"
    out.mkdir(parents=True)
    spec = yaml.safe_load(sweep_file.read_text())
    saved = {
        "file": str(sweep_file),
        "seed": 0,
        "overrides": ["data.source.data_dir=x"],
        "spec": spec,
        "jobs": [[*j, "data.source.data_dir=x"] for j in jobs],
    }
    if seconds is not None:
        saved["seconds"] = seconds
    (out / "sweep.yaml").write_text(yaml.safe_dump(saved))
    for i, m in metrics.items():
        (out / str(i)).mkdir()
        (out / str(i) / "metrics.json").write_text(json.dumps(m))
        (out / str(i) / "manifest.json").write_text(json.dumps({"examples": {"train": 900, "val": 100}}))
    return out


def per_task_run(tmp_path: Path) -> Path:
    jobs = [[f"data.tasks=[{t}]", f"seed={s}"] for t in (1, 2) for s in (0, 1, 2)]
    metrics = {
        0: {"train/error": 0.0, "train/loss": 0.5, "val/error": 0.02},
        1: {"train/error": 0.0, "train/loss": 0.3, "val/error": 0.0500000007},  # task 1's pick: lower loss; 5.0% as
        # float32 logs it, which has not failed (not above 5%)
        2: {"train/error": 0.1, "train/loss": 0.1, "val/error": 0.00},  # the best validation: never picked
        3: {"train/error": 0.2, "train/loss": 1.0, "val/error": 0.30},
        4: {"train/error": 0.1, "val/error": 0.10},  # partial metrics: left out, named
    }  # job 5 never ran
    return sweep_dir(tmp_path, sweep_files(tmp_path), jobs, metrics, seconds=600)


def test_every_cell_of_a_per_task_table(tmp_path):
    table = scoreboard.build(per_task_run(tmp_path))
    text = scoreboard.markdown(table)
    rows = [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert rows == [
        "| 1 | 5.0 | 2.2 | seed=1 | 2.3 ± 2.5 | 3 | 0.1 | +4.9 |",
        "| 2 | 30.0 ✗ | 4.6 | seed=0 | 30.0 ± 0.0 | 1 of 3 | 8.3 | +21.7 |",
    ]
    assert "## Tiny per task (incomplete: 4 of 6 jobs finished)" in text
    assert (
        "- Mean over 2 rows: ours **17.5%** (± 2.5 SE), mean over seeds 16.2%; paper 4.2% (the same rows); "
        "difference +13.3" in text
    )
    assert "- Rows above 5% error (failed, as the papers count them): ours 1 of 2, paper 1" in text
    assert "- Wall time of the sweep: 10 min." in text
    assert f"{table.sweep_dir / '4' / 'metrics.json'}: no 'train/loss'" in text
    assert "python -m attnmem.tools.sweep" in text and "data.source.data_dir=x" in text


def test_rows_read_from_one_models_metrics_share_its_selected_job(tmp_path):
    sweep_file = sweep_files(tmp_path, rows={"metric": "val/task{row}/error", "values": [1, 2]})
    jobs = [["data.tasks=[1,2]", f"seed={s}"] for s in (0, 1)]
    metrics = {
        0: {"train/error": 0.2, "train/loss": 1.0, "val/error": 0.1, "val/task1/error": 0.0, "val/task2/error": 0.2},
        1: {"train/error": 0.1, "train/loss": 2.0, "val/error": 0.3, "val/task1/error": 0.1, "val/task2/error": 0.5},
    }
    table = scoreboard.build(sweep_dir(tmp_path, sweep_file, jobs, metrics))
    assert [(r.label, r.ours, r.chosen, r.seeds) for r in table.rows] == [
        ("1", 0.1, "seed=1", 2),
        ("2", 0.5, "seed=1", 2),
    ]
    assert table.rows[1].se == pytest.approx((0.5 * 0.5 / 50) ** 0.5)  # 100 questions over two tasks
    assert table.finished == table.jobs == 2 and "incomplete" not in scoreboard.markdown(table)
    assert "Ours: `val/task{row}/error` in %," in scoreboard.markdown(table)  # the rows' metric, not the monitor's


def test_a_curve_without_selection_shows_the_seeds_mean_and_its_capacity(tmp_path):
    # loads 0.1, 0.2, 0.3 x 2 seeds; the means 1.0, 0.95, 0.5 fall below 0.9 between 0.2 and 0.3: at
    # 0.2 + 0.1 * (0.95 - 0.9) / (0.95 - 0.5) = 0.2111
    sweep_file = sweep_files(
        tmp_path, rows={"parameter": "data.load"}, metric="test/overlap", select=[], percent=False, digits=3,
        capacity=0.9, fail_above=None,
    )
    spec = yaml.safe_load(sweep_file.read_text())
    spec["parameters"] = {"data.load": {"values": [0.1, 0.2, 0.3]}, "seed": {"values": [0, 1]}}
    sweep_file.write_text(yaml.safe_dump(spec))
    figures = yaml.safe_load((sweep_file.parent / "figures.yaml").read_text())
    figures["tiny"]["summary"] = {"capacity": 0.25}
    (sweep_file.parent / "figures.yaml").write_text(yaml.safe_dump(figures))
    jobs = [[f"data.load={x}", f"seed={s}"] for x in (0.1, 0.2, 0.3) for s in (0, 1)]
    overlaps = [1.0, 1.0, 0.9, 1.0, 0.6, 0.4]
    metrics = {i: {"test/overlap": m} for i, m in enumerate(overlaps)}
    text = scoreboard.markdown(scoreboard.build(sweep_dir(tmp_path, sweep_file, jobs, metrics)))
    rows = [line for line in text.splitlines() if line.startswith("| 0.")]
    assert rows == [
        "| 0.1 | 1.000 |  | mean of seeds | 1.000 ± 0.000 | 2 |  |  |",
        "| 0.2 | 0.950 |  | mean of seeds | 0.950 ± 0.071 | 2 |  |  |",
        "| 0.3 | 0.500 |  | mean of seeds | 0.500 ± 0.141 | 2 |  |  |",
    ]
    assert "per row the mean over seeds (no selection)" in text and "Mean over" not in text
    assert "where the mean over seeds falls below 0.9 (linear between rows): ours **0.211**, paper 0.25" in text
    below = [scoreboard.Row("0.1", 1, 1, mean=0.5)]
    assert scoreboard.capacity(below, 0.9) == "below 0.1" and scoreboard.capacity(below, 0.1) == "above 0.1"


def test_the_command_writes_the_newest_run_of_each_protocol(tmp_path, monkeypatch, capsys):
    per_task_run(tmp_path)
    sweep_files(tmp_path, name="other", title="Another paper")  # a protocol that has not run
    monkeypatch.chdir(tmp_path)
    scoreboard.main(["--out", "board.md", "--protocols", "sweeps/paper"])
    text = (tmp_path / "board.md").read_text()
    assert text.startswith("# Scoreboard") and "| 2 | 30.0 ✗ |" in text
    assert "## Another paper (not run on this machine yet)" in text
    assert "Command: `python -m attnmem.tools.sweep sweeps/paper/other.yaml`" in text
    assert "warning:" in capsys.readouterr().err  # the partial job, on the terminal too


def test_a_protocol_whose_runs_are_elsewhere_keeps_its_table(tmp_path, monkeypatch, capsys):
    per_task_run(tmp_path)
    sweep_files(tmp_path, name="other", title="Another paper")  # ran on another machine: its table is kept
    sweep_files(tmp_path, name="third", title="A third paper")  # never ran anywhere
    other = "## Another paper (incomplete: 1 of 2 jobs finished)\n\n| row | ours |\n|---:|---:|\n| 1 | 2.0 |\n"
    board = tmp_path / "board.md"
    board.write_text(f"# Scoreboard\n\n## Tiny per task\n\nan old table\n\n{other}\n## A third paper (not run on this "
                     "machine yet)\n\nold\n")
    monkeypatch.chdir(tmp_path)
    scoreboard.main(["--out", "board.md", "--protocols", "sweeps/paper"])
    text = board.read_text()
    assert "an old table" not in text and "| 2 | 30.0 ✗ |" in text  # the run here replaces its old table
    assert "\n" + other in text and text.index("## Another paper") < text.index("## A third paper")
    assert "## A third paper (not run on this machine yet)\n\nPaper: Someone et al." in text
    err = capsys.readouterr().err
    assert "kept: Another paper: no sweep of sweeps/paper/other.yaml on this machine" in err and "third" not in err


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"selection": "x"}, "unknown key 'selection'"),
        ({"rows": {"parameter": "model.hops"}}, "rows.parameter: 'model.hops' is not a parameter of"),
        ({"figures": "absent"}, "figures: 'absent' is not an entry of"),
        ({"rows": {"metric": "val/error"}}, "rows: give parameter:"),
        ({"rows": {"metric": "val/task{row}/error", "values": [1]}, "capacity": 0.9}, "capacity: needs rows.parameter"),
    ],
)
def test_a_bad_protocol_file_is_one_line_naming_it(tmp_path, changes, expected):
    sweep_file = sweep_files(tmp_path, **changes)
    with pytest.raises(UserError, match="protocol.yaml: ") as info:
        protocol.load(sweep_file, yaml.safe_load(sweep_file.read_text())["parameters"])
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_a_protocol_file_that_is_not_yaml_is_one_line_naming_its_line(tmp_path):
    sweep_file = sweep_files(tmp_path)
    protocol.sidecar(sweep_file).write_text("title: t\npaper: Someone: a figure\n")
    with pytest.raises(UserError) as info:
        protocol.load(sweep_file, {})
    assert "tiny.protocol.yaml:2: mapping values are not allowed here (quote a value that holds ': ')" in str(
        info.value
    )


def test_no_protocol_run_is_one_line(tmp_path, monkeypatch, capsys):
    sweep_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        scoreboard.main(["--protocols", "sweeps/paper"])
    err = capsys.readouterr().err
    assert info.value.code == 1 and "error: no protocol run to put on the scoreboard (1 protocols" in err
    assert len(err.strip().splitlines()) == 1


def test_the_shipped_protocols_load_with_their_figures():
    root = SWEEPS / "paper"
    files = sorted(p for p in root.glob("*.yaml") if not p.name.endswith(".protocol.yaml") and p.name != "figures.yaml")
    assert files
    for sweep_file in files:
        proto = protocol.load(sweep_file, yaml.safe_load(sweep_file.read_text())["parameters"])
        assert proto is not None and proto.figures["source"], sweep_file


def test_the_sweep_report_of_a_protocol_sweep_adds_its_table(tmp_path, capsys):
    from attnmem.tools import sweep  # noqa: PLC0415 - the runner's report, on a directory it did not make here

    out = per_task_run(tmp_path)
    sweep.main(["report", str(out)])
    printed = capsys.readouterr().out
    assert "# Sweep `tiny`" in printed  # the generic report first, then the paper's rule
    assert "| 1 | 5.0 | 2.2 | seed=1 | 2.3 ± 2.5 | 3 | 0.1 | +4.9 |" in printed


def test_a_bad_protocol_stops_the_sweep_before_any_job_in_one_line(tmp_path, monkeypatch, capsys):
    from attnmem.tools import sweep  # noqa: PLC0415

    sweep_file = sweep_files(tmp_path, select_by="x")
    with pytest.raises(SystemExit) as info:
        sweep.main([str(sweep_file), "--dry-run"])
    err = capsys.readouterr().err.strip()
    assert info.value.code == 1 and err.count("\n") == 0
    assert err.startswith(f"error: {protocol.sidecar(sweep_file)}: unknown key 'select_by'")


def test_a_replicas_job_counts_as_its_seeds_and_shows_the_chosen_one(tmp_path):
    sweep_file = sweep_files(tmp_path, rows={"metric": "val/task{row}/error", "values": [1, 2]})
    per_seed = [
        {"train/error": 0.2, "train/loss": 1.0, "val/error": 0.1, "val/task1/error": 0.0, "val/task2/error": 0.2},
        {"train/error": 0.1, "train/loss": 2.0, "val/error": 0.3, "val/task1/error": 0.1, "val/task2/error": 0.5},
    ]
    metrics = {"replicas": 2, "replica_selected": 1, "epoch": 3} | per_seed[1]
    metrics |= {f"replicas/{r}/{k}": v for r, m in enumerate(per_seed) for k, v in m.items()}
    jobs = [["data.tasks=[1,2]", "seed=0", "replicas=2", "replica_select=train/error:min"]]
    table = scoreboard.build(sweep_dir(tmp_path, sweep_file, jobs, {0: metrics}))
    # what two jobs of one seed each give (the test above)
    assert [(r.label, r.ours, r.chosen, r.seeds, r.planned) for r in table.rows] == [
        ("1", 0.1, "seed=1", 2, 2),
        ("2", 0.5, "seed=1", 2, 2),
    ]
    assert table.rows[1].mean == pytest.approx(0.35) and table.finished == 2


def test_a_command_line_names_no_path_of_this_machine():
    assert scoreboard.portable("data.source.data_dir=/srv/x/data/babi/en-10k") == "data.source.data_dir=<data>/babi/en-10k"
    assert scoreboard.portable("data.source.embeddings=/srv/vec.txt") == "data.source.embeddings=<vec.txt>"
    assert scoreboard.portable("data.source.data_dir=data/babi/en") == "data.source.data_dir=data/babi/en"
    assert scoreboard.portable("seed=1") == "seed=1"


@pytest.mark.parametrize(("name", "lengths"), [("copy_models", (30, 40, 60, 100)),
                                               ("associative_recall_models", (8, 10, 12))])
def test_the_copy_and_recall_boards_have_a_row_per_model_and_a_column_per_longer_length(tmp_path, name, lengths):
    sweep_file = SWEEPS / "paper" / f"{name}.yaml"
    models = yaml.safe_load(sweep_file.read_text())["parameters"]["experiment"]["values"]
    for kind in ("ntm", "lstm", "dnc", "attention", "selective_ssm"):  # the classic memories beside the mixers
        assert any(kind in m.split("_") or m.endswith(kind) for m in models), kind
    metrics = {i: {"test/bit_errors": 0.5 * i, "test/exact_match": 0.25, "global_step": 1000, "train_seconds": 300.0}
               | {f"test/len{n}/bit_errors": float(n) for n in lengths} for i in range(len(models))}
    table = scoreboard.build(sweep_dir(tmp_path, sweep_file, [[f"experiment={m}", "seed=0"] for m in models], metrics))
    assert [(r.label, r.ours) for r in table.rows] == [(m, 0.5 * i) for i, m in enumerate(models)]
    text = scoreboard.markdown(table)
    assert f"| {models[1]} | 0.50 |" in text and "| 0.25 | 1,000 | 300 |" in text
    assert "| " + " | ".join(f"{n}" for n in lengths) + " | 0.25 |" in text  # bit errors at each longer length
    assert table.finished == table.jobs == len(models)
