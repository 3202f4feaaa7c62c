"""Random states in checkpoints, so a resumed run draws the numbers an uninterrupted run would have drawn."""

from __future__ import annotations

import random
from typing import Any

import lightning as L
import numpy as np
import torch

from attnmem.tasks.family import datamodule_of

GENERATORS = (torch.Generator, random.Random, np.random.Generator, np.random.RandomState)


def _get(generator: Any) -> Any:
    if isinstance(generator, torch.Generator):
        return generator.get_state()
    if isinstance(generator, np.random.Generator):
        return generator.bit_generator.state
    return generator.get_state() if isinstance(generator, np.random.RandomState) else generator.getstate()


def _set(generator: Any, state: Any) -> None:
    if isinstance(generator, torch.Generator):
        generator.set_state(state)
    elif isinstance(generator, np.random.Generator):
        generator.bit_generator.state = state
    elif isinstance(generator, np.random.RandomState):
        generator.set_state(state)
    else:
        generator.setstate(state)


def collect(datamodule: Any = None) -> dict[str, Any]:
    """The global states of torch (and CUDA), numpy and python, and every generator the datamodule holds."""
    states: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    owned = vars(datamodule).items() if datamodule is not None else ()
    states["datamodule"] = {name: _get(g) for name, g in owned if isinstance(g, GENERATORS)}
    return states


def restore(states: dict[str, Any], datamodule: Any = None) -> None:
    """Put back the states `collect` returned."""
    torch.set_rng_state(states["torch"])
    np.random.set_state(states["numpy"])
    random.setstate(states["python"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
    for name, state in states.get("datamodule", {}).items():
        if datamodule is not None and isinstance(getattr(datamodule, name, None), GENERATORS):
            _set(getattr(datamodule, name), state)


class RNGState(L.Callback):
    """Saves the random states with every checkpoint and restores them when training resumes from one.

    Lightning's checkpoints hold weights, optimizer, schedulers and loop counters but no random states, so
    without this a resumed run shuffles, drops out and samples differently from one that never stopped.
    The states are those of the process that saves (rank 0 under DDP; every rank is seeded alike).
    """

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        checkpoint["rng_states"] = collect(datamodule_of(trainer))

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        if "rng_states" in checkpoint:
            restore(checkpoint["rng_states"], datamodule_of(trainer))
