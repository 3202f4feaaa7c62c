"""`replicas=R` in a run: the checks, R family modules built from their own seeds, and the data they read (the
runtime's one call into the replicas package, `runtime.run.setup`, and its evaluation's)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import lightning as L
import torch
from hydra.utils import get_class
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint
from lightning.pytorch.trainer.states import RunningStage
from omegaconf import DictConfig, OmegaConf

from attnmem.core import compat
from attnmem.core.errors import UserError
from attnmem.replicas.module import Replicas
from attnmem.replicas.streams import ReplicaLoader, SharedLoader, Streams
from attnmem.tasks.family import FamilyModule

BYTES_PER_PARAMETER = 4 * 6  # float32: weights, gradient, two Adam moments, the best state, a batched copy


class ReplicaData(L.LightningDataModule):
    """A datamodule as R replicas read it: R shuffles of its training data, its evaluation data shared."""

    inner: Any  # a family's datamodule: its batch size, dims and loaders are its own

    def __init__(self, inner: L.LightningDataModule, streams: Streams) -> None:
        super().__init__()
        self.inner, self.streams = inner, streams

    def __getattr__(self, name: str) -> Any:
        if name in ("inner", "streams"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def batch_size(self) -> int:
        """The wrapped datamodule's batch size (DDP's split of the global batch sets it there)."""
        return self.inner.batch_size

    @batch_size.setter
    def batch_size(self, value: int) -> None:
        self.inner.batch_size = value

    def train_dataloader(self) -> ReplicaLoader:
        loaders = [self._prepared(self.inner.train_dataloader(), RunningStage.TRAINING, s) for s in self.streams.seeds]
        return ReplicaLoader(loaders, self.streams)

    def val_dataloader(self) -> Any:
        return self._shared(self.inner.val_dataloader(), RunningStage.VALIDATING)

    def test_dataloader(self) -> Any:
        return self._shared(self.inner.test_dataloader(), RunningStage.TESTING)

    def _shared(self, loaders: Any, stage: RunningStage) -> Any:
        if isinstance(loaders, (list, tuple)):
            return [SharedLoader(self._prepared(loader, stage), self.streams) for loader in loaders]
        return SharedLoader(self._prepared(loaders, stage), self.streams)

    def _prepared(self, loader: Any, stage: RunningStage, seed: int | None = None) -> Any:
        # what Lightning does to a loader it sees (these are inside ours): under DDP a distributed sampler, whose
        # shuffle a single run seeds with its seed (replica r: seed + r); worker seeding
        if self.trainer is None:
            return loader
        prepared = compat.process_dataloader(self.trainer, loader, stage)
        sampler = getattr(prepared, "sampler", None)
        if seed is not None and sampler is not None and isinstance(getattr(sampler, "seed", None), int):
            sampler.seed = seed
        return prepared

    def state_dict(self) -> dict[str, Any]:
        return self.inner.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.inner.load_state_dict(state_dict)


def check(cfg: DictConfig) -> int:
    """The number of replicas, or one line saying why `replicas` cannot be used with this config."""
    count = cfg.get("replicas", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise UserError(f"replicas={count}: expected an integer >= 1 (the number of seeds trained in this process)")
    if count == 1:
        return 1
    refusals = {
        "data.curriculum": cfg.data.get("curriculum") is not None,
        "task.tbptt_steps": (cfg.task or {}).get("tbptt_steps") is not None,
        "scheduler=ReduceLROnPlateau": str((cfg.scheduler or {}).get("_target_", "")).endswith(
            ("ReduceLROnPlateau", "schedules.plateau")
        ),
        "callbacks.linear_start.patience": OmegaConf.select(cfg, "callbacks.linear_start.patience") is not None,
    }  # under DDP each process holds every replica, its batches split as a single run's
    for option, refused in refusals.items():
        if refused:
            raise UserError(f"replicas={count} cannot be combined with {option} (it acts on one run's own metric "
                            "or steps): drop it, or run the seeds as separate jobs (replicas=1)")
    return count


def parse_select(cfg: DictConfig, monitor: str, mode: str) -> tuple[str, str]:
    """`replica_select=<key>:<min|max>` as (key, mode); the run's monitor when not given."""
    given = cfg.get("replica_select")
    if given is None:
        return monitor, mode
    key, _, how = str(given).rpartition(":")
    if how not in ("min", "max") or not key.startswith(("train/", "val/")):
        raise UserError(f"replica_select={given}: expected <metric>:<min|max> of a train/ or val/ metric, "
                        "e.g. replica_select=train/error:min or replica_select=val/acc:max")
    return key, how


def build(cfg: DictConfig, count: int, datamodule: L.LightningDataModule,
          family_module: Callable[[], FamilyModule]) -> tuple[Any, FamilyModule | Replicas]:
    """The datamodule and family module of the run: as they are for one replica; for R, `ReplicaData` and
    `Replicas`, replica r built under seed `seed + r`, applying the early-stopping callback's patience and
    `stopping_threshold` to each."""
    if count == 1:
        return datamodule, family_module()
    streams = Streams([cfg.seed + r for r in range(count)])
    members: list[FamilyModule] = []
    for r in range(count):
        with streams.use(r, torch_only=False):
            members.append(family_module())
    net = members[0].net
    if not any(p.requires_grad for p in net.parameters()):
        raise UserError(f"replicas={count}: {type(net).__name__} has no trainable parameters, so its replicas "
                        "would be identical: use replicas=1")
    _check_memory(net, count)
    stopping, checkpointing = (next((c for c in (cfg.get("callbacks") or {}).values()
                                     if c and issubclass(get_class(c._target_), kind)), None)
                               for kind in (EarlyStopping, ModelCheckpoint))
    # a run's saved config leaves them null: the family's own
    monitor, mode = cfg.get("monitor") or members[0].monitor, cfg.get("mode") or members[0].mode
    module = Replicas(members, streams=streams, monitor=monitor, mode=mode, select=parse_select(cfg, monitor, mode),
                      # a run reports the state its checkpoint callback picks by the monitor; with none, the last
                      keep_best=bool(checkpointing and checkpointing.get("monitor")),
                      patience=stopping.get("patience", 3) if stopping else None,
                      min_delta=float(stopping.get("min_delta", 0.0)) if stopping else 0.0,
                      stopping_threshold=stopping.get("stopping_threshold") if stopping else None)
    return ReplicaData(datamodule, streams), module


def callbacks(count: int, built: list[Any]) -> list[Any]:
    """The run's callbacks; for replicas, less early stopping (each replica stops on its own patience)."""
    return built if count == 1 else [c for c in built if not isinstance(c, EarlyStopping)]


def _check_memory(net: torch.nn.Module, count: int) -> None:
    # the replicas' parameters and their optimizer state must fit, with room for the activations
    per_replica = BYTES_PER_PARAMETER * sum(p.numel() for p in net.parameters())
    available = _available_bytes(next(net.parameters()).device)
    fits = int(available // 2 // max(per_replica, 1))
    if count > fits:
        raise UserError(f"replicas={count} needs about {count * per_replica / 2**30:.1f} GiB for the parameters and "
                        f"their optimizer state, more than half the {available / 2**30:.1f} GiB free: "
                        f"use replicas={max(fits, 1)} or fewer")


def _available_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
