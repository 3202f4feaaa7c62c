"""Run directories that a command cannot damage: refused before Hydra writes anything into them.

Hydra creates the run directory and saves `.hydra/config.yaml` before the task runs (and before a job's
`on_job_start`), so a finished run handed to `train.py` had its config rewritten even when the run itself
was then refused. `RunDirGuard` (`hydra.callbacks` in conf/hydra/default.yaml) checks in `on_run_start`
and, for `-m`, in `on_multirun_start`, which come before any directory is made. `attnmem.runtime.run`
makes the same checks for configs composed without Hydra's command line. A single run also takes the run
directory's lock there (`run_lock`), so a second process is refused before Hydra touches the directory.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from attnmem.core.atomic import disk_fault
from attnmem.core.errors import UserError
from attnmem.runtime import legacy, manifest, resume, run_lock

__all__ = [
    "RunDirGuard", "check_eval_source", "check_evaluable", "check_run_dir", "discard_refused", "evaluating", "finished"
]

# the run directories this process's `on_run_start` found absent, so that this command made them
MADE_HERE: set[Path] = set()
# what Hydra (its config and job log, conf/hydra/default.yaml) and the run's lock write before a run starts
BEFORE_A_RUN = frozenset({".hydra", "train.log", run_lock.LOCK})
# what a started run writes (runtime/manifest, callbacks/checkpoint, callbacks/csv_logger), and what a sweep's root
# holds (Hydra's -m, tools/sweep): a command that is not that run's resume may write into neither
RUN_FILES = ("manifest.json", "checkpoints", "csv")
SWEEP_FILES = ("multirun.yaml", "sweep.yaml")


class RunDirGuard(Callback):
    """Hydra callback: stop with one `error:` line (exit 1) when the run or sweep directory cannot take this run."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Check `hydra.run.dir` before Hydra creates it or saves the config there."""
        HydraConfig.instance().set_config(config)  # as Hydra's run_job does next: `${hydra:...}` in the path resolves
        run_dir = Path(str(config.hydra.run.dir))
        if not run_dir.exists():
            MADE_HERE.add(run_dir.resolve())
        if "run_dir" in config:  # eval.py: what it evaluates must exist, or no directory is made for it
            _refuse_on(lambda: check_eval_source(config))
        _refuse_on(lambda: check_run_dir(run_dir, config))
        _refuse_on(lambda: run_lock.acquire(run_dir))

    def on_run_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Release the lock `on_run_start` took (the run releases it too, when it gets that far)."""
        run_lock.release(Path(str(config.hydra.run.dir)))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Check `hydra.sweep.dir`, and every run below it, before the sweep's first job."""
        HydraConfig.instance().set_config(config)
        _refuse_on(lambda: check_sweep_dir(Path(str(config.hydra.sweep.dir))))


def discard_refused(run_dir: Path) -> bool:
    """After a refused command, remove its run directory if this command made it and nothing but Hydra's files and
    the lock are in it (a mistyped option leaves no directory behind); whether it did."""
    if run_dir.resolve() not in MADE_HERE or not run_dir.is_dir() or run_lock.rank() != 0:
        return False
    if {p.name for p in run_dir.iterdir()} - BEFORE_A_RUN:
        return False
    run_lock.release(run_dir)
    shutil.rmtree(run_dir)
    return True


def finished(run_dir: Path) -> bool:
    """Whether `run_dir` holds a finished run (its metrics.json)."""
    return (run_dir / "metrics.json").is_file()


