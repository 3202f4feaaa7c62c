"""`eval.py` on the wrong folder (issue 52): a checkpoint of another run than `run_dir`, an unfinished run, a sweep's
directory, a debug=fdr run, a run without checkpoints, a directory train.py did not make, a file. Each refusal is one line
from Hydra's callbacks, before the evaluation's own directory is made, and the same line from `run.evaluate` for a
config composed without Hydra's command line; what can be evaluated says which checkpoint it is."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import FAST, one_line, train_once
from hydra import compose
from hydra._internal.callbacks import Callbacks

import attnmem
from attnmem.core.errors import UserError
from attnmem.runtime import run
from attnmem.runtime.load import best_checkpoint

TINY = [*FAST, "data.source.num_train=60", "data.source.num_val=20", "data.source.num_test=20", "trainer.max_epochs=1"]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One finished run (trained once for the module); tests change only copies of it."""
    yield train_once(tmp_path_factory, "finished", *TINY)


@pytest.fixture(scope="module")
def fdr_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A finished debug=fdr run: one batch, no checkpoint."""
    yield train_once(tmp_path_factory, "fdr", *TINY, "debug=fdr")


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The checkpoints `run.evaluate` validates and tests (the evaluation itself skipped: what is checked is which)."""
    used: list[str] = []
    monkeypatch.setattr(run, "_evaluate_best", lambda trainer, module, datamodule, ckpt_path: used.append(ckpt_path)
                        or {})
    return used


def _refused(compose_cfg, tmp_path: Path, *overrides: str) -> str:
    """The line Hydra's callbacks stop `eval.py <overrides>` with; no evaluation directory made; run.evaluate agrees."""
    eval_dir = tmp_path / "eval"
    cfg = compose("eval", [*overrides, f"hydra.run.dir={eval_dir}"], True)
    with pytest.raises(SystemExit) as stop:
        Callbacks(cfg).on_run_start(config=cfg, config_name="eval")
    line = str(stop.value.code)
    assert line.startswith("error: ") and not eval_dir.exists(), line
    one_line(line)
    with pytest.raises(UserError) as err:
        run.evaluate(compose_cfg(*overrides, config_name="eval", run_dir=tmp_path / "composed"))
    assert f"error: {err.value}" == line
    return line


@pytest.mark.parametrize("theirs", ["a checkpoint", "the run directory"])
def test_a_checkpoint_of_another_run_than_run_dir_is_refused_naming_both(compose_cfg, finished_run, tmp_path, theirs):
    other = Path(shutil.copytree(finished_run, tmp_path / "other"))
    ckpt = other / "checkpoints" / "last.ckpt" if theirs == "a checkpoint" else other
    line = _refused(compose_cfg, tmp_path, f"run_dir={finished_run}", f"ckpt_path={ckpt}")
    one_line(line, f"error: run_dir={finished_run} ckpt_path={ckpt}: the checkpoint is not one of that run's (it lies "
             f"in {other}), so the two options name different runs", "drop ckpt_path to evaluate the checkpoint "
             f"{finished_run} reported", "or drop run_dir to evaluate that checkpoint with its own run's config")


def test_a_checkpoint_of_run_dirs_own_run_is_the_one_evaluated(compose_cfg, finished_run, tmp_path, spy, capsys):
    last = finished_run / "checkpoints" / "last.ckpt"
    assert best_checkpoint(finished_run) != last
    for ckpt in (last, finished_run):  # the run directory itself: the checkpoint the run reported
        run.evaluate(compose_cfg(f"run_dir={finished_run}", f"ckpt_path={ckpt}", config_name="eval",
                                 run_dir=tmp_path / ckpt.name))
    assert spy == [str(last), str(best_checkpoint(finished_run))]
    printed = capsys.readouterr().out
    assert f"note: run_dir={finished_run}: evaluating the checkpoint ckpt_path names, {last}" in printed
    assert f"note: run_dir={finished_run}: evaluating the checkpoint the run reported, " in printed


def test_an_unfinished_run_is_evaluated_saying_that_it_is_unfinished(compose_cfg, finished_run, tmp_path, spy, capsys):
    interrupted = Path(shutil.copytree(finished_run, tmp_path / "interrupted"))
    (interrupted / "metrics.json").unlink()  # as a Ctrl-C during its training leaves it
    run.evaluate(compose_cfg(f"run_dir={interrupted}", config_name="eval", run_dir=tmp_path / "e"))
    best = best_checkpoint(interrupted)
    assert spy == [str(best)] and best.parent == interrupted / "checkpoints" and best.name != "last.ckpt"
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note:")]
    one_line(line, f"run_dir={interrupted} is an unfinished run (no metrics.json: interrupted, or still training), "
             f"so it reported no checkpoint: evaluating the best it has saved so far, {best}",
             f"python train.py hydra.run.dir={interrupted} resume=auto")
    assert "the checkpoint the run reported" not in line


