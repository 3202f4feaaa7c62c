"""Resuming a run: which changed options can apply, the step it resumes at, and the command that resumes it.

A checkpoint restores the weights, the optimizer and its schedule, the callbacks' state and the random
states, so most options of a resumed run cannot change: a changed learning rate would be overwritten by
the optimizer's restored one while the config and manifest said otherwise. A resume that changes such an
option is refused, naming the key with its old and new value. Options that only say how long to train,
on what hardware, or how to show and log it apply as given, and the manifest records them. So do options
the run's code did not have when it started (added by a later version), with their defaults: a note names them.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any, NamedTuple

from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from attnmem.core import compat, integrity
from attnmem.core.errors import UserError
from attnmem.runtime import legacy, manifest

# option prefixes a resumed run may change: how long, on what hardware, what it shows and logs
ALLOWED = (
    "trainer.max_epochs",
    "trainer.max_steps",
    "trainer.max_time",
    "trainer.min_epochs",
    "trainer.min_steps",
    "trainer.accelerator",
    "trainer.devices",
    "trainer.num_nodes",
    "trainer.strategy",
    "trainer.precision",
    "trainer.sync_batchnorm",
    "trainer.enable_progress_bar",
    "trainer.enable_model_summary",
    "trainer.log_every_n_steps",
    "threads",
    "print_config",
    "tags",
    "logger",
    "callbacks.progress_bar",
    "callbacks.plots",
    "resume",
    "ckpt_path",
    "paths",
    "name",
    "hydra",
)
WHY = {
    "model": "the checkpoint's weights were trained with it",
    "attention": "the checkpoint's weights were trained with it",
    "data": "the run trains on the data it started with",
    "optimizer": "the checkpoint restores the optimizer's state, learning rate included",
    "scheduler": "the checkpoint restores the schedule's state",
}


def changes(run_dir: Path, cfg: DictConfig, *, note: bool = False) -> dict[str, dict[str, Any]]:
    """The options `cfg` changes from those `run_dir`'s run started with, as {key: {old, new}}; stop with one
    line on a change a resume cannot apply; with `note`, name in one line the options added since it started."""
    started = _started_with(run_dir)
    if started is None:
        return {}
    if "model._target_" in started:  # a model that moved behind a training adapter (0.3) resumes as the adapter
        started["model._target_"] = legacy.moved_target(started["model._target_"], run_dir)
    now = _flat(OmegaConf.to_container(cfg, resolve=False))
    changed = {
        k: {"old": started.get(k), "new": now.get(k)}
        for k in sorted(started.keys() | now.keys())
        if started.get(k) != now.get(k) and not k.startswith(("hydra", "resume", "ckpt_path"))
    }
    for key in changed:
        if key not in started and not any(p in started for p in _ancestors(key)):
            changed[key]["new_option"] = True  # the run's code did not have it: its default applies
    refused = {k: v for k, v in changed.items() if not k.startswith(ALLOWED) and "new_option" not in v}
    if refused:
        key = next(iter(refused))
        shown = ", ".join(f"{k}: {v['old']} -> {v['new']}" for k, v in refused.items())
        why = WHY.get(key.split(".")[0], "a resumed run keeps the options it started with")
        raise UserError(
            f"resume=auto cannot change {shown} ({why}): resume with the run's own values (see "
            f"{run_dir}/.hydra/config.yaml), or train with the new ones in a new hydra.run.dir"
        )
    added = [f"{k}={v['new']}" for k, v in changed.items() if v.get("new_option")]
    if note and added:
        print(f"note: {run_dir} started before these options existed; resuming with their defaults: "
              + ", ".join(added), file=sys.stderr)
    return changed


def _ancestors(key: str) -> list[str]:
    """`a.b.c` -> [`a`, `a.b`]: the options a flat key lies under."""
    parts = key.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _started_with(run_dir: Path) -> dict[str, Any] | None:
    # the manifest's copy of the config at the run's first start; Hydra rewrites .hydra/config.yaml on resume
    if (run_dir / "manifest.json").is_file() and "config" in (recorded := manifest.read(run_dir)):
        return _flat(recorded["config"])
    saved = run_dir / ".hydra" / "config.yaml"
    return _flat(OmegaConf.to_container(legacy.read_config(saved), resolve=False)) if saved.is_file() else None


def _flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict) and tree:
        return {k: v for key, sub in tree.items() for k, v in _flat(sub, f"{prefix}{key}.").items()}
    return {prefix.removesuffix("."): tree}


def checkpoint_to_resume(run_dir: Path) -> Path:
    """The checkpoint `resume=auto` continues from: `last.ckpt`, or where it is missing or damaged (a full disk, a
    kill mid-write) the run's newest intact checkpoint, said in one line; one line when there is none."""
    from attnmem.callbacks.checkpoint_io import newest_intact  # Lightning: once a run resumes
    from attnmem.runtime import checkpoint, console

    last = run_dir / "checkpoints" / "last.ckpt"
    why = "missing" if not last.is_file() else None
    try:
        if why is None:
            integrity.check_archive(last, "")
    except integrity.DamagedFile as error:
        why = f"damaged ({error.why})"
    except integrity.NotAnArchive:
        why = "damaged (not a torch.save archive)"
    chosen = last if why is None else newest_intact(last.parent, besides=last)
    if chosen is None and why != "missing":
        checkpoint.load(last)  # stops in one line naming the damage
    if chosen is None:
        raise UserError(f"no checkpoint to resume at {last} (the run saved none): pass hydra.run.dir=<the run to "
                        "resume>, or leave resume=auto out to train this one anew")
    if chosen != last:
        console.note(f"resume=auto: {last} is {why}: resuming from {chosen.name}, the run's newest intact checkpoint")
    legacy.check_manifest(run_dir)
    legacy.check_checkpoint(checkpoint.load(chosen), chosen)
    return chosen


