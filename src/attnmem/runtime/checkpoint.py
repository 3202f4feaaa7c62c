"""Checkpoint files: written under a temporary name and renamed (`callbacks.checkpoint_io`), read back checked (their
CRC-32s: a damaged file is named with the newest intact one beside it) and with `weights_only=True`."""

from __future__ import annotations

import pickle
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from attnmem.callbacks.checkpoint_io import alternative
from attnmem.core import integrity
from attnmem.core.errors import UserError

# What a Lightning checkpoint of this project holds beyond tensors and plain containers: numpy's RNG
# state (an ndarray of uint32) among the saved random states. Nothing here can run code when unpickled.
# The array rebuilder is taken from an array's own pickle recipe: numpy 1 and 2 keep it in different modules.
_REBUILD = cast(Callable[..., Any], np.zeros(0).__reduce__()[0])  # an array's recipe is (callable, args, ...)
SAFE_GLOBALS: list[Callable[..., Any] | tuple[Callable[..., Any], str]] = [  # add_safe_globals' element type
    _REBUILD, np.ndarray, np.dtype, type(np.dtype(np.uint32))
]


def allow_checkpoint_globals() -> None:
    """Let `torch.load(weights_only=True)` (Lightning's loading too) read what our checkpoints hold."""
    torch.serialization.add_safe_globals(SAFE_GLOBALS)


def load(path: str | Path) -> dict[str, Any]:
    """A checkpoint's contents, unpickled with `weights_only=True`; anything else is a one-line UserError."""
    _check_archive(path)
    allow_checkpoint_globals()
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        refused = re.search(r"GLOBAL ([\w.]+)", str(error))
        raise UserError(
            f"ckpt_path={path}: refused to unpickle {refused[1] if refused else 'an object'} (checkpoints load with "
            "weights_only=True: tensors, plain containers and attnmem.runtime.checkpoint.SAFE_GLOBALS only); "
            "pass a checkpoint written by train.py"
        ) from None
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint:
        raise UserError(
            f"ckpt_path={path} is not a Lightning checkpoint (no state_dict): pass a .ckpt written by train.py"
        )
    return checkpoint


def _check_archive(path: str | Path) -> None:
    """Stop unless `path` is a whole torch zip archive (what `torch.save` writes), before any unpickling: a damaged
    one (truncated, changed) is named with the newest intact checkpoint beside it."""
    try:
        integrity.check_archive(Path(path), lambda: alternative(Path(path)))
    except integrity.NotAnArchive:
        raise UserError(
            f"ckpt_path={path} is not a checkpoint (not a torch.save archive): pass a .ckpt written by train.py, "
            "e.g. <run>/checkpoints/last.ckpt"
        ) from None
