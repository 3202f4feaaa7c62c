"""Run directories that a command cannot damage: refused before Hydra writes anything into them.

Hydra creates the run directory and saves `.hydra/config.yaml` before the task runs (and before a job's
`on_job_start`), so a finished run handed to `train.py` had its config rewritten even when the run itself
was then refused. `RunDirGuard` (`hydra.callbacks` in conf/hydra/default.yaml) checks in `on_run_start`
and, for `-m`, in `on_multirun_start`, which come before any directory is made. `attnmem.runtime.run`
makes the same checks for configs composed without Hydra's command line. A single run also takes the run
directory's lock there (`run_lock`), so a second process is refused before Hydra touches the directory.
"""

from __future__ import annotations

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
from attnmem.runtime import legacy, resume, run_lock

__all__ = ["RunDirGuard", "check_eval_source", "check_run_dir", "discard_refused", "finished"]

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
    """Stop with one line when eval.yaml's `run_dir` is not a directory, or its `ckpt_path` is missing or names
    nothing (a directory there stands for a run, as `run_dir`)."""
    if cfg.get("run_dir") is not None:
        if not Path(cfg.run_dir).is_dir():
            raise UserError(f"run_dir={cfg.run_dir}: no such run directory")
    elif OmegaConf.is_missing(cfg, "ckpt_path"):
        raise UserError("ckpt_path needs a value (??? in the config): pass ckpt_path=... or run_dir=<run>")
    elif not Path(cfg.ckpt_path).exists():
        raise UserError(f"ckpt_path={cfg.ckpt_path}: no such checkpoint file")


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