class Point(NamedTuple):
    """Where a checkpoint resumes: the optimizer step (what the loggers' `step` counts), and its record of the CSV
    log (`callbacks.csv_logger.record`; None in a checkpoint without one)."""

    step: int
    csv_log: dict[str, Any] | None


def point(ckpt_path: str | Path) -> Point:
    """Where the checkpoint at `ckpt_path` resumes."""
    from attnmem.callbacks.csv_logger import LOG_KEY
    from attnmem.runtime import checkpoint  # torch: Hydra's run_dir_guard imports this module before any run

    state = checkpoint.load(ckpt_path)
    return Point(compat.checkpoint_step(state), state.get(LOG_KEY))


def logger_options(logger_cfg: DictConfig, resume_at: Point | None) -> dict[str, Any]:
    """What a logger needs to continue the history of a run resumed at `resume_at` (nothing for a new run)."""
    if resume_at is None or "_target_" not in logger_cfg:
        return {}
    from lightning.pytorch.loggers import TensorBoardLogger  # Lightning: only once a run builds its loggers

    from attnmem.callbacks.csv_logger import CSVLogger

    cls = get_class(logger_cfg._target_)
    if issubclass(cls, CSVLogger):
        return {"keep_before": resume_at.step, "resume_log": resume_at.csv_log}
    # TensorBoard hides the events at and after this step in the earlier files: they are logged again
    return {"purge_step": resume_at.step} if issubclass(cls, TensorBoardLogger) else {}


def command(run_dir: Path) -> str:
    """The command line that resumes the run in `run_dir`: this run's overrides, its directory, resume=auto."""
    overrides = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    kept = [o for o in overrides if o.partition("=")[0].lstrip("+~") not in ("resume", "ckpt_path")]
    return shlex.join(["python", "train.py", *kept, f"hydra.run.dir={run_dir}", "resume=auto"])


def train_metrics(trainer: Any) -> dict[str, float]:
    """The trainer's `train/` metrics; for a run resumed after its last epoch, those of the checkpoint it resumed.

    A run killed after its last training epoch resumes with nothing left to train, so the trainer has no
    `train/` metrics: they come from the checkpoint (written before the epoch's CSV row is), or for a
    checkpoint older than that record, from the log its epochs wrote (none without the CSV logger).
    """
    trained = {key: float(value) for key, value in trainer.callback_metrics.items() if key.startswith("train/")}
    if trained:
        return trained
    from attnmem.callbacks.csv_logger import logged_history  # Lightning: only once a run has trained
    from attnmem.runtime import checkpoint
    from attnmem.tasks.hooks import TRAIN_KEY

    if trainer.ckpt_path and TRAIN_KEY in (saved := checkpoint.load(trainer.ckpt_path)):
        return saved[TRAIN_KEY]

    return {key: series[max(series)] for key, series in logged_history(trainer).items() if key.startswith("train/")}
