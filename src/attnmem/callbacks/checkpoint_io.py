"""How the trainer writes and reads checkpoint files: whole or absent, on the checkpoint's own disk, verified on read.

Lightning's `TorchCheckpointIO` stages a checkpoint through an fsspec transaction in the system temp folder and
moves it into place: a copy, not a rename, across file systems, and a full temp folder fails with a bare
`[Errno 28]` naming no file. `AtomicCheckpointIO` writes to a temporary name beside the target, fsyncs it and
renames it (`core.atomic.replacing`), so the checkpoint folder's disk is the only one written. A disk fault
(full, read-only, the run directory deleted) ends in one line naming the file and the fix, the checkpoints
written before untouched and no run directory made again. Reading checks the archive's CRC-32s first
(`core.integrity.check_archive`): a damaged file is named, never loaded. `AtomicModelCheckpoint` installs it on
its trainer (Lightning's public `Strategy.checkpoint_io`) unless the trainer was given a `CheckpointIO` of its own.
"""

from __future__ import annotations

import errno
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

from attnmem.core import integrity
from attnmem.core.atomic import disk_fault, replacing

# how to go on after a write the disk refused: the run stopped with its earlier checkpoints whole
THEN = "; the checkpoints written before are intact: then add resume=auto to the same command to continue the run"
THEN_READ_ONLY = ("; the checkpoints written before are intact: copy the run there and continue it with "
                  "hydra.run.dir=<the copy> resume=auto")


class AtomicCheckpointIO(TorchCheckpointIO):
    """`torch.save` to a temporary name beside the checkpoint, fsync, rename; checked on load. `run_dir`: the run
    directory, which a save never makes again once it is gone (None: the checkpoint's folders are made as needed)."""

    def __init__(self, run_dir: Path | None = None) -> None:
        super().__init__()
        self.run_dir = run_dir

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None) -> None:
        """Write `checkpoint` to `path` whole (a temp name in its folder, fsync, rename) or not at all."""
        if storage_options is not None:
            super().save_checkpoint(checkpoint, path, storage_options)
            return
        target = Path(path)
        buffer = io.BytesIO()
        torch.save(checkpoint, buffer)
        try:
            if self.run_dir is not None and not self.run_dir.is_dir():  # deleted while the run trained
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(self.run_dir))
            with replacing(target) as tmp:
                _write(tmp, buffer.getbuffer())
        except OSError as error:
            then = {errno.ENOENT: "", errno.EROFS: THEN_READ_ONLY}.get(error.errno or 0, THEN)
            if (fault := disk_fault(error, target, then, writing=True)) is None:
                raise
            raise fault from None

    def load_checkpoint(
        self, path: Any, map_location: Callable[..., Any] | None = lambda storage, loc: storage,
        weights_only: bool | None = None,
    ) -> dict[str, Any]:
        """Lightning's loading, after the archive's CRC-32s are checked (a damaged file stops in one line)."""
        if Path(path).is_file():
            check(Path(path))
        return super().load_checkpoint(path, map_location=map_location, weights_only=weights_only)


def _write(path: Path, data: memoryview) -> None:
    """Write `data` to `path` and flush it to the disk (fsync) before the rename makes it the checkpoint."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def check(path: Path) -> None:
    """Stop in one line when the checkpoint at `path` is damaged, naming the newest intact one beside it."""
    try:
        integrity.check_archive(path, lambda: alternative(path))
    except integrity.NotAnArchive:
        return  # not a checkpoint at all: the loader says so


def alternative(damaged: Path) -> str:
    """What to do instead of reading `damaged`: the newest intact checkpoint in its folder, or train again."""
    found = newest_intact(damaged.parent, besides=damaged)
    if found is None:
        return f"no intact checkpoint is left in {damaged.parent}: train again in a new hydra.run.dir"
    return f"the newest intact checkpoint beside it is {found} (ckpt_path={found}; resume=auto resumes from it)"


def newest_intact(folder: Path, besides: Path | None = None) -> Path | None:
    """The most recently written intact checkpoint (`*.ckpt`) in `folder`, other than `besides`; None if none."""
    if not folder.is_dir():
        return None
    found = [p for p in folder.glob("*.ckpt") if p.is_file() and p != besides]
    for candidate in sorted(found, key=lambda p: (p.stat().st_mtime_ns, p.name == "last.ckpt"), reverse=True):
        if integrity.intact_archive(candidate):
            return candidate
    return None
