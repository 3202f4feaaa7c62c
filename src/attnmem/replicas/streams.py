"""Each replica's own random streams, and the loaders that draw from them: replica r sees what `seed=seed+r` would.

A single run draws from the global random states: the model's initialisation, each epoch's shuffle (the
DataLoader's iterator takes its seed from torch's global state), dropout and noise at each step. `Streams`
keeps one set of global states per replica and swaps it in around everything replica r does, so replica r
consumes its stream in the order its single run does. Around a step or a batch only torch's state (CPU and
CUDA) is swapped, as a step here draws nothing from numpy or Python's `random` and their states are slow to
swap; around the creation of an iterator, all of them.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import lightning as L
import numpy as np
import torch


class Streams:
    """One set of global random states per seed in `seeds`; `use(r)` makes replica r's the global one."""

    def __init__(self, seeds: Sequence[int]) -> None:
        self.seeds: list[int] = list(seeds)
        self.states: list[dict[str, Any]] = []
        self.reset()

    def reset(self) -> None:
        """Start every stream again from its seed, as `seed_everything` and Lightning's `reset_seed` start a run's."""
        outer, outer_seed = collect_rng_states(), os.environ.get("PL_GLOBAL_SEED")
        self.states = []
        for seed in self.seeds:
            L.seed_everything(seed, workers=True, verbose=False)
            self.states.append(collect_rng_states())
        set_rng_states(outer)
        if outer_seed is not None:  # the run's seed, which Lightning gives DDP's samplers and the workers
            os.environ["PL_GLOBAL_SEED"] = outer_seed

    def __len__(self) -> int:
        return len(self.states)

    @contextmanager
    def use(self, r: int, *, torch_only: bool = True) -> Iterator[None]:
        """Replica r's states as the global ones inside the block; all of them with `torch_only=False`."""
        swap_in, swap_out = (_torch_states, _set_torch_states) if torch_only else (collect_rng_states, set_rng_states)
        outer = swap_in()
        swap_out(self.states[r])
        try:
            yield
        finally:
            self.states[r] |= swap_in()
            swap_out(outer)

    def state_dict(self) -> list[dict[str, Any]]:
        """The streams' states, for a checkpoint."""
        return [dict(s) for s in self.states]

    def load_state_dict(self, states: list[dict[str, Any]]) -> None:
        """Continue the streams a checkpoint saved."""
        self.states = [dict(s) for s in states]


def collect_rng_states() -> dict[str, Any]:
    """The global random states of torch, torch.cuda, numpy and Python (the keys of Lightning's own record)."""
    return {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state(),
            "torch.cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def set_rng_states(states: dict[str, Any]) -> None:
    """Make `states` (`collect_rng_states`) the global random states."""
    torch.set_rng_state(states["torch"])
    if states.get("torch.cuda"):
        torch.cuda.set_rng_state_all(states["torch.cuda"])
    if "numpy" in states:
        np.random.set_state(states["numpy"])
    version, state, gauss = states["python"]
    random.setstate((version, tuple(state), gauss))  # a checkpoint may hold the state tuple as a list


def _torch_states() -> dict[str, Any]:
    states: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["torch.cuda"] = torch.cuda.get_rng_state_all()
    return states


def _set_torch_states(states: dict[str, Any]) -> None:
    torch.set_rng_state(states["torch"])
    if "torch.cuda" in states and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.set_rng_state_all(states["torch.cuda"])


class ReplicaLoader:
    """The training loader of R replicas: each step a list of R batches, replica r's shuffled from its stream."""

    def __init__(self, loaders: Sequence[Iterable[Any]], streams: Streams) -> None:
        self.loaders, self.streams = list(loaders), streams

    def __len__(self) -> int:
        return len(self.loaders[0])  # type: ignore[arg-type]

    @property
    def dataset(self) -> Any:
        """The dataset every replica shuffles (what the manifest counts as the split's examples)."""
        return getattr(self.loaders[0], "dataset", None)

    @property
    def sampler(self) -> ReplicaLoader:
        """Lightning gives each epoch's number to `loader.sampler.set_epoch`: here, to `set_epoch`."""
        return self

    def set_epoch(self, epoch: int) -> None:
        """Pass the epoch to the replicas' loaders' samplers (the algorithmic tasks draw each epoch's batches by it)."""
        for loader in self.loaders:
            found = (getattr(loader, "sampler", None), getattr(getattr(loader, "batch_sampler", None), "sampler", None))
            for sampler in {id(s): s for s in found if s is not None}.values():  # each sampler once
                if callable(getattr(sampler, "set_epoch", None)):
                    sampler.set_epoch(epoch)

    def __iter__(self) -> Iterator[list[Any]]:
        iterators = []
        for r, loader in enumerate(self.loaders):
            with self.streams.use(r, torch_only=False):
                iterators.append(iter(loader))
        while True:
            batches = []
            for r, iterator in enumerate(iterators):
                with self.streams.use(r):
                    batch = next(iterator, None)
                if batch is None:
                    return
                batches.append(batch)
            yield batches


class SharedLoader:
    """An evaluation loader every replica reads as it is; each replica's stream pays what its iterator draws."""

    def __init__(self, loader: Iterable[Any], streams: Streams) -> None:
        self.loader, self.streams = loader, streams

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    @property
    def dataset(self) -> Any:
        """The dataset every replica reads."""
        return getattr(self.loader, "dataset", None)

    def __iter__(self) -> Iterator[Any]:
        # a generator, so Lightning's check that the loader is iterable draws nothing; a DataLoader's iterator
        # draws its base seed from the global state, which each replica's stream pays as its single run does
        iterators = []
        for r in range(len(self.streams)):
            with self.streams.use(r, torch_only=False):
                iterators.append(iter(self.loader))
        yield from iterators[0]
