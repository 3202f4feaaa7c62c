"""A model's parameter memory, counted on torch's meta device before any of it is allocated.

A width or vocabulary that asks the allocator for more than the machine has ends in the allocator's traceback
(on the CPU after minutes of swapping); built on the meta device first, the model's parameters have shapes but
no storage, so their size is known at no cost and a model that cannot fit is refused with the figure.
"""

from __future__ import annotations

import os
import random
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig

from attnmem.core.errors import UserError
from attnmem.runtime import console, hardware

# weights and their gradients: the least that training holds (an optimizer's state and the activations come on top)
TRAINING_COPIES = 2


def check(build: Callable[[], torch.nn.Module], trainer: DictConfig) -> None:
    """Stop with one line when the parameters of the model `build()` makes, and their gradients, would not fit in
    the memory free on the device the `trainer` config trains on; `build` runs once on the meta device (no storage)."""
    parameters = parameters_on_meta(build)
    device = hardware.device_type(str(trainer.get("accelerator", "auto")))
    free = free_bytes(device)
    if parameters is None or free is None:
        return
    scale = 2 if str(trainer.get("precision", "32")).startswith("64") else 1  # Lightning doubles them in 64-true

    def size(p: torch.nn.Parameter) -> int:
        return p.numel() * p.element_size() * (scale if p.is_floating_point() else 1)

    total = sum(size(p) for _, p in parameters)
    if TRAINING_COPIES * total <= free:
        return
    name, largest = max(parameters, key=lambda item: size(item[1]))
    raise UserError(
        f"the model's parameters take {_gib(total)} ({sum(p.numel() for _, p in parameters):,} numbers; the largest, "
        f"{name} of shape {tuple(largest.shape)}, {_gib(size(largest))}), and training "
        f"needs at least {TRAINING_COPIES} times that, more than the {_gib(free)} free on {device}: "
        "choose smaller model sizes (model.*) or a smaller vocabulary"
    )


def parameters_on_meta(build: Callable[[], torch.nn.Module]) -> list[tuple[str, torch.nn.Parameter]] | None:
    """The named parameters of `build()` made on the meta device, the random generators left as they were; None for
    a model whose construction computes on values (a meta tensor has none): the real build then says what it says."""
    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    try:
        # its notes and warnings come once, from the real build
        with torch.device("meta"), console.console.capture(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return list(build().named_parameters())
    except Exception:  # any failure on meta: not estimated, and the real build reports its own
        return None
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])


def free_bytes(device: str) -> int | None:
    """The memory free for new allocations on `device` (`cpu`, `cuda`), in bytes; None where it is not known."""
    if device == "cuda" and torch.cuda.is_available():
        return torch.cuda.mem_get_info()[0]
    if device != "cpu":
        return None
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():  # MemAvailable counts the page cache the kernel would give up, as an allocation gets it
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows), or names it does not know (macOS)
        return None


def _gib(size: int) -> str:
    return f"{size / 2**30:,.1f} GiB"
