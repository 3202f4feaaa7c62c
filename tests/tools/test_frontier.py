"""The capacity frontier on small fake sweep directories: the points it draws by hand (seeds folded into replicas, a
classic memory without a width), the PNG, the W&B panels (a stand-in wandb module), and its one-line errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from attnmem.tools import frontier
from attnmem.tools.frontier import Point


def sweep_dir(root: Path, name: str, parameters: dict, jobs: list[list[str]], metrics: dict[int, dict]) -> Path:
    """A sweep directory as the runner leaves it: sweep.yaml and each finished job's metrics.json."""
    out = root / name
    out.mkdir(parents=True)
    spec = {"name": name, "method": "grid", "parameters": parameters}
    (out / "sweep.yaml").write_text(yaml.safe_dump({"file": f"{name}.yaml", "spec": spec, "jobs": jobs}))
    for i, m in metrics.items():
        (out / str(i)).mkdir()
        (out / str(i) / "metrics.json").write_text(json.dumps(m))
    return out


def mixers(root: Path, seq_len: int = 64) -> Path:
    """Two mixers x two widths, seeds 0-2 folded into one replicas=3 job each."""
    parameters = {"experiment": {"values": ["mqar_x", "mqar_y"]}, "model.d_model": {"values": [32, 64]},
                  "data.source.seq_len": {"value": seq_len}, "seed": {"values": [0, 1, 2]}}
    cells = {("mqar_x", 32): (100, [0.5, 0.6, 0.7]), ("mqar_x", 64): (200, [1.0, 1.0, 0.98]),
             ("mqar_y", 32): (1000, [0.2, 0.2, 0.2]), ("mqar_y", 64): (2000, [0.4, 0.5, 0.6])}
    jobs, metrics = [], {}
    for i, ((experiment, width), (state, accs)) in enumerate(cells.items()):
        jobs.append([f"experiment={experiment}", f"model.d_model={width}", f"data.source.seq_len={seq_len}",
                     "seed=0", "replicas=3"])
        metrics[i] = {"replicas": 3, "test/acc": accs[0], "model/state_size": state, "global_step": 10}
        metrics[i] |= {f"replicas/{r}/{k}": v for r, a in enumerate(accs)
                       for k, v in {"test/acc": a, "model/state_size": state}.items()}
    return sweep_dir(root, f"mixers_{seq_len}", parameters, jobs, metrics)


def classic(root: Path) -> Path:
    """A classic memory: no width parameter, and its composed config has no model.d_model."""
    parameters = {"experiment": {"values": ["mqar_lstm"]}, "seed": {"values": [0, 1]}}
    jobs = [["experiment=mqar_lstm", f"seed={s}"] for s in (0, 1)]
    out = sweep_dir(root, "classic", parameters, jobs, {i: {"test/acc": a, "model/state_size": 128}
                                                         for i, a in enumerate([0.3, 0.5])})
    (out / "0" / ".hydra").mkdir()
    (out / "0" / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"model": {"hidden_size": 64}}))
    return out


def test_the_points_are_the_means_over_seeds_per_width_and_state_size(tmp_path):
    lines = frontier.points([mixers(tmp_path), classic(tmp_path)])
    assert lines == {
        "mqar_lstm": [Point(None, 128, pytest.approx(0.4), pytest.approx(0.1414214), 2, 0)],
        "mqar_x": [Point(32, 100, pytest.approx(0.6), pytest.approx(0.1), 3, 0),
                   Point(64, 200, pytest.approx(0.9933333), pytest.approx(0.0115470), 3, 2)],
        "mqar_y": [Point(32, 1000, pytest.approx(0.2), 0.0, 3, 0),
                   Point(64, 2000, pytest.approx(0.5), pytest.approx(0.1), 3, 0)],
    }


def test_a_parameter_that_differs_between_sweeps_splits_the_lines(tmp_path):
    lines = frontier.points([mixers(tmp_path, 64), mixers(tmp_path, 128)], solved=0.5)
    assert sorted(lines) == [f"mqar_{m}, data.source.seq_len={t}" for m in "xy" for t in (128, 64)]
    assert [p.solved for p in lines["mqar_y, data.source.seq_len=64"]] == [0, 2]


def test_the_state_axis_is_labelled_in_plain_numbers_at_1_2_5(tmp_path):
    fig = frontier.figure(frontier.points([mixers(tmp_path), classic(tmp_path)]), "test/acc")
    axis = fig.axes[1].xaxis
    fig.canvas.draw()
    labels = {t.get_text() for t in axis.get_ticklabels() if t.get_text()}
    assert {"200", "500", "1,000", "2,000"} <= labels
    assert not {t.get_text() for t in axis.get_minorticklabels()} - {""}


