"""Files written under a temporary name and renamed, so a partial file never looks complete."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from attnmem.core import faults
from attnmem.core.errors import UserError

# what a write can meet on a disk, and the fix for each (ENOENT: a folder deleted under a running command)
DISK_FAULTS = {
    errno.ENOSPC: ("no space left on its disk", "free space there (or pass a hydra.run.dir on another disk)"),
    errno.EDQUOT: ("disk quota exceeded", "free space there (or pass a hydra.run.dir on another disk)"),
    errno.EROFS: ("its file system is read-only", "pass a hydra.run.dir on a writable disk"),
    errno.EACCES: ("permission denied", "pass a hydra.run.dir you can write to"),
}
WRITE_FAULTS = {**DISK_FAULTS, errno.ENOENT: (
    "its folder is gone (deleted while the command ran)", "pass a new hydra.run.dir (or restore the folder)")}


class DiskFault(UserError):
    """A write the disk refused (full, read-only, its folder gone): one line naming the file and the fix."""


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary name beside `path` to write to; renamed onto `path` once the block ends without an error.

    The name holds the process id, so processes writing the same file at once never share one. A block that
    raises, or writes nothing (a process that leaves the writing to another), leaves `path` as it was.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        if tmp.exists():
            faults.point(f"{faults.kind(path)}:mid_write", tmp)  # kill points for tests (core/faults.py)
            faults.point(f"{faults.kind(path)}:before_rename")
            os.replace(tmp, path)
            faults.point(f"{faults.kind(path)}:after_rename")
    except OSError as error:  # a full or read-only disk names the file being written, not its temporary name
        if type(error).__module__ != "builtins" or error.errno is None or error.filename not in (None, str(tmp), tmp):
            raise
        raise OSError(error.errno, error.strerror, str(path)) from None  # OSError(errno) is its subclass
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary name in the same folder and a rename."""
    with replacing(path) as tmp:
        tmp.write_text(text)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write `data` as JSON to `path` through a temporary name and a rename."""
    write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def disk_fault(
    error: OSError, path: str | Path | None = None, then: str = "", *, writing: bool = False
) -> DiskFault | None:
    """The one-line error for `error` met writing `path` (its own file name when None), or None when it is no disk
    fault; `then` follows the fix (how to go on); `writing`: also a missing folder (ENOENT) counts."""
    known = WRITE_FAULTS if writing else DISK_FAULTS
    if error.errno not in known:
        return None
    why, fix = known[error.errno]
    where = path if path is not None else (error.filename or "a file")
    verb = "could not write " if writing else ""
    return DiskFault(f"{verb}{where}: {why} ([Errno {error.errno}] {error.strerror}): {fix}{then}")
