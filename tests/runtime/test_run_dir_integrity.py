"""A run directory is read-only once finished: a refused command leaves every byte of it as it was.

Also the refusals that come with it (docs/errors.md): a run directory that is a file, an evaluation of nothing, a
fast dev run asked to resume, `trainer.max_epochs=0`, and a `monitor` the family does not log; and a refused
command leaves no run directory it made and wrote nothing in. One case runs `train.py` in a
subprocess (Hydra itself writes into a run directory before the task runs); the rest run in-process.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import FAST, ROOT, one_line, train_once
from hydra import compose
from hydra._internal.callbacks import Callbacks
from omegaconf import DictConfig

from attnmem.core.errors import UserError
from attnmem.runtime import run, run_dir_guard

TINY = [*FAST, "data.source.num_train=60", "data.source.num_val=20", "data.source.num_test=20", "trainer.max_epochs=1"]
READ_ONLY = (
    "a finished run is read-only",
    "python eval.py run_dir=",
    "new hydra.run.dir",
    "resume=auto continues only",
)


def _digest(run_dir: Path, skip: str | None = None) -> dict[str, str]:
    """sha256 of every file under `run_dir` (but those under a folder named `skip`), by relative path."""
    return {
        str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run_dir.rglob("*"))
        if p.is_file() and (skip is None or skip not in p.relative_to(run_dir).parts)
    }


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One finished run (trained once for the module); tests work on copies of it."""
    yield train_once(tmp_path_factory, "finished", *TINY)


@pytest.fixture
def done(finished_run: Path, tmp_path: Path) -> Path:
    """A copy of the finished run, in this test's tmp_path."""
    return Path(shutil.copytree(finished_run, tmp_path / "done"))


def _hydra_cfg(*overrides: str) -> DictConfig:
    """train.yaml composed with its `hydra` node, as Hydra's callbacks receive it (Hydra initialised by compose_cfg)."""
    return compose("train", overrides=list(overrides), return_hydra_config=True)


def _guard_refuses(hook: str, cfg: DictConfig) -> str:
    """Call `hook` of the callbacks in `hydra.callbacks`, as Hydra does; it must exit with one `error:` line."""
    with pytest.raises(SystemExit) as stop:
        getattr(Callbacks(cfg), hook)(config=cfg, config_name="train")
    line = str(stop.value.code)
    assert line.startswith("error: "), line
    one_line(line)
    return line


