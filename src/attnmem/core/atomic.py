"""Files written under a temporary name and renamed, so a partial file never looks complete."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from attnmem.core import faults


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
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary name in the same folder and a rename."""
    with replacing(path) as tmp:
        tmp.write_text(text)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write `data` as JSON to `path` through a temporary name and a rename."""
    write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
