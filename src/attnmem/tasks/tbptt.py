"""Truncated backpropagation through time for the `sequence` family (`task.tbptt_steps=k`).

The training sequence is cut along T into chunks of k steps; the model runs them in order, carrying
its recurrent state from one chunk to the next but detached, so no gradient crosses a chunk boundary
(Williams & Peng 1990, "An efficient gradient-based algorithm for on-line training of recurrent network
trajectories"; Sutskever 2013, §2.8.6); each chunk's loss makes one optimiser step. Lightning 2.x no
longer does this itself, so the family module trains by manual optimisation and does here what the
automatic loop would: gradient clipping as the trainer asks, and the scheduler steps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

import torch
from lightning.pytorch.core.optimizer import LightningOptimizer
from torch import Tensor, nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import ReduceLROnPlateau

from attnmem.core.errors import UserError
from attnmem.models.contract import CarriesState

if TYPE_CHECKING:  # the sequence family's module imports this module
    from attnmem.tasks.sequence import SequenceTask

KEYS = ("inputs", "targets", "mask")  # the batch's tensors along time


def check(tbptt_steps: int | None, net: nn.Module) -> None:
    """Stop with one line naming `task.tbptt_steps` when it is below 1 or the model cannot carry its state."""
    if tbptt_steps is None:
        return
    if tbptt_steps < 1:
        raise UserError(
            f"task.tbptt_steps={tbptt_steps}: a chunk needs at least 1 step; set task.tbptt_steps=k "
            "with k >= 1, or null for full BPTT"
        )
    if not isinstance(net, CarriesState):
        raise UserError(
            f"task.tbptt_steps={tbptt_steps}: {type(net).__name__} is not recurrent (it has no "
            "run_chunk/initial_state); use model=bptt_rnn|ntm|rnn_sequence, or drop task.tbptt_steps"
        )


def detach(state: Any) -> Any:
    """The state with every tensor detached from the graph of the chunk that made it (tuples keep their type)."""
    if isinstance(state, Tensor):
        return state.detach()
    parts = [detach(s) for s in state]
    return type(state)(*parts) if hasattr(state, "_fields") else type(state)(parts)


def chunks(batch: dict[str, Tensor], steps: int) -> list[dict[str, Tensor]]:
    """The batch cut along time into pieces of `steps` (the last may be shorter); other keys are left out."""
    pieces = {key: batch[key].split(steps, dim=1) for key in KEYS}
    return [dict(zip(KEYS, parts, strict=True)) for parts in zip(*pieces.values(), strict=True)]


def run_chunks(net: CarriesState, batch: dict[str, Tensor], steps: int) -> Iterator[tuple[dict[str, Tensor], Any]]:
    """Each chunk and the model's output on it, the state carried over detached from the previous chunk."""
    state = net.initial_state(len(batch["inputs"]))
    for chunk in chunks(batch, steps):
        out, state = net.run_chunk(chunk["inputs"], state)
        yield chunk, out
        state = detach(state)


def train_batch(
    module: SequenceTask,
    batch: dict[str, Tensor],
    loss_fn: Callable[[Tensor, dict[str, Tensor]], tuple[Tensor, Tensor, Tensor]],
) -> Tensor:
    """One optimiser step per chunk that has output bits; `loss_fn(logits, chunk)` gives the chunk's (summed
    nats, bit errors per sequence (B,), bits); returns the batch's sums for the family's metrics."""
    assert module.tbptt_steps is not None  # the module trains by truncated BPTT
    trainer = module.trainer
    optimizer = cast(LightningOptimizer, module.optimizers())  # one optimizer: `optim.configure` makes one
    nats, bits = batch["inputs"].new_zeros(()), batch["inputs"].new_zeros(())
    errors = batch["inputs"].new_zeros(len(batch["inputs"]))  # (B,) over the chunks of each sequence
    # the net carries its state: `check` refused any other when the module was built
    for chunk, out in run_chunks(cast(CarriesState, module.net), batch, module.tbptt_steps):
        chunk_nats, chunk_errors, chunk_bits = loss_fn(out.pred, chunk)
        nats, errors, bits = nats + chunk_nats.detach(), errors + chunk_errors, bits + chunk_bits
        if not chunk_bits or 0 <= trainer.max_steps <= trainer.global_step:
            continue  # no output phase in this chunk (no loss), or the step limit reached mid-batch
        optimizer.zero_grad()
        module.manual_backward(chunk_nats / chunk_bits)
        # with the trainer's gradient_clip_val / gradient_clip_algorithm; Lightning makes the LightningOptimizer an
        # instance of its optimizer's class
        module.clip_gradients(cast(Optimizer, optimizer))
        optimizer.step()
        step_schedulers(module, "step", trainer.global_step)
    return torch.stack([nats, errors.sum(), (errors == 0).sum(), errors.new_tensor(len(errors)), bits])


def step_schedulers(module: SequenceTask, interval: str, count: int) -> None:
    """Step the schedulers of `interval` ("step" or "epoch") whose frequency divides `count`, as Lightning's loop
    does under automatic optimisation (a ReduceLROnPlateau with its monitored metric, once it is logged)."""
    for config in module.trainer.lr_scheduler_configs:
        if config.interval != interval or count % config.frequency:
            continue
        if isinstance(config.scheduler, ReduceLROnPlateau):
            monitor = module.scheduler_monitor
            metric = module.trainer.callback_metrics.get(monitor) if monitor is not None else None
            if metric is not None:
                config.scheduler.step(metric)
        else:
            config.scheduler.step()


def keep_monitor(module: SequenceTask, configured: Any) -> Any:
    """`configured` (what `configure_optimizers` returns) without its scheduler's `monitor`, which is kept as
    `module.scheduler_monitor`: Lightning drops it, with a warning, under manual optimisation."""
    scheduler = configured.get("lr_scheduler", {}) if isinstance(configured, dict) else {}
    module.scheduler_monitor = scheduler.pop("monitor", None)
    return configured


def manual_optimisation(module: SequenceTask) -> None:
    """Switch the module to manual optimisation, from its `setup("fit")`.

    Lightning refuses `trainer.gradient_clip_val` under manual optimisation (it would be ignored) in a check
    that runs before `setup`; `train_batch` clips with it instead. The switch stays after fitting: the
    trainer's `global_step` counts the manual optimiser steps only while it is on.
    """
    if module.trainer.accumulate_grad_batches != 1:
        raise UserError(
            f"task.tbptt_steps={module.tbptt_steps} steps the optimiser once per chunk: "
            f"trainer.accumulate_grad_batches={module.trainer.accumulate_grad_batches} cannot go with "
            "it; set trainer.accumulate_grad_batches=1"
        )
    module.automatic_optimization = False