@pytest.mark.slow  # a subprocess: ~9 s
def test_cli_a_refused_command_leaves_a_finished_run_byte_identical(done: Path):
    before = _digest(done)
    refused = subprocess.run(
        [sys.executable, "train.py", f"hydra.run.dir={done}", "model.hops=1", "trainer.enable_progress_bar=false"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 1, refused.stderr[-2000:]
    assert _digest(done) == before  # .hydra/config.yaml too: Hydra saved nothing
    assert "Traceback" not in refused.stderr, refused.stderr[-2000:]
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, refused.stderr[-2000:]
    one_line(errors[0], f"hydra.run.dir={done} holds a finished run", *READ_ONLY)


@pytest.mark.parametrize("resume", ["resume=auto", "ckpt_path=last"])
def test_resuming_a_finished_run_is_refused_before_anything_is_written(compose_cfg, done: Path, resume: str):
    before = _digest(done)
    line = _guard_refuses("on_run_start", _hydra_cfg(*TINY, resume, f"hydra.run.dir={done}"))
    one_line(line, f"hydra.run.dir={done} holds a finished run", f"python eval.py run_dir={done};", *READ_ONLY)
    assert _digest(done) == before
    # a config composed without Hydra's command line is refused by run.train as well, metrics and history kept
    with pytest.raises(UserError) as err:
        run.train(compose_cfg(*TINY, resume, run_dir=done))
    one_line(str(err.value), f"hydra.run.dir={done} holds a finished run", *READ_ONLY)
    assert _digest(done, skip=".hydra") == {k: v for k, v in before.items() if not k.startswith(".hydra")}


def test_a_sweep_into_a_directory_holding_a_finished_run_is_refused(compose_cfg, done: Path):
    before = _digest(done)
    line = _guard_refuses("on_multirun_start", _hydra_cfg(*TINY, f"hydra.sweep.dir={done.parent}"))
    one_line(line, f"hydra.sweep.dir={done.parent} holds a finished run ({done})", "new hydra.sweep.dir")
    assert _digest(done) == before


@pytest.fixture
def interrupted(done: Path) -> Path:
    """The copy of the finished run made unfinished, as a Ctrl-C during its training leaves one (no metrics.json)."""
    (done / "metrics.json").unlink()
    return done


@pytest.mark.slow  # a subprocess: ~9 s
def test_cli_an_evaluation_into_an_unfinished_run_is_refused_and_leaves_it_byte_identical(
    finished_run: Path, interrupted: Path
):
    before = _digest(interrupted)
    refused = subprocess.run(
        [sys.executable, "eval.py", f"run_dir={finished_run}", f"hydra.run.dir={interrupted}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr[-2000:]
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, refused.stderr[-2000:]
    one_line(errors[0], f"hydra.run.dir={interrupted} holds an unfinished run (manifest.json)",
             "an evaluation writes into a directory of its own", "leave hydra.run.dir out")
    assert _digest(interrupted) == before  # its .hydra/ too: Hydra saved nothing


def test_a_training_into_an_unfinished_run_is_refused_unless_it_resumes_it(compose_cfg, interrupted: Path):
    line = _guard_refuses("on_run_start", _hydra_cfg(*TINY, f"hydra.run.dir={interrupted}"))
    one_line(line, f"hydra.run.dir={interrupted} holds an unfinished run (checkpoints/last.ckpt)", "add resume=auto")
    cfg = _hydra_cfg(*TINY, f"hydra.run.dir={interrupted}", "resume=auto")
    Callbacks(cfg).on_run_start(config=cfg, config_name="train")  # its own resume goes on
    Callbacks(cfg).on_run_end(config=cfg, config_name="train")


@pytest.mark.parametrize("marker", ["multirun.yaml", "sweep.yaml"])
@pytest.mark.parametrize("config_name", ["train", "eval"])
def test_a_run_into_a_sweeps_directory_is_refused(compose_cfg, finished_run: Path, tmp_path, marker, config_name):
    sweep = tmp_path / "sweep"
    (sweep / "0").mkdir(parents=True)
    (sweep / marker).write_text("name: grid\n")
    overrides = [f"run_dir={finished_run}"] if config_name == "eval" else TINY
    cfg = compose(config_name, [*overrides, f"hydra.run.dir={sweep}"], True)
    with pytest.raises(SystemExit) as stop:
        Callbacks(cfg).on_run_start(config=cfg, config_name=config_name)
    one_line(str(stop.value.code), f"error: hydra.run.dir={sweep} is a sweep's directory ({marker}), not a run's",
             f"hydra.run.dir={sweep}/<job> resume=auto continues one")
    assert sorted(p.name for p in sweep.iterdir()) == ["0", marker]


@pytest.mark.parametrize("where", ["file", "under a file"])
def test_a_run_directory_that_is_a_file_is_one_line(compose_cfg, tmp_path: Path, where: str):
    (tmp_path / "notes.txt").write_text("mine")
    run_dir = tmp_path / "notes.txt" if where == "file" else tmp_path / "notes.txt" / "run"
    line = _guard_refuses("on_run_start", _hydra_cfg(*TINY, f"hydra.run.dir={run_dir}"))
    one_line(line, f"hydra.run.dir={run_dir}", "not a directory", "pass hydra.run.dir=<a new directory>")
    line = _guard_refuses("on_multirun_start", _hydra_cfg(*TINY, f"hydra.sweep.dir={run_dir}"))
    one_line(line, f"hydra.sweep.dir={run_dir}", "not a directory")
    assert (tmp_path / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["run_dir=nope"], "run_dir=nope: no such run directory"),
        (["ckpt_path=nope.ckpt"], "ckpt_path=nope.ckpt: no such checkpoint file"),
        ([], "ckpt_path needs a value (??? in the config): pass ckpt_path=... or run_dir=<run>"),
    ],
)
def test_eval_of_nothing_is_refused_before_its_directory_is_made(compose_cfg, tmp_path: Path, overrides, message):
    eval_dir = tmp_path / "eval"
    line = _guard_refuses("on_run_start", compose("eval", [*overrides, f"hydra.run.dir={eval_dir}"], True))
    assert line == f"error: {message}"
    assert not eval_dir.exists()


@pytest.mark.parametrize("made_here", [True, False])
@pytest.mark.parametrize("written", [[], ["csv"]])
def test_a_refused_run_leaves_no_directory_it_made_and_wrote_nothing_in(compose_cfg, tmp_path, made_here, written):
    run_dir = tmp_path / "run"
    if not made_here:
        run_dir.mkdir()
    cfg = _hydra_cfg(*TINY, f"hydra.run.dir={run_dir}")
    Callbacks(cfg).on_run_start(config=cfg, config_name="train")  # records whether it made run_dir; takes the lock
    for name in [".hydra", *written]:  # Hydra's config folder, and what a run that got going wrote
        (run_dir / name).mkdir()
    (run_dir / "train.log").write_text("")
    assert run_dir_guard.discard_refused(run_dir) == (made_here and not written)
    assert run_dir.exists() == (not made_here or bool(written))


@pytest.mark.parametrize("resume", ["resume=auto", "ckpt_path=last"])
def test_a_fast_dev_run_cannot_resume(compose_cfg, done: Path, resume: str):
    (done / "metrics.json").unlink()  # an unfinished run, its last.ckpt in place
    before = _digest(done, skip=".hydra")
    line = _guard_refuses("on_run_start", _hydra_cfg(*TINY, resume, "debug=fdr", f"hydra.run.dir={done}"))
    one_line(line, f"{resume} with debug=fdr", "saves no checkpoint", "drop debug=fdr")
    with pytest.raises(UserError) as err:
        run.train(compose_cfg(*TINY, resume, "debug=fdr", run_dir=done))
    one_line(str(err.value), f"{resume} with debug=fdr", "saves no checkpoint")
    assert _digest(done, skip=".hydra") == before  # no metrics.json from one batch


@pytest.mark.parametrize("epochs", [0, -2])
def test_max_epochs_that_trains_nothing_is_one_line(compose_cfg, tmp_path: Path, epochs: int):
    with pytest.raises(UserError) as err:
        run.train(compose_cfg(*TINY, f"trainer.max_epochs={epochs}"))
    one_line(str(err.value), f"trainer.max_epochs={epochs} trains nothing", "trainer.max_epochs=1 or more")
    assert not (tmp_path / "run" / "metrics.json").exists()


@pytest.mark.parametrize(("monitor", "early_stopping"), [("val/foo", False), ("train/foo", False), ("train/foo", True)])
def test_a_monitor_the_family_does_not_log_names_the_metrics_it_logs(compose_cfg, tmp_path, monitor, early_stopping):
    overrides = [o for o in TINY if not (early_stopping and o == "~callbacks.early_stopping")]
    with pytest.raises(UserError) as err:
        run.train(compose_cfg(*overrides, f"monitor={monitor}"))
    logged = "val/acc, val/error, val/loss" if monitor.startswith("val/") else "train/acc, train/error, train/loss"
    one_line(str(err.value), f"monitor={monitor}: the qa family logs no such metric", logged, "monitor=<one of them>")
    assert not (tmp_path / "run" / "metrics.json").exists()
