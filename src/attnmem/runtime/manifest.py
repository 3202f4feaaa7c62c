"""The run manifest: what code, packages, data and command made a run."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
from collections.abc import Sized
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

import attnmem
from attnmem.core import faults
from attnmem.core.integrity import read_json, write_json

PACKAGES = ("torch", "lightning", "torchmetrics", "hydra-core", "omegaconf", "numpy", "wandb")


def sha256(path: Path) -> str:
    """The sha256 hex digest of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def git_state(cwd: Path) -> dict[str, Any]:
    """The commit checked out at `cwd` and whether the work tree differs from it."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def _versions() -> dict[str, str | None]:
    # attnmem's version from the code that runs: an editable install's metadata keeps the one it was installed at
    found: dict[str, str | None] = {"python": platform.python_version(), "attnmem": attnmem.__version__}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def _command() -> dict[str, Any]:
    overrides = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    return {"argv": sys.argv, "overrides": overrides, "cwd": os.getcwd()}


def write(out_dir: Path, cfg: DictConfig, datamodule: Any, config: dict[str, Any]) -> Path:
    """Write `manifest.json` into the run directory (beside Hydra's `.hydra/`); `config` is the run's config as
    it started (unresolved), which a resume is checked against."""
    manifest = {
        "created": _now(),
        "git": git_state(Path.cwd()),
        "packages": _versions(),
        "command": _command(),
        "seed": cfg.seed,
        "data_files": {str(p): sha256(Path(p)) for p in datamodule.data_files},
        "examples": split_sizes(datamodule),
        "config": config,
    }
    path = out_dir / "manifest.json"
    write_json(path, manifest)
    return path


def split_sizes(datamodule: Any) -> dict[str, int]:
    """Examples per split of a set-up datamodule, for the splits whose dataset has a length (a figure's
    standard error needs it)."""
    sizes = {}
    for split in ("train", "val", "test") if getattr(datamodule, "has_test", True) else ("train", "val"):
        loader = getattr(datamodule, f"{split}_dataloader")()
        if isinstance(getattr(loader, "dataset", None), Sized):
            sizes[split] = len(loader.dataset)
    return sizes


def add_resume(out_dir: Path, checkpoint: str, step: int, changed: dict[str, dict[str, Any]]) -> Path:
    """Record a resume in the run's manifest: when, from which checkpoint and step, by what command, and the
    options it changed (those a resume may change)."""
    faults.point("manifest.json:before_update")  # a kill point for tests (core/faults.py)
    path = out_dir / "manifest.json"
    manifest = read(out_dir)
    resume = {"at": _now(), "checkpoint": checkpoint, "step": step, "command": _command(),
              "git": git_state(Path.cwd()), "changed": changed}
    manifest["resumes"] = [*manifest.get("resumes", []), resume]
    write_json(path, manifest)
    return path


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def read(run_dir: Path) -> dict[str, Any]:
    """The manifest of a run directory, verified against the sha256 recorded when it was written."""
    return read_json(run_dir / "manifest.json", "restore it from a copy of the run, or delete it (a resume then checks "
                     "its options against .hydra/config.yaml, and records nothing)")


def read_metrics(run_dir: Path) -> dict[str, Any]:
    """A finished run's `metrics.json`, verified against the sha256 recorded when it was written."""
    return read_json(run_dir / "metrics.json", "restore it from a copy of the run, or delete it and run the same "
                     "command with resume=auto: the run is tested again and its metrics.json rewritten")
