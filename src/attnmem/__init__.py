"""attnmem: config-driven experiments with attention and external-memory models."""

from __future__ import annotations

import typing

__version__ = "0.2.0"
__all__ = ["__version__", "load_model", "load_run"]


def __getattr__(name: str) -> typing.Any:
    # the loaders import torch and Lightning on first use, so `import attnmem` stays light
    if name in ("load_model", "load_run"):
        from attnmem.runtime import load

        return getattr(load, name)
    raise AttributeError(f"module 'attnmem' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names, `load_run` included before its first use."""
    return sorted(__all__)
