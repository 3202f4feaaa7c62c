"""`replicas=R`: R independent replicas of one family module trained in one process, each as its own single run.

Replica r is the family module a single run with `seed=seed+r` builds; it draws from its own random streams
(`replicas.streams`), is clipped by its own gradient norm, keeps its own best state by the monitor, stops early
on its own patience or `stopping_threshold` and, when its loss turns non-finite, stops there with its best state
(a single run's `FiniteLoss` would stop the run). One optimizer over all replicas' parameters is R separate ones for
elementwise optimizers (Adam, SGD). Their losses are summed, so each replica's gradient is its own. A model with a
batched path (`replicas.models.batched_path`) trains all replicas in one `vmap` or folded batch (`replicas.batch`),
their batches padded to one shape where its path names the keys that pad (MemN2N's stories hold as many slots as
each batch's longest); a step whose batches still differ, and the other models, loop over them.

Logged: every replica's metrics as `replicas/<r>/<key>`; while training the plain keys hold the replicas' mean (what
the progress bar, the checkpoint and the learning curves follow); in the final validation and test, the selected
replica's (`select`: a `train/` or `val/` key and `min|max`), with `replicas/mean/<key>` and `replicas/std/<key>`.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.strategies import ParallelStrategy
from torch import Tensor, nn

from attnmem.blocks.output import Output
from attnmem.core.errors import UserError
from attnmem.models.contract import AfterClipping
from attnmem.replicas.batch import Batched, aligned, serving, stackable
from attnmem.replicas.models import batched_path
from attnmem.replicas.streams import Streams
from attnmem.tasks import hooks, optim
from attnmem.tasks.family import FamilyModule, PlotsExamples, datamodule_of


class Replicas(L.LightningModule):
    """Trains `members` (one family module per replica) side by side; see the module docstring."""

    def __init__(self, members: Sequence[FamilyModule], *, streams: Streams, monitor: str, mode: str,
                 select: tuple[str, str], keep_best: bool = True, patience: int | None = None,
                 min_delta: float = 0.0, stopping_threshold: float | None = None) -> None:
        super().__init__()
        self.members = nn.ModuleList(members)  # registered: the checkpoint's `members.<r>.net...`
        self.replica_modules: list[FamilyModule] = list(members)  # the same, typed
        self.streams, self.monitor, self.mode, self.select, self.keep_best = streams, monitor, mode, select, keep_best
        self.patience, self.min_delta, self.threshold = patience, abs(min_delta), stopping_threshold
        path = batched_path(members[0].net)  # decided once: how the replicas run batched (None: a loop)
        self.batched = path is not None
        self.batched_forward = [Batched(path)] if path is not None else []  # a list: not a submodule
        self.model_draws = path is not None and path.draws_numbers
        self.replica_pads = path.pads if path is not None else {}
        self.after_clipping: list[Callable[[], None] | None] = [
            m.net.after_clipping if isinstance(m.net, AfterClipping) else None for m in members]
        r = len(members)
        self.best_score: list[float | None] = [None] * r
        self.best_state: list[dict[str, Tensor] | None] = [None] * r
        self.best_val: list[dict[str, float]] = [{} for _ in range(r)]
        self.last_val: list[dict[str, float]] = [{} for _ in range(r)]
        self.last_train: list[dict[str, float]] = [{} for _ in range(r)]
        self.wait, self.stopped = [0] * r, [""] * r  # "" running, else why it stopped
        self.selected = 0
        self.step_losses: dict[int, Tensor] = {}  # each running replica's loss at the last training step

    @property
    def net(self) -> nn.Module:
        """The selected replica's model."""
        return self.replica_modules[self.selected].net

    def active(self) -> list[int]:
        """The replicas still training."""
        return [r for r, why in enumerate(self.stopped) if not why]

    def training_step(self, batches: list[dict[str, Tensor]], batch_idx: int) -> Tensor | None:
        """The sum of the running replicas' losses, each on its own batch."""
        running = self.active()
        outs = None
        if self.batched and len(running) > 1:
            batches = list(batches)
            if self.model_draws and self.training:  # each replica's draws first (its path's `draws`), under its
                path = self.batched_forward[0].path  # stream, as its forward would make them
                for r in running:
                    with self.streams.use(r):
                        batches[r] = batches[r] | path.draws(self.replica_modules[r].net, batches[r])
            outs = self._batched_outputs(running, batches)
        total, self.step_losses = None, {}
        for r in running:
            served = serving(self.replica_modules[r], self.batched_forward[0].path.served(outs[r])) if outs else None
            with self.streams.use(r), served or nullcontext():
                loss = self.replica_modules[r].shared_step(batches[r], "train")
            if loss is None:  # nothing to optimise in this batch
                continue
            self.step_losses[r] = loss.detach()
            if not torch.isfinite(loss):
                self.stopped[r] = f"non-finite loss at step {self.global_step}"
                continue
            total = loss if total is None else total + loss
        if not self.active():
            self.trainer.should_stop = True
        return total

    def _batched_outputs(self, running: list[int], batches: list[dict[str, Tensor]]) -> dict[int, Output] | None:
        """The running replicas' outputs of one batched forward, their batches padded to one shape where the model
        names what pads (its path's `pads`); None where they still differ (each replica then runs on its own)."""
        together = aligned([batches[r] for r in running], self.replica_pads)
        if not stackable(together):
            return None
        return dict(zip(running, self.batched_forward[0]([self.replica_modules[r].net for r in running], together)))

    def _eval_step(self, split: str, batch: dict[str, Tensor], dataloader_idx: int) -> None:
        fitting = self.trainer.state.fn == "fit"
        for r, member in enumerate(self.replica_modules):
            if fitting and self.stopped[r]:
                continue
            with self.streams.use(r):
                member.shared_step(batch, split, dataloader_idx)

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        """Every replica (every running one while fitting) on the same batch."""
        self._eval_step("val", batch, dataloader_idx)

    def test_step(self, batch: dict[str, Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        """Every replica on the same batch."""
        self._eval_step("test", batch, dataloader_idx)

    def on_train_epoch_end(self) -> None:
        for r in self.active():
            self.last_train[r] = _floats(self.replica_modules[r].epoch_metrics("train"))
        self._check_select("train/", self.last_train)
        self._log_replicas(self.last_train)

    def on_validation_epoch_end(self) -> None:
        if self.trainer.state.fn != "fit":
            self._log_final("val", [_floats(m.epoch_metrics("val")) for m in self.replica_modules])
            return
        latest = [dict(v) for v in self.best_val]
        for r in self.active():
            latest[r] = _floats(self.replica_modules[r].epoch_metrics("val"))
            if not self.trainer.sanity_checking:
                self.last_val[r] = latest[r]
                self._keep_best(r, latest[r])
        self._check_select("val/", latest)
        self._log_replicas(latest)
        if not self.active():
            self.trainer.should_stop = True

    def on_test_epoch_end(self) -> None:
        self._log_final("test", [_floats(m.epoch_metrics("test")) for m in self.replica_modules])

    def _check_select(self, split: str, values: list[dict[str, float]]) -> None:
        key, logged = self.select[0], set().union(*values)
        if key.startswith(split) and logged and key not in logged:
            names = ", ".join(sorted(k for k in logged if "/" not in k.removeprefix(split)))
            raise UserError(f"replica_select={key}:{self.select[1]}: the run logs no {key}; it logs {names}: "
                            f"pass replica_select=<one of them>:<min|max>")

    def _keep_best(self, r: int, logged: dict[str, float]) -> None:
        # a replica's best state by the monitor, its own early stopping (EarlyStopping's rules: threshold, patience)
        score, best = logged.get(self.monitor), self.best_score[r]
        if score is None or math.isnan(score):
            return
        better = best is None or (score < best if self.mode == "min" else score > best)
        if better:
            self.best_score[r], self.best_val[r] = score, logged
        if better and self.keep_best:
            self.best_state[r] = {k: v.detach().clone() for k, v in self.replica_modules[r].net.state_dict().items()}
        delta, limit = self.min_delta, self.threshold
        improved = best is None or (score < best - delta if self.mode == "min" else score > best + delta)
        self.wait[r] = 0 if improved else self.wait[r] + 1
        if limit is not None and (score < limit if self.mode == "min" else score > limit):
            self.stopped[r] = f"{self.monitor} past stopping_threshold {limit} at epoch {self.current_epoch}"
        elif self.patience is not None and self.wait[r] >= self.patience:
            self.stopped[r] = f"early stopping at epoch {self.current_epoch}"

    def _log_replicas(self, values: list[dict[str, float]]) -> None:
        # while fitting: each replica's keys, and the plain keys as the replicas' mean
        mean = {k: sum(d[k] for d in values if k in d) / sum(k in d for d in values) for k in set().union(*values)}
        self.log_dict(per_replica(values) | mean, prog_bar=False, add_dataloader_idx=False)

    def _log_final(self, split: str, values: list[dict[str, float]]) -> None:
        if split == "val":
            self.selected = self.choose(values)
        self.log_dict(dict(values[self.selected]) | summary(values) | per_replica(values), add_dataloader_idx=False)

    def choose(self, val: list[dict[str, float]]) -> int:
        """The replica the selection rule picks: by its last training epoch's or its evaluated validation metric."""
        key, mode = self.select
        values = self.last_train if key.startswith("train/") else val
        scores = [d.get(key, math.nan) for d in values]
        ranked = [s if not math.isnan(s) else (math.inf if mode == "min" else -math.inf) for s in scores]
        return ranked.index(min(ranked) if mode == "min" else max(ranked))

    def use_best(self) -> None:
        """Give every replica that recorded one its best state by the monitor."""
        for member, state in zip(self.replica_modules, self.best_state):
            if state is not None:
                member.net.load_state_dict(state)

    def setup(self, stage: str) -> None:
        # Lightning's parallel strategies (DDP, FSDP, DeepSpeed) re-seed a single run's global states with its seed
        # as each stage sets up (`reset_seed`), after the model is built: each replica's stream starts again too
        if isinstance(self.trainer.strategy, ParallelStrategy):
            self.streams.reset()

    def on_validation_start(self) -> None:
        if self.trainer.state.fn != "fit":
            self.use_best()
        if self.trainer.sanity_checking:  # Lightning isolates the global random states from the sanity check
            self.before_sanity = self.streams.state_dict()

    def on_validation_end(self) -> None:
        if self.trainer.sanity_checking:
            self.streams.load_state_dict(self.before_sanity)

    def on_test_start(self) -> None:
        self.use_best()

    def report(self) -> dict[str, Any]:
        """The run's replica figures beyond the evaluation's: each replica's last training metrics, the selected
        one's as the plain keys, their mean and std, how each ended, and which was selected."""
        train = self.last_train
        stopped = {f"replicas/{r}/stopped": why for r, why in enumerate(self.stopped) if why}
        return (dict(train[self.selected]) | summary(train) | stopped | per_replica(train)
                | {"replicas": len(self.replica_modules), "replica_selected": self.selected})

    def on_fit_start(self) -> None:
        """On a CPU, a loop where the model's batched path does not pay there (`Vmapped.on_cpu`)."""
        self.batched = self.batched and (self.device.type != "cpu" or self.batched_forward[0].path.on_cpu)

    def on_after_backward(self) -> None:
        if self.batched:
            self.batched_forward[0].pad_gradients([member.net for member in self.replica_modules])

    def configure_gradient_clipping(self, optimizer: torch.optim.Optimizer, gradient_clip_val: float | None = None,
                                    gradient_clip_algorithm: str | None = None) -> None:
        """Clip each replica's gradients by its own norm (or values, or per weight matrix), as its single run would;
        then its net's `after_clipping()`, where it has one."""
        for member, after_clipping in zip(self.replica_modules, self.after_clipping):
            if gradient_clip_val and getattr(member, "clip_per_weight", False):  # the family module's own rule
                member.configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)
                continue
            params = [p for p in member.parameters() if p.grad is not None]
            if gradient_clip_val and gradient_clip_algorithm == "value":
                nn.utils.clip_grad_value_(params, gradient_clip_val)
            elif gradient_clip_val:
                nn.utils.clip_grad_norm_(params, gradient_clip_val)
            if after_clipping is not None:
                after_clipping()

    def configure_optimizers(self) -> Any:
        """One optimizer over every replica's parameters (elementwise: R separate ones), and its scheduler."""
        first = self.replica_modules[0]
        factory = first.optimizer_factory
        if "foreach" in inspect.signature(factory).parameters and "foreach" not in getattr(factory, "keywords", {}):
            factory = functools.partial(factory, foreach=True)  # one call over all replicas' tensors, same numbers
        return optim.configure(self.parameters(), factory, first.scheduler_factory)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        data = datamodule_of(self.trainer)
        hooks.record_model(self.replica_modules[0].net, checkpoint, data)
        inner = getattr(data, "inner", None)  # `ReplicaData`'s: evaluating and loading the run look the vocabulary
        if inner is not None:  # up by the datamodule's name
            checkpoint[type(inner).__qualname__] = inner.state_dict()
        checkpoint["replicas"] = {
            "best_score": self.best_score, "best_state": self.best_state, "best_val": self.best_val,
            "last_val": self.last_val,
            # a running replica's epoch so far where the checkpoint comes before this module's epoch end (at
            # validation's end): evaluating the checkpoint restores this, as resuming does
            "last_train": [(_so_far(m) if not why else {}) or last
                           for m, why, last in zip(self.replica_modules, self.stopped, self.last_train)],
            "wait": self.wait, "stopped": self.stopped,
            "sums": [hooks.sums_state(m, synced=True) for m in self.replica_modules],
            "streams": self.streams.state_dict(),
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        saved = checkpoint["replicas"]
        self.best_score, self.best_state, self.best_val = saved["best_score"], saved["best_state"], saved["best_val"]
        self.last_val = saved["last_val"]
        self.last_train, self.wait, self.stopped = saved["last_train"], saved["wait"], saved["stopped"]
        self.streams.load_state_dict(saved["streams"])
        for member, sums in zip(self.replica_modules, saved.get("sums", []) if self.global_rank == 0 else []):
            hooks.load_sums(member, sums)  # all processes' sums: the other processes start from zero

    def pick_for_plots(self) -> int:
        """The replica whose figures the run draws: the selection rule on the validation of the state each
        replica reports (its best, or its last where the run keeps no best)."""
        self.selected = self.choose(self.best_val if self.keep_best else self.last_val)
        return self.selected

    def describe(self) -> str:
        """One line: the replicas' seeds and how they run."""
        seeds = self.streams.seeds
        path = "a loop over the replicas (its model has no batched path)"
        if self.batched:
            batched = self.batched_forward[0].path
            path = ("one batch of all replicas' rows" if batched.folds else "one batched vmap") + (
                "" if batched.on_cpu else " on an accelerator (on a CPU a loop, faster there)")
        return f"replicas={len(seeds)} (seeds {seeds[0]}..{seeds[-1]}): {path}"

    def family_modules(self) -> list[FamilyModule]:
        """The replicas' family modules."""
        return list(self.replica_modules)

    def curves_prefix(self) -> str:
        """The logged keys of the replica whose figures the run draws (`pick_for_plots`): `replicas/<r>/`."""
        return f"replicas/{self.pick_for_plots()}/"

    def plot_examples(self, datamodule: L.LightningDataModule, out_dir: Path, num_examples: int) -> list[Path]:
        """The selected replica's figures."""
        self.use_best()
        self.pick_for_plots()
        member = self.replica_modules[self.selected]
        if not isinstance(member, PlotsExamples):
            return []
        return member.plot_examples(getattr(datamodule, "inner", datamodule), out_dir, num_examples)


def per_replica(values: list[dict[str, float]]) -> dict[str, float]:
    """Every replica's values under `replicas/<r>/<key>`."""
    return {f"replicas/{r}/{k}": v for r, d in enumerate(values) for k, v in d.items()}


def summary(values: list[dict[str, float]]) -> dict[str, float]:
    """`replicas/mean/<key>` and `replicas/std/<key>` (sample std; 0 for one value) of the keys all replicas have."""
    keys = set.intersection(*(set(d) for d in values)) if values else set()
    out = {}
    for key in sorted(keys):
        column = torch.tensor([d[key] for d in values], dtype=torch.float64)
        out[f"replicas/mean/{key}"] = float(column.mean())
        out[f"replicas/std/{key}"] = float(column.std()) if len(column) > 1 else 0.0
    return out


def _so_far(member: FamilyModule) -> dict[str, float]:
    """The member's training metrics of the epoch so far ({} before its first batch), its sums left as they were."""
    kept = hooks.sums_state(member)
    try:
        return _floats(member.epoch_metrics("train"))
    finally:
        hooks.load_sums(member, kept)


def _floats(logged: dict[str, Tensor]) -> dict[str, float]:
    return {k: float(v) for k, v in logged.items()}
