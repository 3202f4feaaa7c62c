"""The replicas' random streams: the global states saved and set again, each loader's samplers given the epoch."""

from __future__ import annotations

import random

import lightning as L
import numpy as np
import torch
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler

from attnmem.replicas.streams import ReplicaLoader, Streams, collect_rng_states, set_rng_states


def _draw() -> tuple[torch.Tensor, np.ndarray, float]:
    return torch.rand(3), np.random.rand(3), random.random()


def test_set_rng_states_makes_every_library_draw_again_what_it_drew_after_collect():
    L.seed_everything(5, verbose=False)
    saved = collect_rng_states()
    assert set(saved) == {"torch", "torch.cuda", "numpy", "python"}  # Lightning's keys: its records load here
    first = _draw()
    set_rng_states(saved)
    again = _draw()
    assert torch.equal(first[0], again[0]) and np.array_equal(first[1], again[1]) and first[2] == again[2]
    version, state, gauss = saved["python"]
    set_rng_states({**saved, "python": [version, list(state), gauss]})  # as a checkpoint may hold it
    assert random.random() == first[2]


def test_replica_loader_gives_the_epoch_to_each_loaders_sampler_and_batch_sampler_once():
    data = list(range(8))
    sampler, batched = DistributedSampler(data, num_replicas=1, rank=0), DistributedSampler(data, num_replicas=1, rank=0)
    loaders = [DataLoader(data, sampler=sampler), DataLoader(data, batch_sampler=BatchSampler(batched, 2, False))]
    ReplicaLoader(loaders, Streams([0, 1])).set_epoch(3)
    assert sampler.epoch == batched.epoch == 3