def check_run_dir(run_dir: Path, cfg: DictConfig) -> None:
    """Stop with one line when `run_dir` is a file, a sweep's root, a finished run, an unfinished one that this
    command does not resume (an evaluation never writes into one), or a resume that cannot be (train.yaml's keys)."""
    _check_not_a_file(run_dir, "hydra.run.dir")
    training = "resume" in cfg
    resuming = training and (cfg.get("resume") == "auto" or cfg.get("ckpt_path") == "last")
    _check_not_a_sweep(run_dir)
    if finished(run_dir):
        if resuming:
            legacy.check_manifest(run_dir)  # a run of attnmem 0.1 says so first
        raise UserError(
            f"hydra.run.dir={run_dir} holds a finished run (metrics.json), and a finished run is read-only: "
            f"to evaluate it, python eval.py run_dir={run_dir}; for a new run, pass a "
            "new hydra.run.dir; resume=auto continues only an unfinished run"
        )
    if resuming and OmegaConf.select(cfg, "trainer.fast_dev_run"):
        how = "resume=auto" if cfg.get("resume") == "auto" else "ckpt_path=last"
        raise UserError(
            f"{how} with debug=fdr (trainer.fast_dev_run): a fast dev run saves no checkpoint and resumes none; "
            f"drop debug=fdr to resume this run, or drop {how} for a one-batch check in a new hydra.run.dir"
        )
    started = run_lock.rank() == 0 and next((f for f in RUN_FILES if (run_dir / f).exists()), None)
    if not training and started:
        raise UserError(
            f"hydra.run.dir={run_dir} holds an unfinished run ({started}): an evaluation writes into a directory of "
            "its own, never into a run's; leave hydra.run.dir out, or pass a new one"
        )
    # any checkpoint: a run stopped by a full disk may have no last.ckpt (resume=auto takes the newest intact one)
    last = min((run_dir / "checkpoints").glob("*.ckpt"), key=lambda p: (p.name != "last.ckpt", p.name), default=None)
    requeued = int(os.environ.get("SLURM_RESTART_COUNT") or 0) > 0  # distributed.requeued_checkpoint resumes it
    if training and not resuming and not requeued and last is not None:
        raise UserError(
            f"hydra.run.dir={run_dir} holds an unfinished run ({last.relative_to(run_dir)}): to continue it, add "
            "resume=auto; for a new run, pass a new hydra.run.dir"
        )
    if resuming:
        resume.changes(run_dir, cfg)


def _check_not_a_sweep(run_dir: Path) -> None:
    """One line when `run_dir` is the root of a sweep, whose runs are its numbered sub-folders."""
    marker = next((f for f in SWEEP_FILES if (run_dir / f).is_file()), None)
    if marker is not None:
        raise UserError(
            f"hydra.run.dir={run_dir} is a sweep's directory ({marker}), not a run's: its runs are its numbered "
            f"sub-folders (hydra.run.dir={run_dir}/<job> resume=auto continues one); for a new run, pass a new "
            "hydra.run.dir"
        )


def check_eval_source(cfg: DictConfig) -> None:
    """Stop with one line when eval.yaml's `run_dir` or `ckpt_path` names nothing to evaluate (a directory there
    stands for a run, as `run_dir`: see `check_evaluable`), or `ckpt_path` is not a checkpoint of `run_dir`'s run."""
    run_dir, ckpt = cfg.get("run_dir"), cfg.get("ckpt_path")  # None for a ckpt_path left at ???
    if run_dir is not None:
        if Path(run_dir).is_file():
            raise UserError(f"run_dir={run_dir} is a file, not a run directory: for a checkpoint, ckpt_path={run_dir}")
        if not Path(run_dir).is_dir():
            raise UserError(f"run_dir={run_dir}: no such run directory")
        if ckpt is None or not _check_same_run(Path(run_dir), str(ckpt)):
            check_evaluable(Path(run_dir), f"run_dir={run_dir}")
    elif OmegaConf.is_missing(cfg, "ckpt_path"):
        raise UserError("ckpt_path needs a value (??? in the config): pass ckpt_path=... or run_dir=<run>")
    elif not Path(ckpt).exists():
        raise UserError(f"ckpt_path={ckpt}: no such checkpoint file")
    elif Path(ckpt).is_dir():
        check_evaluable(Path(ckpt), f"ckpt_path={ckpt}")


def _check_same_run(run_dir: Path, ckpt: str) -> bool:
    """Whether `ckpt_path` is a checkpoint file of the run in `run_dir` (False: the run directory itself); one line
    when it is nothing, or lies outside that run (it names another run than run_dir)."""
    path = Path(ckpt)
    if not path.exists():
        raise UserError(f"ckpt_path={ckpt}: no such checkpoint file")
    if path.resolve() == run_dir.resolve():
        return False
    if path.is_file() and path.resolve().is_relative_to(run_dir.resolve()):
        return True
    other = path if path.is_dir() else path.parent.parent if path.parent.name == "checkpoints" else path.parent
    raise UserError(
        f"run_dir={run_dir} ckpt_path={ckpt}: the checkpoint is not one of that run's (it lies in {other}), so the "
        f"two options name different runs: drop ckpt_path to evaluate the checkpoint {run_dir} reported, or drop "
        "run_dir to evaluate that checkpoint with its own run's config"
    )


