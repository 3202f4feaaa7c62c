"""The one check every model constructor makes of its sizes: each must be at least 1."""

from __future__ import annotations

__all__ = ["check_sizes"]


def check_sizes(owner: str, sizes: dict[str, int], *, prefix: str = "") -> None:
    """ValueError `"{owner}: {name} must be >= 1, got {value}"` for the first size below 1; with `prefix` (the
    config group, `model.`) the option of a run in parentheses."""
    for name, value in sizes.items():
        if value < 1:
            hint = f" ({prefix}{name} in a run)" if prefix else ""
            raise ValueError(f"{owner}: {name} must be >= 1, got {value}{hint}")
