"""attnmem: config-driven experiments with attention and external-memory models."""

from __future__ import annotations

import typing

__version__ = "0.3.0"
"""The version of attnmem that is installed (PEP 440)."""
__all__ = ["__version__", "load_model", "load_run"]


def __getattr__(name: str) -> typing.Any:
    # the loaders import torch and Lightning on first use, so `import attnmem` stays light
    # (imported by name, so the API reference's page generator can follow them without importing them)
    if name == "load_model":
        from attnmem.runtime.load import load_model

        return load_model
    if name == "load_run":
        from attnmem.runtime.load import load_run

        return load_run
    raise AttributeError(f"module 'attnmem' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names, `load_run` included before its first use."""
    return sorted(__all__)