def test_the_command_writes_the_png_and_logs_the_wandb_panels(tmp_path, monkeypatch, capsys):
    logged: dict = {}
    run = SimpleNamespace(log=logged.update, finish=lambda: logged.setdefault("finished", True))
    fake = SimpleNamespace(init=lambda **kw: logged.setdefault("init", kw) and run, Image=lambda path: ("image", path),
                           Table=lambda columns, data: (columns, data))
    monkeypatch.setitem(sys.modules, "wandb", fake)
    out = tmp_path / "figures" / "frontier.png"
    frontier.main([str(mixers(tmp_path)), str(classic(tmp_path)), "--out", str(out), "--wandb"])
    assert out.read_bytes()[:4] == b"\x89PNG" and not list(out.parent.glob(".*.tmp"))
    assert logged["init"] == {"project": "attnmem", "job_type": "frontier", "name": "frontier"}
    columns, data = logged["frontier/points"]
    assert columns == ["line", "width", "state_size", "mean", "std", "seeds", "solved"]
    assert [row[:3] for row in data] == [["mqar_lstm", None, 128], ["mqar_x", 32, 100], ["mqar_x", 64, 200],
                                         ["mqar_y", 32, 1000], ["mqar_y", 64, 2000]]
    assert logged["frontier"] == ("image", str(out)) and logged["finished"]
    assert "mqar_x: 32/100: 60.0%, 64/200: 99.3%" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("none", "no finished run in"),
        ("stateless", "metrics.json: no 'model/state_size': the frontier needs runs whose model declares its state"),
        ("metric", "--metric test/nope: no finished run reports it (they report: model/state_size, test/acc)"),
    ],
)
def test_what_cannot_be_drawn_is_one_line(tmp_path, capsys, case, expected):
    parameters = {"experiment": {"values": ["mqar_x"]}, "seed": {"values": [0]}}
    metrics = {"none": {}, "stateless": {0: {"test/acc": 0.5}}, "metric": {0: {"test/acc": 0.5,
                                                                              "model/state_size": 8}}}[case]
    source = sweep_dir(tmp_path, "s", parameters, [["experiment=mqar_x", "seed=0"]], metrics)
    with pytest.raises(SystemExit) as info:
        frontier.main([str(source), "--out", str(tmp_path / "f.png"), "--metric", "test/nope"])
    err = capsys.readouterr().err
    assert info.value.code == 1 and expected in err and err.count("\n") == 1
    assert not (tmp_path / "f.png").exists()


def csv_log(job_dir: Path, text: str) -> None:
    """A job's Lightning CSV log: `text`'s rows, a metric's cell empty where it was not logged at that step."""
    (job_dir / "csv").mkdir(parents=True)
    (job_dir / "csv" / "metrics.csv").write_text(text)


def logged(root: Path) -> Path:
    """A sweep of three jobs: one finished, one replicas=2 run, one running (no metrics.json yet)."""
    parameters = {"experiment": {"values": ["mqar_dnc", "mqar_x"]}, "model.d_model": {"value": 8},
                  "seed": {"values": [0, 1, 2]}}
    jobs = [["experiment=mqar_dnc", "model.d_model=8", "seed=0"], ["experiment=mqar_x", "model.d_model=8",
            "seed=0", "replicas=2"], ["experiment=mqar_dnc", "model.d_model=8", "seed=2"]]
    out = sweep_dir(root, "logged", parameters, jobs, {0: {"val/acc": 0.9}, 1: {"replicas": 2, "val/acc": 0.5}})
    csv_log(out / "0", "epoch,step,train/loss,val/acc\n,0,2.5,\n0,9,,0.25\n1,19,1.5,\n1,19,,0.5\n")
    csv_log(out / "1", "step,val/acc,replicas/0/val/acc,replicas/1/val/acc,replicas/mean/val/acc\n"
                       "9,0.3,0.25,0.375,0.3\n19,0.9,0.875,0.5,0.6\n")
    csv_log(out / "2", "step,val/acc\n9,0.125\n")
    return out


def test_the_curves_are_each_runs_logged_validation_metric_by_step(tmp_path):
    Curve = frontier.Curve
    assert frontier.curves([logged(tmp_path)]) == {
        "mqar_dnc seed=0": Curve((9, 19), (0.25, 0.5), running=False),
        "mqar_x seed=0": Curve((9, 19), (0.25, 0.875), running=False),
        "mqar_x seed=1": Curve((9, 19), (0.375, 0.5), running=False),
        "mqar_dnc seed=2": Curve((9,), (0.125,), running=True),
    }


def test_curves_alone_write_only_their_png(tmp_path, capsys):
    out = tmp_path / "figures" / "curves.png"
    frontier.main([str(logged(tmp_path)), "--curves", str(out)])
    assert out.read_bytes()[:4] == b"\x89PNG" and not list(out.parent.glob(".*.tmp"))
    assert sorted(p.name for p in out.parent.iterdir()) == ["curves.png"]
    printed = capsys.readouterr().out
    assert "mqar_dnc seed=2: val/acc 0.125 at step 9 (running)" in printed and "wrote " in printed


def test_curves_beside_the_frontier(tmp_path):
    out, curves = tmp_path / "frontier.png", tmp_path / "curves.png"
    source = classic(tmp_path)
    for job, acc in (("0", 0.3), ("1", 0.5)):
        csv_log(source / job, f"step,val/acc,test/acc\n5,0.1,\n10,{acc},\n10,,{acc}\n")
    frontier.main([str(source), "--out", str(out), "--curves", str(curves)])
    assert out.read_bytes()[:4] == curves.read_bytes()[:4] == b"\x89PNG"
    assert frontier.curves([source], frontier.val_metric("test/acc"))["seed=1"].values == (0.1, 0.5)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("no csv", "0: no csv/metrics.csv: --curves reads each run's CSV log"),
        ("no column", "metrics.csv: no column 'val/nope' (--curve-metric: a metric the runs log each validation"),
    ],
)
def test_curves_that_cannot_be_drawn_are_one_line(tmp_path, capsys, case, expected):
    source = classic(tmp_path)
    if case == "no column":
        for job in ("0", "1"):
            csv_log(source / job, "step,val/acc\n5,0.1\n")
    with pytest.raises(SystemExit) as info:
        frontier.main([str(source), "--curves", str(tmp_path / "c.png"), "--curve-metric", "val/nope"])
    err = capsys.readouterr().err
    assert info.value.code == 1 and expected in err and err.count("\n") == 1
    assert not (tmp_path / "c.png").exists()