def _sweep(tmp_path: Path, marker: str) -> Path:
    sweep = tmp_path / "sweep"
    for job in ("0", "1", "10"):
        (sweep / job).mkdir(parents=True)
    (sweep / marker).write_text("name: grid\n")
    return sweep


@pytest.mark.parametrize("marker", ["sweep.yaml", "multirun.yaml"])
@pytest.mark.parametrize("option", ["run_dir", "ckpt_path"])
def test_a_sweeps_directory_is_not_diagnosed_as_a_fast_dev_run(compose_cfg, tmp_path, marker, option):
    sweep = _sweep(tmp_path, marker)
    line = _refused(compose_cfg, tmp_path, f"{option}={sweep}")
    assert line == (f"error: {option}={sweep} is a sweep's directory ({marker}), not a run's: evaluate one of its "
                    f"runs, {option}={sweep}/<job> (its jobs: 0, 1, 10)")
    assert "fdr" not in line
    for load in (attnmem.load_model, best_checkpoint):  # in Python: the same diagnosis
        with pytest.raises(UserError, match=f"^{sweep} is a sweep's directory \\({marker}\\), not a run's"):
            load(sweep)


def test_a_debug_fdr_run_is_evaluated_saying_it_reported_no_checkpoint(compose_cfg, fdr_run, tmp_path, spy, capsys):
    assert json.loads((fdr_run / "metrics.json").read_text())["checkpoint"] is None  # its final weights
    run.evaluate(compose_cfg(f"run_dir={fdr_run}", config_name="eval", run_dir=tmp_path / "e"))
    last = fdr_run / "checkpoints" / "last.ckpt"
    assert spy == [str(last)]
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note:")]
    assert line == (f"note: run_dir={fdr_run} is a debug=fdr run (trainer.fast_dev_run: one batch) whose metrics.json "
                    f"names no checkpoint (its final weights): evaluating {last}")
    copy = Path(shutil.copytree(fdr_run, tmp_path / "copy"))
    (copy / "checkpoints" / "last.ckpt").unlink()  # a debug=fdr run without its last.ckpt
    line = _refused(compose_cfg, tmp_path, f"run_dir={copy}")
    one_line(line, f"error: run_dir={copy} is a debug=fdr run (trainer.fast_dev_run: one batch) without a checkpoint: "
             "nothing to evaluate", "train without debug=fdr")


@pytest.mark.parametrize("state", ["finished without checkpoints", "interrupted before its first checkpoint"])
def test_a_run_without_a_checkpoint_says_why_not_fdr(compose_cfg, finished_run, tmp_path, state):
    copy = Path(shutil.copytree(finished_run, tmp_path / "copy"))
    shutil.rmtree(copy / "checkpoints")
    if state.startswith("finished"):  # what a run with callbacks.model_checkpoint=null leaves
        metrics = json.loads((copy / "metrics.json").read_text())
        (copy / "metrics.json").write_text(json.dumps({**metrics, "checkpoint": None}))
        expected = (f"error: run_dir={copy} saved no checkpoint (its metrics.json names none and there is no "
                    "checkpoints/last.ckpt): nothing to evaluate; train with the checkpoint callback")
    else:
        (copy / "metrics.json").unlink()
        expected = (f"error: run_dir={copy} is an unfinished run with no checkpoint (no metrics.json, no "
                    "checkpoints/last.ckpt: it stopped before its first epoch ended): nothing to evaluate; train it "
                    "again, in a new hydra.run.dir")
    one_line(_refused(compose_cfg, tmp_path, f"run_dir={copy}"), expected)


def test_a_directory_train_py_did_not_make_or_a_file_is_no_run(compose_cfg, finished_run, tmp_path):
    (tmp_path / "notes").mkdir()
    line = _refused(compose_cfg, tmp_path, f"run_dir={tmp_path / 'notes'}")
    assert line == (f"error: run_dir={tmp_path / 'notes'} is not a run directory of train.py (no .hydra/config.yaml): "
                    "pass the run directory a training printed at its end")
    line = _refused(compose_cfg, tmp_path, f"ckpt_path={finished_run / 'checkpoints'}")
    one_line(line, f"ckpt_path={finished_run / 'checkpoints'} is not a run directory", f"({finished_run}?)")
    last = finished_run / "checkpoints" / "last.ckpt"
    assert _refused(compose_cfg, tmp_path, f"run_dir={last}") == (
        f"error: run_dir={last} is a file, not a run directory: for a checkpoint, ckpt_path={last}"
    )
