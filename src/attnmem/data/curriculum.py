"""Curriculum learning for the algorithmic tasks: training starts on small sizes and grows level by level.

Graves et al. 2016 (Methods, "Curriculum learning") call it essential for the DNC's algorithmic tasks.
A level caps the task's difficulty knob, the size its generalisation tests turn (`Algorithm.sizes()`):
vectors (copy), repeats (repeat copy), items (associative recall), input vectors (priority sort).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:  # the datamodule imports this module
    from attnmem.data.algorithmic import Algorithm, Example

__all__ = ["AtLevel", "Curriculum", "knob_range"]


def knob_range(task: Algorithm) -> tuple[int, int]:
    """The sizes a level may cap: the task's range or, for a task of one size (priority sort), its smallest
    possible size (`least_size`, else 1) up to that size."""
    low, high = task.sizes()
    return (getattr(task, "least_size", 1), high) if low == high else (low, high)


@dataclass
class Curriculum:
    """Levels of the knob, increasing, each below the task's largest size; the full task follows the last.

    Training moves to the next level when the bit errors per sequence on `num_check` fresh sequences of
    the current level, checked after each training epoch, are at most `threshold`. Validation and test
    always use the full task.
    """

    levels: list[int] = field(default_factory=list)
    threshold: float = 0.1
    num_check: int = 128

    def __post_init__(self) -> None:
        self.levels = [int(level) for level in self.levels]
        if not self.levels:
            raise ValueError("data.curriculum.levels must name at least one level, e.g. [2, 5, 10]")
        if any(b <= a for a, b in zip(self.levels, self.levels[1:], strict=False)):
            raise ValueError(f"data.curriculum.levels must be increasing, got {self.levels}")
        if not (math.isfinite(self.threshold) and self.threshold >= 0):
            raise ValueError(f"data.curriculum.threshold must be a number of bit errors >= 0, got {self.threshold}")
        if self.num_check < 1:
            raise ValueError(f"data.curriculum.num_check must be >= 1, got {self.num_check}")

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> Curriculum:
        """A curriculum from `data.curriculum={levels: [...], threshold: ...}`; ValueError on an unknown key."""
        unknown = sorted(set(options) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"data.curriculum: unknown option(s) {unknown}; it takes levels, threshold, num_check")
        kwargs: dict[str, Any] = {k: list(v) if k == "levels" else v for k, v in options.items()}
        return cls(**kwargs)

    def check_task(self, task: Algorithm) -> None:
        """ValueError naming `data.curriculum.levels` when a level lies outside the sizes the task can cap."""
        low, high = knob_range(task)
        if high <= low:
            raise ValueError(f"data.curriculum: {type(task).__name__} has no difficulty knob to cap (its sizes are "
                             f"{low}..{high}); drop data.curriculum")
        if self.levels[0] < low or self.levels[-1] >= high:
            raise ValueError(f"data.curriculum.levels must lie in [{low}, {high - 1}] for {type(task).__name__} (the "
                             f"full task, up to {high}, follows the last level), got {self.levels}")


@dataclass
class AtLevel:
    """A task whose sizes are capped at `level`: drawn uniformly up to it, or exactly it for a one-size task."""

    task: Algorithm
    level: int

    def __post_init__(self) -> None:
        self.input_size, self.output_size = self.task.input_size, self.task.output_size

    def sizes(self) -> tuple[int, int]:
        low, high = self.task.sizes()
        return (self.level, self.level) if low == high else (low, self.level)

    def draw(self, g: torch.Generator, size: int | None) -> tuple[int, ...]:
        if size is None:
            low, high = self.sizes()
            size = int(torch.randint(low, high + 1, (1,), generator=g))
        return self.task.draw(g, size)

    def example(self, shape: tuple[int, ...], g: torch.Generator) -> Example:
        return self.task.example(shape, g)
