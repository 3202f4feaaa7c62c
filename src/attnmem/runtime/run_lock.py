"""One training process per run directory: `<run>/.lock` names the one that trains there (pid, host, SLURM job).

Rank 0 takes the lock when the run starts (for a command line, in Hydra's `on_run_start`, before Hydra
writes into the directory) and removes it when the run ends, finished or not. A lock whose process is gone
(SIGKILL, a crash) is reported and taken over only when that is sure: the same host and no such process,
or the same SLURM job (a requeued job resuming its own run); the files that process left half-written (its
temporary names) are removed then. A lock of another host is never taken.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from attnmem.core.atomic import write_json
from attnmem.core.errors import UserError

LOCK = ".lock"
# where a launcher says which process this is (Lightning's, SLURM's, jsrun's); none set: the only one, rank 0
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")


@contextmanager
def held(run_dir: Path) -> Iterator[None]:
    """Hold the run directory's lock for the block (rank 0 only; a lock this process holds already is kept)."""
    acquire(run_dir)
    try:
        yield
    finally:
        release(run_dir)


def acquire(run_dir: Path) -> None:
    """Take `run_dir`'s lock for this process, or stop with one line naming the process that holds it."""
    if rank() != 0:
        return
    path = run_dir / LOCK
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        _take_over(path, _owner(path))
        return
    with os.fdopen(fd, "w") as f:
        json.dump(_me(), f)


def release(run_dir: Path) -> None:
    """Remove `run_dir`'s lock if this process holds it."""
    path = run_dir / LOCK
    owner = _owner(path) if path.is_file() else {}
    if owner.get("pid") == os.getpid() and owner.get("host") == socket.gethostname():
        path.unlink(missing_ok=True)


def rank() -> int:
    """This process's rank, read from the environment as Lightning does (so the command line imports no Lightning)."""
    return next((int(os.environ[v]) for v in RANK_VARIABLES if os.environ.get(v, "").isdigit()), 0)


def _me() -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _owner(path: Path) -> dict[str, Any]:
    try:
        owner = json.loads(path.read_text() or "{}")
    except (OSError, json.JSONDecodeError):
        owner = {}
    return owner if isinstance(owner, dict) else {}


def _take_over(path: Path, owner: dict[str, Any]) -> None:
    me = _me()
    if owner.get("pid") == me["pid"] and owner.get("host") == me["host"]:
        return  # this process took it already (Hydra's on_run_start, then the run itself)
    who = f"pid {owner.get('pid', '?')} on host {owner.get('host', '?')}"
    who += f" (SLURM job {owner['slurm_job_id']})" if owner.get("slurm_job_id") else ""
    who += f", started {owner['started']}" if owner.get("started") else ""
    if me["slurm_job_id"] and owner.get("slurm_job_id") == me["slurm_job_id"]:
        taking = f"SLURM job {me['slurm_job_id']} takes over its own lock ({who})"
    elif owner.get("host") == me["host"] and isinstance(owner.get("pid"), int) and not _alive(owner["pid"]):
        taking = f"taking over the lock of a process that is gone ({who}; killed or crashed)"
    elif owner.get("host") == me["host"] or not owner:
        raise UserError(
            f"hydra.run.dir={path.parent} is in use: {who if owner else 'another process'} trains into it "
            "(its lock file .lock): wait for that run to end, or pass a new hydra.run.dir"
        )
    else:
        raise UserError(
            f"hydra.run.dir={path.parent} is locked by {who}, which cannot be checked from this host: wait for "
            f"that run to end; if it is no longer running, delete {path} and run again"
        )
    from attnmem.runtime import console  # Rich and Lightning: not for a refusal, which the command line prints

    # the files the gone process was writing (attnmem.core.atomic's temporary names hold its pid): never complete
    partial = list(path.parent.rglob(f".*.{owner['pid']}.tmp")) if isinstance(owner.get("pid"), int) else []
    for file in partial:
        file.unlink(missing_ok=True)
    removed = f"; {len(partial)} file(s) it left half-written removed" if partial else ""
    console.note(f"{path.parent}: {taking}{removed}")
    write_json(path, me)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
