"""Runs over several processes (Lightning DDP): the global batch, and Hydra jobs Lightning can relaunch."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, read_write

from attnmem.core.errors import UserError
from attnmem.runtime import console

__all__ = ["check_trainable", "job_scope", "requeued_checkpoint", "single_run_argv", "split_batch"]

# what Lightning's DDP launcher sets in the launching process (and never removes)
LAUNCH_ENV = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "LOCAL_RANK", "WORLD_SIZE")
# Hydra flags followed by a value
VALUE_FLAGS = ("-cp", "--config-path", "-cn", "--config-name", "-cd", "--config-dir")
# hydra overrides that concern only the sweep, not the run of one job
SWEEP_ONLY = ("hydra.mode", "hydra/launcher", "hydra.launcher", "hydra/sweeper", "hydra.sweeper", "hydra.sweep")


def check_trainable(module: torch.nn.Module, world_size: int) -> None:
    """Stop with one line when several processes would train a net without trainable parameters (DDP refuses it)."""
    if world_size > 1 and not any(p.requires_grad for p in module.parameters()):
        raise UserError(
            f"{type(module.net).__name__ if hasattr(module, 'net') else 'this model'} has no trainable parameters "
            f"(it stores its memory without gradients): there is nothing to train over {world_size} processes; "
            "use trainer=cpu or trainer=gpu"
        )


def split_batch(datamodule: Any, world_size: int) -> None:
    """Keep `data.batch_size` the global batch: each of `world_size` processes loads batch_size / world_size.

    DDP averages the gradients of the processes, so the optimizer sees the global batch, and an epoch takes
    as many steps as on one device: results compare with a one-device run at the same learning rate.
    """
    size = getattr(datamodule, "batch_size", None)
    if world_size == 1 or size is None:
        return
    if size % world_size:
        raise UserError(
            f"data.batch_size={size} is the global batch and must split evenly over the {world_size} "
            f"processes (trainer.devices x trainer.num_nodes): use a multiple of {world_size}"
        )
    datamodule.batch_size = size // world_size
    console.note(
        f"DDP over {world_size} processes: data.batch_size={size} is the global batch, {size // world_size} "
        f"per process; evaluation pads each split to a multiple of {world_size} examples, so up to "
        f"{world_size - 1} may count twice"
    )


def requeued_checkpoint(out_dir: Path) -> Path | None:
    """The run's last checkpoint when SLURM has requeued this job (time limit, preemption), else None.

    A requeued job runs again in the same directory (submitit pickles the resolved sweep); it resumes
    from the end of its last finished epoch.
    """
    restarts = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
    last = out_dir / "checkpoints" / "last.ckpt"
    if restarts < 1 or not last.is_file():
        return None
    console.note(f"SLURM requeued this job (restart {restarts}): resuming from {last}")
    return last


def single_run_argv(argv: list[str], hydra: DictConfig) -> list[str]:
    """The command line of one multirun job as a single run: its flags and overrides, without `-m`."""
    flags, i = [], 1
    while i < len(argv):
        if argv[i] in VALUE_FLAGS:
            flags += argv[i : i + 2]
            i += 2
            continue
        if argv[i].startswith("-") and argv[i] not in ("-m", "--multirun"):
            flags.append(argv[i])
        i += 1
    kept = [o for o in hydra.overrides.hydra if not o.lstrip("+~").startswith(SWEEP_ONLY)]
    return [argv[0], *flags, *hydra.overrides.task, *kept]


@contextmanager
def job_scope() -> Iterator[None]:
    """One Hydra job as Lightning's DDP launcher (`strategy=ddp`) must see it, tidied up afterwards.

    Lightning starts ranks > 0 by running the script's command line again with `hydra.run.dir` set to
    Hydra's run.dir. In a multirun that command line is the whole sweep and run.dir is not the job's
    directory: each child would run every job into a second multirun tree. For the job's duration the
    command line is this job's single run and run.dir its output directory (Hydra sets a fresh config
    for the next job). Afterwards the process group
    and the launcher's environment variables go, so the next job of a multirun starts its own processes.
    """
    argv, env = list(sys.argv), {key: os.environ.get(key) for key in LAUNCH_ENV}
    # HydraConfig.get is typed as its schema (HydraConf); what it returns is the config node, a DictConfig
    hydra = cast(DictConfig, HydraConfig.get()) if HydraConfig.initialized() else None
    try:
        if hydra is not None:
            with read_write(hydra):
                hydra.run.dir = hydra.runtime.output_dir
            if hydra.mode == RunMode.MULTIRUN:
                sys.argv = single_run_argv(argv, hydra)
        yield
    finally:
        sys.argv = argv
        for key, value in env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
