"""The recall protocols' keys on small fake sweep directories, every figure by hand: rows over several parameters,
the best of `over` by the mean over seeds (seeds folded into replicas), the seeds that solve a row, more columns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from attnmem.core.errors import UserError
from attnmem.tools import protocol, scoreboard
from attnmem.tools.scoreboard_rows import build_rows

PROTOCOL = {
    "title": "Tiny recall",
    "paper": "Someone et al.",
    "figures": "tiny_recall",
    "rows": {"parameters": ["experiment", "model.d_model"]},
    "metric": "test/acc",
    "select": [],
    "mean": False,
    "solved": 0.99,
    "columns": {"state": "model/state_size", "steps": "global_step"},
}


def sweep(root: Path, parameters: dict, jobs: list[list[str]], metrics: dict[int, dict], **changes) -> Path:
    """A sweep file with its protocol and figures, and the directory its jobs left: sweep.yaml, metrics.json."""
    folder = root / "sweeps" / "paper"
    folder.mkdir(parents=True)
    spec = {"program": "train.py", "name": "tiny_recall", "method": "grid", "parameters": parameters,
            "metric": {"name": "test/acc", "goal": changes.pop("goal", "maximize")}}
    (folder / "tiny_recall.yaml").write_text(yaml.safe_dump(spec))
    (folder / "tiny_recall.protocol.yaml").write_text(yaml.safe_dump(PROTOCOL | changes))
    figures = {"tiny_recall": {"source": "Figure 2", "metric": "accuracy (%)", "rows": {"a/64": 100.0}}}
    (folder / "figures.yaml").write_text(yaml.safe_dump(figures))
    out = root / "outputs" / "sweeps" / "tiny_recall" / "2026-12-07_10-00-00"
    out.mkdir(parents=True)
    saved = {"file": str(folder / "tiny_recall.yaml"), "seed": 0, "overrides": [], "spec": spec, "jobs": jobs}
    (out / "sweep.yaml").write_text(yaml.safe_dump(saved))
    for i, m in metrics.items():
        (out / str(i)).mkdir()
        (out / str(i) / "metrics.json").write_text(json.dumps(m))
    return out


def width_run(tmp_path: Path) -> Path:
    parameters = {"experiment": {"values": ["a", "b"]}, "model.d_model": {"values": [32, 64]},
                  "seed": {"values": [0, 1]}}
    cells = [(e, w) for e in ("a", "b") for w in (32, 64)]
    jobs = [[f"experiment={e}", f"model.d_model={w}", f"seed={s}"] for e, w in cells for s in (0, 1)]
    accs = [0.5, 0.7, 1.0, 0.9900000095, 0.2, 0.4, 1.0, 0.9]  # 0.99 as float32 logs it: solved
    states = [100, 100, 200, 200, 3000, 3000, 6000, 6000]
    steps = [100, 300, 50, 70, 500, 500, 40, None]  # the last job reports no steps
    metrics = {i: {"test/acc": a, "model/state_size": s} | ({"global_step": g} if g else {})
               for i, (a, s, g) in enumerate(zip(accs, states, steps))}
    return sweep(tmp_path, parameters, jobs, metrics)


def test_rows_over_two_parameters_with_the_solved_seeds_and_more_columns(tmp_path):
    text = scoreboard.markdown(scoreboard.build(width_run(tmp_path)))
    rows = [line for line in text.splitlines() if line.startswith(("| a/", "| b/"))]
    assert rows == [
        "| a/32 | 60.0 |  | mean of seeds | 60.0 ± 14.1 | 2 |  |  | 0/2 | 100 | 200 |",
        "| a/64 | 99.5 |  | mean of seeds | 99.5 ± 0.7 | 2 | 100.0 | -0.5 | 2/2 | 200 | 60 |",
        "| b/32 | 30.0 |  | mean of seeds | 30.0 ± 14.1 | 2 |  |  | 0/2 | 3,000 | 500 |",
        "| b/64 | 95.0 |  | mean of seeds | 95.0 ± 7.1 | 2 |  |  | 1/2 | 6,000 | 40 |",
    ]
    assert "| paper | ours − paper | solved (≥ 99%) | state | steps |" in text
    assert "solved: the seeds whose `test/acc` is at least 0.99" in text and "Mean over" not in text


def over_run(tmp_path: Path, goal: str = "maximize") -> Path:
    # seeds 0-2 folded by --replicas 2: seed=0 replicas=2 and seed=2; job 3 never ran
    parameters = {"experiment": {"values": ["a", "b"]}, "optimizer.lr": {"values": [0.001, 0.01]},
                  "seed": {"values": [0, 1, 2]}}
    jobs = [[f"experiment={e}", f"optimizer.lr={lr}", *seeds] for e in ("a", "b") for lr in ("0.001", "0.01")
            for seeds in (["seed=0", "replicas=2"], ["seed=2"])]
    folded = [(0.4, 0.6), (0.5,), (0.9, 1.0), None, (0.8, 0.8), (0.8,), (0.3, 0.1), (0.2,)]
    metrics = {}
    for i, accs in enumerate(folded):
        if accs and len(accs) == 2:
            metrics[i] = {"replicas": 2, "test/acc": accs[0]} | {f"replicas/{r}/test/acc": a for r, a in enumerate(accs)}
        elif accs:
            metrics[i] = {"test/acc": accs[0]}
    return sweep(tmp_path, parameters, jobs, metrics, rows={"parameter": "experiment"}, over="optimizer.lr",
                 columns={}, goal=goal)


def test_the_best_learning_rate_by_the_mean_over_seeds_folded_into_replicas(tmp_path):
    table = scoreboard.build(over_run(tmp_path))
    a, b = table.rows
    assert (a.ours, a.std, a.seeds, a.planned, a.solved) == (pytest.approx(0.95), pytest.approx(0.0707107), 2, 3,
                                                              (1, 2))
    assert (b.ours, b.std, b.seeds, b.planned, b.solved) == (pytest.approx(0.8), 0.0, 3, 3, (0, 3))
    text = scoreboard.markdown(table)
    assert "| a | 95.0 |  | mean of seeds at optimizer.lr=0.01 | 95.0 ± 7.1 | 2 of 3 |  |  | 1/2 | " \
           "0.001: 50.0 · 0.01: 95.0 |" in text
    assert "| b | 80.0 |  | mean of seeds at optimizer.lr=0.001 | 80.0 ± 0.0 | 3 |  |  | 0/3 | " \
           "0.001: 80.0 · 0.01: 20.0 |" in text
    assert "at the `optimizer.lr` whose mean over seeds is highest (the papers' rule: best over `optimizer.lr`)" in text


def test_a_minimised_metric_takes_the_lowest_mean(tmp_path):
    table = scoreboard.build(over_run(tmp_path, goal="minimize"))
    assert [(r.label, r.chosen, r.ours) for r in table.rows] == [
        ("a", "mean of seeds at optimizer.lr=0.001", pytest.approx(0.5)),
        ("b", "mean of seeds at optimizer.lr=0.01", pytest.approx(0.2)),
    ]
    assert build_rows(table.protocol, yaml.safe_load((table.sweep_dir / "sweep.yaml").read_text()), [],
                      table.sweep_dir)[0].ours is None  # no finished job: an empty row


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"rows": {"parameters": ["experiment", "model.hops"]}}, "rows.parameters: 'model.hops' is not a parameter"),
        ({"rows": {"parameters": "experiment"}}, "rows.parameters: expected a list of sweep parameters"),
        ({"over": "optimizer.lr"}, "over: 'optimizer.lr' is not a parameter of"),
        ({"over": "model.d_model"}, "over: 'model.d_model' is also a row parameter"),
        ({"solved": "yes"}, "solved: expected a number, the metric's threshold a solving seed reaches (e.g. 0.99)"),
        ({"columns": ["global_step"]}, "columns: expected a mapping of header to metric key"),
        ({"rows": {"parameters": ["experiment"]}, "capacity": 0.9}, "capacity: needs rows.parameter"),
    ],
)
def test_a_bad_recall_protocol_key_is_one_line_naming_the_file_and_the_fix(tmp_path, changes, expected):
    parameters = {"experiment": {"values": ["a"]}, "model.d_model": {"values": [32]}}
    out = sweep(tmp_path, parameters, [], {}, **changes)
    sweep_file = Path(yaml.safe_load((out / "sweep.yaml").read_text())["file"])
    with pytest.raises(UserError, match="tiny_recall.protocol.yaml: ") as info:
        protocol.load(sweep_file, parameters)
    assert expected in str(info.value) and "\n" not in str(info.value)