def check_evaluable(run_dir: Path, option: str) -> None:
    """Stop with one line, `option` naming `run_dir`, when it holds no run with a checkpoint to evaluate: a sweep's
    directory, one train.py did not make, a run (debug=fdr or not) without checkpoints, or stopped before its first."""
    marker = next((f for f in SWEEP_FILES if (run_dir / f).is_file()), None)
    if marker is not None:
        jobs = sorted((p.name for p in run_dir.iterdir() if p.name.isdigit() and p.is_dir()), key=int)
        raise UserError(
            f"{option} is a sweep's directory ({marker}), not a run's: evaluate one of its runs, {option}/<job> "
            f"(its jobs: {', '.join(jobs[:8]) + (', ...' if len(jobs) > 8 else '') or 'none yet'})"
        )
    config = run_dir / ".hydra" / "config.yaml"
    if not config.is_file():
        parent = (run_dir.parent / ".hydra" / "config.yaml").is_file()
        raise UserError(
            f"{option} is not a run directory of train.py (no .hydra/config.yaml): pass the run directory a "
            "training printed at its end" + (f" ({run_dir.parent}?)" if parent else "")
        )
    try:  # a damaged metrics.json is reported where it is read (runtime/load.py)
        reported = json.loads((run_dir / "metrics.json").read_text()).get("checkpoint") if finished(run_dir) else None
    except (OSError, ValueError, AttributeError):
        return
    if reported is not None or (run_dir / "checkpoints" / "last.ckpt").is_file():
        return
    if _fast_dev_run(config):
        raise UserError(
            f"{option} is a debug=fdr run (trainer.fast_dev_run: one batch) without a checkpoint: nothing to "
            "evaluate; train without debug=fdr for a run to evaluate"
        )
    if finished(run_dir):
        raise UserError(
            f"{option} saved no checkpoint (its metrics.json names none and there is no checkpoints/last.ckpt): "
            "nothing to evaluate; train with the checkpoint callback (callbacks.model_checkpoint) on"
        )
    raise UserError(
        f"{option} is an unfinished run with no checkpoint (no metrics.json, no checkpoints/last.ckpt: it stopped "
        "before its first epoch ended): nothing to evaluate; train it again, in a new hydra.run.dir"
    )


def evaluating(run_dir: Path, option: str, ckpt: Path) -> str:
    """The note that says which checkpoint of the run in `run_dir` (named by `option`) an evaluation takes, and why."""
    if not finished(run_dir):
        return (
            f"{option} is an unfinished run (no metrics.json: interrupted, or still training), so it reported no "
            f"checkpoint: evaluating the best it has saved so far, {ckpt}; to finish the run: python train.py "
            f"hydra.run.dir={run_dir} resume=auto"
        )
    if manifest.read_metrics(run_dir).get("checkpoint") is None:  # verified: a damaged file is named
        fdr = _fast_dev_run(run_dir / ".hydra" / "config.yaml")
        what = "a debug=fdr run (trainer.fast_dev_run: one batch)" if fdr else "a run"
        return f"{option} is {what} whose metrics.json names no checkpoint (its final weights): evaluating {ckpt}"
    return f"{option}: evaluating the checkpoint the run reported, {ckpt}"


def _fast_dev_run(config: Path) -> bool:
    try:
        return bool(OmegaConf.select(OmegaConf.load(config), "trainer.fast_dev_run"))
    except Exception:  # noqa: BLE001 - an unreadable config is reported where the run is rebuilt
        return False


def check_sweep_dir(sweep_dir: Path) -> None:
    """Stop with one line when `sweep_dir` is a file or holds a finished run that a job could overwrite."""
    _check_not_a_file(sweep_dir, "hydra.sweep.dir")
    done = sorted(p.parent for p in sweep_dir.rglob("metrics.json")) if sweep_dir.is_dir() else []
    if done:
        more = f" and {len(done) - 1} more" if len(done) > 1 else ""
        raise UserError(
            f"hydra.sweep.dir={sweep_dir} holds a finished run ({done[0]}{more}), and a finished run is "
            "read-only: pass a new hydra.sweep.dir (or leave it out for a fresh one)"
        )


def _check_not_a_file(path: Path, option: str) -> None:
    blocker = next((p for p in (path, *path.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        where = "is a file" if blocker == path else f"lies under {blocker}, a file"
        raise UserError(f"{option}={path} {where}, not a directory: pass {option}=<a new directory>")


def _refuse_on(check: Callable[[], None]) -> None:
    # Hydra turns an exception raised by a callback into a warning and goes on: only SystemExit stops it
    try:
        check()
    except UserError as err:
        raise SystemExit(f"error: {err}") from None
    except OSError as err:  # the lock's write, on a read-only or full disk
        if (fault := disk_fault(err)) is None:
            raise
        raise SystemExit(f"error: {fault}") from None
