"""The bAbI tensor cache, in attnmem's one cache folder and never beside the user's data.

The folder is `data.source.cache_dir` when given, else `$ATTNMEM_CACHE`, else `$XDG_CACHE_HOME/attnmem`,
else `~/.cache/attnmem`; bAbI's tensors go to its `babi/` subfolder, one file per key (the files' names
and sha256 and the options that shape the tensors), so equal files share one entry wherever they lie.
A folder that cannot be written costs the cache (one warning), never the run. A cache file is checked before it is
read (the CRC-32 `torch.save` records for each record): a damaged one (truncated, changed) is rebuilt, never used.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
from pathlib import Path
from typing import Any

import torch

from attnmem.core import integrity
from attnmem.core.atomic import replacing
from attnmem.data.qa.tensors import QAData

__all__ = ["cache_root", "load_cached", "save_cached", "tensor_path"]

log = logging.getLogger(__name__)

_CACHE_VERSION = 2  # bump when the tensors or vocabularies change shape or content


def cache_root(cache_dir: str | None = None) -> tuple[Path, str]:
    """attnmem's cache folder and the setting that chose it (`data.source.cache_dir`, an environment variable)."""
    if cache_dir:
        return Path(cache_dir).expanduser(), "data.source.cache_dir"
    if os.environ.get("ATTNMEM_CACHE"):
        return Path(os.environ["ATTNMEM_CACHE"]).expanduser(), "ATTNMEM_CACHE"
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and Path(xdg).is_absolute():  # the XDG spec ignores a relative path
        return Path(xdg) / "attnmem", "XDG_CACHE_HOME"
    return Path.home() / ".cache" / "attnmem", "HOME"


def _writable(folder: Path) -> bool:
    """Create `folder` and probe a write; mode bits without any write permission count as read-only, even for root."""
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if not existing.stat().st_mode & 0o222:
        return False
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".probe-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError:
        return False
    return True


def tensor_path(files: list[Path], options: dict[str, Any], cache_dir: str | None) -> Path | None:
    """Where the tensors of `files` built with `options` are cached, or None (with a warning) when nowhere."""
    root, origin = cache_root(cache_dir)
    folder = root / "babi"
    if not _writable(folder):
        log.warning("the cache folder %s (from %s) cannot be written: the bAbI tensors are rebuilt every run; "
                    "set ATTNMEM_CACHE or data.source.cache_dir to a writable folder, or data.source.cache=false",
                    folder, origin)
        return None
    key = json.dumps({"version": _CACHE_VERSION,
                      "files": [[p.name, hashlib.sha256(p.read_bytes()).hexdigest()] for p in files], **options})
    return folder / f"babi-{hashlib.sha256(key.encode()).hexdigest()[:16]}.pt"


def load_cached(path: Path) -> QAData | None:
    """The cached tensors, or None when there are none or they cannot be read (then they are rebuilt)."""
    if not path.exists():
        return None
    if (why := _damage(path)) is not None:
        log.warning("the cache %s is damaged (%s): rebuilding it", path, why)
        path.unlink(missing_ok=True)
        return None
    try:
        return QAData(**torch.load(path, weights_only=True))
    except (OSError, RuntimeError, EOFError, TypeError, pickle.UnpicklingError) as error:
        log.warning("ignoring unreadable cache %s (%s)", path, error)
        return None


def _damage(path: Path) -> str | None:
    """What is wrong with the cache file at `path` (truncated, changed, no archive), or None when it is whole."""
    try:
        integrity.check_archive(path, "")
    except integrity.DamagedFile as error:
        return error.why
    except integrity.NotAnArchive:
        return "not a torch.save archive"
    return None


def save_cached(qa: QAData, path: Path) -> None:
    """Write the tensors to the cache; a full disk costs the cache, not the run."""
    try:
        with replacing(path) as part:  # several ranks may write at once: each its own temp name
            torch.save({"vocab": qa.vocab, "answers": qa.answers, "splits": qa.splits}, part)
    except OSError as error:
        log.warning("could not write the cache %s (%s)", path, error)
