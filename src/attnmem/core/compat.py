"""Every private name of torch, Lightning, Hydra and OmegaConf that attnmem uses, fenced in this one module.

(`attnmem.tools.compat`, the `attnmem-compat` table of which model trains on which data, is unrelated.)

Each private name is one small function or constant here; a comment names the upstream symbol, the public
alternative or why there is none, and the fallback taken where the installed version lacks the symbol (a public
path where one exists). No other module of `src/` touches a private name of another package (`ruff check
--preview --select SLF001,PLC2701 src`); `tests/core/test_core_compat.py` checks that each name is still upstream,
naming the installed version, and that each fallback gives the same result; `pyproject.toml` bounds the
versions. What cannot be a function here, the private methods our subclasses of Lightning's classes override or
call, is listed in `SUBCLASSED`. Every library is imported inside the functions that use it: `attnmem.nn` loads
no Lightning, Hydra or OmegaConf through this module, and the command line's light paths (`--help`, an option's
type error) no torch.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

from attnmem.core.errors import UserError

if TYPE_CHECKING:
    import torch
    from torch import Tensor

__all__ = [
    "SUBCLASSED", "apply_unbound", "batches_that_stepped", "checkpoint_step",
    "full_key", "hydra_callbacks", "maybe_batched", "process_dataloader", "set_last_lr",
    "upstream",
]


def upstream(module: str, name: str) -> Any:
    """The private `module.name`, or None where the installed version has no such module or name."""
    loaded = sys.modules.get(module)
    if loaded is None:
        try:
            loaded = importlib.import_module(module)
        except ImportError:
            return None
    return getattr(loaded, name, None)


# --- torch ---------------------------------------------------------------------------------------------------

# torch._C._are_functorch_transforms_active, torch._functorch.utils.unwrap_dead_wrappers and the C `apply` of
# torch._C._FunctionBase (`super(torch.autograd.Function, cls).apply`): torch's own `autograd.Function.apply`
# outside torch.func transforms, less binding the arguments to `forward`'s signature (`inspect.signature` on every
# call, ~15 µs). Public path: `torch.autograd.Function.apply`, which binds; it is the fallback, and the path under
# vmap and friends.
def apply_unbound(cls: type[torch.autograd.Function], args: tuple[Any, ...]) -> Any:
    """`cls.apply(*args)` without torch's binding of `args` to `forward`'s signature, where torch allows it."""
    import torch  # here, not at the top: the command line's light paths import this module
    active = upstream("torch._C", "_are_functorch_transforms_active")
    unwrap = upstream("torch._functorch.utils", "unwrap_dead_wrappers")
    if active is None or unwrap is None or active():
        return torch.autograd.Function.apply.__func__(cls, *args)  # type: ignore[attr-defined]
    return super(torch.autograd.Function, cls).apply(*unwrap(args))  # type: ignore[misc]


# torch._C._functorch.is_batchedtensor: whether a tensor is one of vmap's BatchedTensors. No public test exists
# (to Python it is a plain Tensor); fallback: True ("it may be"), so the caller takes its path that also works
# under vmap (MemN2N: every memory slot encoded rather than the real sentences packed; the same logits).
def maybe_batched(tensor: Tensor) -> bool:
    """Whether `tensor` may be a `vmap` BatchedTensor (always True where torch no longer says)."""
    is_batched = upstream("torch._C._functorch", "is_batchedtensor")
    return True if is_batched is None else bool(is_batched(tensor))


# torch.optim.lr_scheduler.LRScheduler._last_lr: what `get_last_lr()` returns until the next `step()`. No public
# setter: a scheduler restarted by hand (`last_epoch = 0`) reports its restored lr only through it (Lightning's
# LearningRateMonitor reads `get_last_lr()`). Fallback: nothing set where a scheduler has no such attribute.
def set_last_lr(scheduler: Any, lrs: list[float]) -> None:
    """Make `scheduler.get_last_lr()` report `lrs` until its next step."""
    if hasattr(scheduler, "_last_lr"):
        scheduler._last_lr = list(lrs)


# --- Lightning -----------------------------------------------------------------------------------------------

# Lightning's private methods and attributes that our subclasses override or call, by the class they subclass:
# an override has to carry the upstream name, so these cannot be functions here. There is no public hook for what
# they do (`last.ckpt` every epoch, an early stopping that waits for its
# metric, a CSV log kept on resume); `tests/core/test_core_compat.py` checks that each is still upstream and that the
# subclasses use no other.
SUBCLASSED: dict[str, tuple[str, ...]] = {
    # callbacks/checkpoint.py: AtomicModelCheckpoint
    "lightning.pytorch.callbacks.ModelCheckpoint": (
        "_monitor_candidates", "_save_last_checkpoint", "_should_save_on_train_epoch_end",
        "_should_skip_saving_checkpoint",
    ),
    # callbacks/early_stopping.py: EarlyStopping
    "lightning.pytorch.callbacks.EarlyStopping": ("_run_early_stopping_check",),
    # callbacks/csv_logger.py: CSVLogger and its writer
    "lightning.pytorch.loggers.CSVLogger": ("_experiment", "_fs"),
    "lightning.pytorch.loggers.csv_logs.ExperimentWriter": ("_check_log_dir_exists", "_rewrite_with_new_header"),
}


# lightning.pytorch.loops.training_epoch_loop._TrainingEpochLoop._batches_that_stepped: the step the loggers log
# a row at. No public counter; fallback: the batches the fit loop completed (`batch_progress.total.completed`),
# the same count without gradient accumulation (which truncated BPTT, the one family stepping more than once a
# batch, refuses).
def batches_that_stepped(trainer: Any) -> int:
    """The batches of this fit (a resumed one's included) after which the optimizer stepped."""
    loop = trainer.fit_loop.epoch_loop
    stepped = getattr(loop, "_batches_that_stepped", None)
    return loop.batch_progress.total.completed if stepped is None else int(stepped)


# The same counter in a checkpoint: the key "_batches_that_stepped" of its fit loop's epoch loop state. Fallback
# (a checkpoint without it): its `global_step`, public, the optimizer steps.
def checkpoint_step(state: dict[str, Any]) -> int:
    """The step at which a loaded checkpoint (`torch.load`'s dict) resumes the loggers."""
    loop = state.get("loops", {}).get("fit_loop", {}).get("epoch_loop.state_dict", {})
    return int(loop.get("_batches_that_stepped", state.get("global_step", 0)))


# lightning.pytorch.trainer.connectors.data_connector._process_dataloader: what the trainer does to a loader it is
# given (a distributed sampler under DDP, the strategy's processing, worker seeding); `replicas.build` applies it
# to the loaders inside its own, which the trainer never sees. No public path; fallback, for one process: the
# strategy's `process_dataloader` and the worker seeding (`pl_worker_init_function`, public). Under a parallel
# strategy (a distributed sampler needed) no fallback: one line.
def process_dataloader(trainer: Any, loader: Any, stage: Any) -> Any:
    """`loader` as the trainer prepares one it is given for `stage` (a `RunningStage`)."""
    process = upstream("lightning.pytorch.trainer.connectors.data_connector", "_process_dataloader")
    if process is not None:
        return process(trainer, trainer.state.fn, stage, loader)
    import lightning

    if trainer.world_size > 1:
        raise UserError(f"replicas=R under a parallel strategy needs Lightning's _process_dataloader, which lightning "
                        f"{lightning.__version__} lacks: pip install 'attnmem[train]' for a Lightning it supports")
    from functools import partial

    from lightning.fabric.utilities.seed import pl_worker_init_function

    loader = trainer.strategy.process_dataloader(loader)
    if int(os.environ.get("PL_SEED_WORKERS", 0)) and getattr(loader, "worker_init_fn", False) is None:
        loader.worker_init_fn = partial(pl_worker_init_function, rank=trainer.global_rank)
    return loader


# --- Hydra and OmegaConf -------------------------------------------------------------------------------------

# hydra._internal.callbacks.Callbacks: the `hydra.callbacks` of a config, which a launcher calls around each job
# (`on_job_start`, `on_job_end`); `tools.sweep` launches jobs without Hydra's multirun, which builds it internally.
# Public path: the callbacks instantiated with `hydra.utils.instantiate` and called in turn, the fallback.
def hydra_callbacks(cfg: Any) -> Any:
    """The callbacks of `cfg.hydra.callbacks` as a Hydra launcher calls them."""
    callbacks = upstream("hydra._internal.callbacks", "Callbacks")
    return callbacks(cfg) if callbacks is not None else _Callbacks(cfg)


class _Callbacks:
    """Hydra's `Callbacks` from public parts: the `*_start` hooks in order, the `*_end` ones in reverse, each one's
    error a warning."""

    def __init__(self, cfg: Any) -> None:
        from hydra.utils import instantiate
        from omegaconf import OmegaConf

        found = OmegaConf.select(cfg, "hydra.callbacks") if cfg is not None else None
        self.callbacks = [instantiate(params) for params in (found or {}).values()]

    def __getattr__(self, hook: str) -> Any:
        if not hook.startswith("on_"):
            raise AttributeError(hook)

        def notify(**kwargs: Any) -> None:
            import warnings

            for c in reversed(self.callbacks) if hook.endswith("_end") else self.callbacks:
                try:
                    getattr(c, hook)(**kwargs)
                except Exception as e:  # as Hydra: a callback's error does not stop the job
                    warnings.warn(f"Callback {type(c).__name__}.{hook} raised {type(e).__name__}: {e}", stacklevel=2)

        return notify


# omegaconf's Node._get_full_key: a node's dotted path from its config's root ("model.hops"). No public API gives
# it; fallback: "" (a message then names the option without its group).
def full_key(config: Any) -> str:
    """The dotted path of `config` (a DictConfig) in the config it belongs to; "" for the root."""
    get = getattr(type(config), "_get_full_key", None)
    return "" if get is None else str(get(config, None))
