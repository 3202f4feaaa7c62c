"""Kill points for tests only: a process stopped as SIGKILL would stop it, at a named point of a file's writing.

Nothing here acts unless the environment variable `ATTNMEM_KILL_AT` is set, as `<point>:<n>` (e.g.
`checkpoint:before_rename:3`: the third time this process reaches that point). A point is `<kind>:<stage>`:
the kind is `checkpoint` for a `.ckpt` file, else the file's name (`manifest.json`, `metrics.json`,
`metrics.csv`); the stages are those of `core.atomic.replacing` (`mid_write`: the temp file cut to half its
size, `before_rename`, `after_rename`) and `manifest.json:before_update` (a resume's checkpoint read, its
manifest entry not yet written). Before the kill, the point's name is appended to the file that
`ATTNMEM_KILL_MARK` names, so a test can tell the point was reached. tests/runtime/test_kill_points.py uses it.
"""

from __future__ import annotations

import os
from pathlib import Path

KILL_AT = "ATTNMEM_KILL_AT"
KILL_MARK = "ATTNMEM_KILL_MARK"
EXIT_CODE = 137  # what a shell reports for a process killed by SIGKILL

_reached: dict[str, int] = {}


def kind(path: Path) -> str:
    """The kind of file `path` is, as point names spell it: `checkpoint` for a `.ckpt`, else its name."""
    return "checkpoint" if path.suffix == ".ckpt" else path.name


def point(name: str, tmp: Path | None = None) -> None:
    """Kill this process here if `ATTNMEM_KILL_AT` names this point and count; `tmp` (a temp file being written)
    is cut to half its size first. A no-op (one environment lookup) when the variable is unset."""
    plan = os.environ.get(KILL_AT)
    if not plan:
        return
    target, _, count = plan.rpartition(":")
    if target != name:
        return
    _reached[name] = _reached.get(name, 0) + 1
    if _reached[name] != int(count):
        return
    if tmp is not None and tmp.is_file():
        os.truncate(tmp, tmp.stat().st_size // 2)
    if mark := os.environ.get(KILL_MARK):
        with open(mark, "a") as f:
            f.write(f"{name}:{count}\n")
    os._exit(EXIT_CODE)
