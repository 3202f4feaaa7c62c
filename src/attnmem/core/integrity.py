"""Checksums recorded when a file is written and verified whenever it is read: a damaged file is named, never used.

A JSON file of a run (`metrics.json`, `manifest.json`) is written with a sidecar `<name>.sha256` in `sha256sum`'s
format (`sha256sum -c` checks it too); while the file is being replaced the sidecar accepts the old digest and the
new one, so a kill at any point leaves a pair that verifies. Damage (a disk's, a copy's) leaves the file's
modification time as it was; a file modified after its sidecar was edited (by a person, a tool) and is read as it
is now, as is one without a sidecar (a run of an earlier version); a truncated one never parses, and is named with
its line. A `torch.save` archive (a checkpoint, a tensor cache) records the CRC-32 of each of its records when it
is written; `check_archive` reads them all back, and tells a truncated or changed archive from a file that is no
archive at all.
"""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attnmem.core.atomic import replacing
from attnmem.core.errors import UserError

__all__ = [
    "DamagedFile", "NotAnArchive", "check_archive", "intact_archive", "read_bytes", "read_json", "sidecar",
    "write_bytes", "write_json",
]

SUFFIX = ".sha256"
# the records of a torch.save archive: `<archive>/data.pkl`, `<archive>/data/0`, `<archive>/byteorder`, ...
_TORCH_RECORD = re.compile(rb"[^/]+/(data\.pkl|data/\d+|byteorder|version|\.format_version|\.data/[\w.]+)")


class DamagedFile(UserError):
    """A file whose bytes are not those written (truncated, changed): named, with what to do instead."""

    def __init__(self, path: Path, why: str, fix: str | Callable[[], str]) -> None:
        super().__init__(f"{path} is damaged ({why}): {fix if isinstance(fix, str) else fix()}")
        self.path, self.why = path, why


class NotAnArchive(ValueError):
    """A file that is no `torch.save` archive at all (not a damaged one)."""


def sidecar(path: Path) -> Path:
    """The file that records `path`'s sha256."""
    return path.with_name(path.name + SUFFIX)


def _digests(path: Path) -> set[str]:
    # the digests the sidecar accepts (the first field of each line); none when there is no readable sidecar
    try:
        return {line.split()[0] for line in sidecar(path).read_text().splitlines() if line.strip()}
    except (OSError, UnicodeDecodeError):
        return set()


def write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary name and a rename, its sha256 recorded in the sidecar."""
    digest = hashlib.sha256(data).hexdigest()
    line = f"{digest}  {path.name}\n"
    previous = _digests(path)
    if previous:  # while the file is replaced, either content verifies
        _atomic(sidecar(path), line + "".join(f"{d}  {path.name}\n" for d in sorted(previous - {digest})))
    _atomic(path, data)
    _atomic(sidecar(path), line.encode())


def _atomic(path: Path, data: str | bytes) -> None:
    with replacing(path) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write `data` as JSON to `path` atomically, with its sha256 recorded (`read_json` verifies it)."""
    write_bytes(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode())


def read_bytes(path: Path, fix: str) -> bytes:
    """`path`'s bytes, verified against the sha256 recorded when it was written (when one was, and the file was not
    rewritten since: one modified after its record was edited by a person or a tool, and is read as it is now)."""
    data = path.read_bytes()
    accepted = _digests(path)
    if accepted and hashlib.sha256(data).hexdigest() not in accepted and not _edited_since(path):
        raise DamagedFile(path, f"its sha256 differs from the one recorded in {sidecar(path).name} when it was "
                                f"written; {len(data)} bytes", fix)
    return data


def _edited_since(path: Path) -> bool:
    # damage (a disk's, a copy's) leaves the modification time as it was; an edit makes the file newer than its record
    try:
        return path.stat().st_mtime_ns > sidecar(path).stat().st_mtime_ns
    except OSError:
        return False


def read_json(path: Path, fix: str) -> dict[str, Any]:
    """The JSON object in `path`, verified (`read_bytes`); a damaged or invalid file stops in one line naming it."""
    data = read_bytes(path, fix)
    try:
        loaded = json.loads(data)
    except UnicodeDecodeError as error:
        raise DamagedFile(path, f"not UTF-8 text at byte {error.start}", fix) from None
    except json.JSONDecodeError as error:
        end = " (it ends there: truncated)" if error.pos >= len(data.rstrip()) else ""
        raise DamagedFile(path, f"not valid JSON at line {error.lineno}, column {error.colno}: {error.msg}{end}",
                          fix) from None
    if not isinstance(loaded, dict):
        raise DamagedFile(path, f"it holds a JSON {type(loaded).__name__}, not an object", fix)
    return loaded


def check_archive(path: Path, fix: str | Callable[[], str]) -> None:
    """Stop unless `path` is a whole `torch.save` archive whose records match their CRC-32s: `DamagedFile` for a
    truncated or changed one (`fix`, or what it returns, says what to do), `NotAnArchive` for a file that is none."""
    try:
        with zipfile.ZipFile(path) as archive:
            records = archive.infolist()
            if not any(r.filename.endswith("/data.pkl") for r in records):
                raise NotAnArchive(f"{path} holds no data.pkl")
            if all(r.CRC == 0 for r in records if r.file_size):  # saved with torch's CRC-32s off: nothing to check
                return
            bad = archive.testzip()
    except (zipfile.BadZipFile, EOFError) as error:
        if not _starts_like_torch(path):
            raise NotAnArchive(str(error)) from None
        raise DamagedFile(path, f"truncated or cut: {error}; {path.stat().st_size} bytes", fix) from None
    except OSError as error:
        raise NotAnArchive(str(error)) from None
    if bad is not None:
        raise DamagedFile(path, f"its record {bad} differs from the CRC-32 recorded when it was written", fix)


def intact_archive(path: Path) -> bool:
    """Whether `path` is a whole `torch.save` archive (`check_archive` passes)."""
    try:
        check_archive(path, "")
    except (DamagedFile, NotAnArchive):
        return False
    return True


def _starts_like_torch(path: Path) -> bool:
    # a zip's first local header (PK\3\4, then 26 bytes, then the name) naming a record torch.save writes
    try:
        with open(path, "rb") as f:
            head = f.read(30 + 256)
    except OSError:
        return False
    if head[:4] != b"PK\x03\x04" or len(head) < 30:
        return False
    name = head[30:30 + int.from_bytes(head[26:28], "little")]
    return _TORCH_RECORD.fullmatch(name) is not None
