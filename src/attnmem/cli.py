"""The command-line guard: user mistakes end a run with one line, not a traceback."""

from __future__ import annotations

import os
import sys
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from attnmem import run
from attnmem.errors import UserError


def guarded(cfg: DictConfig, entry: str) -> Any:
    """Run `attnmem.run.<entry>(cfg)`; print a user error as one line and exit 1 (a multirun goes on)."""
    try:
        return getattr(run, entry)(cfg)
    except (UserError, ValueError) as err:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"error: {err}", file=sys.stderr)
        if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
            return None
        raise SystemExit(1) from None
