"""The LightningModule of the `sequence` family: binary vectors in, binary vectors out on a masked output phase."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.core.dims import SequenceDims
from attnmem.evaluation import memory_plots, plots
from attnmem.models.contract import MemoryTrace, ReadHeads
from attnmem.tasks import tbptt
from attnmem.tasks.family import FamilyModule
from attnmem.tasks.metrics import Sums, SumsDict, counted

FIELDS = ("nats", "errors", "exact", "count", "bits")  # per test set: cost, bit errors, exact sequences, sequences


def masked_bce(logits: Tensor, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    """BCE with logits summed over the output phase (`mask`), the bit errors per sequence (B,), the bits counted."""
    targets, mask = batch["targets"], batch["mask"].unsqueeze(-1).to(logits.dtype)  # (B, T, W), (B, T, 1)
    nats = (F.binary_cross_entropy_with_logits(logits, targets, reduction="none") * mask).sum()
    errors = (((logits > 0) != (targets > 0.5)) * mask).sum((1, 2))  # (B,)
    return nats, errors, mask.sum() * logits.shape[-1]


class SequenceTask(FamilyModule):
    """Trains any `sequence` model: bit-wise BCE with logits on the output phase (`mask`) only.

    Metrics per split (Graves et al. 2014, §4): `cost` in bits per sequence, `bit_errors` per
    sequence (an output bit counts as 1 when its probability is > 0.5), `exact_match` (the
    fraction of sequences without a bit error), and `loss` (BCE per bit, in nats). Test dataloader
    k > 0 is the generalisation set of `dims.test_lengths[k - 1]`, logged as `test/len{L}/...`.
    With `tbptt_steps` k a recurrent model (`CarriesState`) trains by truncated BPTT (`attnmem.tasks.tbptt`):
    chunks of k steps, one optimiser step each, the state carried over detached; evaluation is unchanged.
    """

    monitor: ClassVar[str] = "val/bit_errors"
    mode: ClassVar[str] = "min"
    scheduler_monitor: str | None  # under truncated BPTT: the metric a ReduceLROnPlateau watches (`tbptt.keep_monitor`)

    def __init__(self, net: nn.Module, *, optimizer: Callable[..., torch.optim.Optimizer],
                 scheduler: Callable[..., Any] | None = None, dims: SequenceDims,
                 tbptt_steps: int | None = None) -> None:
        super().__init__()
        tbptt.check(tbptt_steps, net)
        self.net, self.tbptt_steps = net, tbptt_steps
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.test_names = ["test", *(f"test/len{n}" for n in dims.test_lengths)]
        slices = {"train": 1, "val": 1, "test": len(self.test_names)}
        self.sums = SumsDict({f"{s}_sums": Sums(FIELDS, slices=n) for s, n in slices.items()})

    def configure_optimizers(self) -> Any:
        """The config's optimizer and scheduler; under truncated BPTT the module keeps the scheduler's monitor."""
        configured = super().configure_optimizers()
        return configured if self.tbptt_steps is None else tbptt.keep_monitor(self, configured)

    prog_bar_splits: ClassVar[tuple[str, ...]] = ("val",)

    def shared_step(self, batch: dict[str, Tensor], split: str, test_set: int = 0) -> Tensor:
        """The masked BCE per bit; the batch's sums added to its test set's slice in one in-place add."""
        nats, errors, bits = masked_bce(self.net(batch).pred, batch)
        summed = torch.stack([nats.detach(), errors.sum(), (errors == 0).sum(), errors.new_tensor(len(errors)), bits])
        self.sums[f"{split}_sums"].add(summed, test_set)
        return nats / bits

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor | None:
        """The batch's loss (full BPTT), or its chunks' optimiser steps under truncated BPTT (then None)."""
        if self.tbptt_steps is None:
            return self.shared_step(batch, "train")
        self.sums["train_sums"].add(tbptt.train_batch(self, batch, masked_bce))
        return None

    def on_train_epoch_end(self) -> None:
        super().on_train_epoch_end()
        if self.tbptt_steps is not None:  # Lightning steps no scheduler under manual optimisation
            tbptt.step_schedulers(self, "epoch", self.current_epoch + 1)

    def setup(self, stage: str) -> None:
        if self.tbptt_steps is not None and stage == "fit":
            tbptt.manual_optimisation(self)

    def epoch_metrics(self, split: str) -> dict[str, Tensor]:
        """Loss, cost, bit errors and exact match of each of the split's sets that saw a sequence."""
        logged: dict[str, Tensor] = {}
        for name, s in counted(self.sums[f"{split}_sums"].read(), self.test_names if split == "test" else [split]):
            logged |= {f"{name}/loss": s["nats"] / s["bits"], f"{name}/cost": s["nats"] / math.log(2) / s["count"],
                       f"{name}/bit_errors": s["errors"] / s["count"], f"{name}/exact_match": s["exact"] / s["count"]}
        return logged

    @torch.no_grad()
    def plot_examples(self, datamodule: L.LightningDataModule, out_dir: Path, num_examples: int) -> list[Path]:
        """Input, target and output of the first validation sequences, with the memory weightings if any."""
        batch, out = plots.val_examples(self, datamodule, num_examples)
        weights = torch.stack(out.attention, 1).float().cpu() if out.attention else None  # (B, T, heads, N)
        read_heads = self.net.read_heads if isinstance(self.net, ReadHeads) else 0
        paths = []
        for i in range(len(batch["inputs"])):
            steps = int(batch["mask"][i].nonzero().max()) + 1  # this sequence's end, padding dropped
            mask = batch["mask"][i, :steps].cpu()
            fig = plots.sequence_example(
                batch["inputs"][i, :steps].cpu(), batch["targets"][i, :steps].cpu(),
                torch.sigmoid(out.pred[i, :steps].float()).cpu(), mask,
                weights[i, :steps] if weights is not None else None, read_heads,
            )
            paths.append(plots.save(fig, out_dir / f"sequence_{i}.png"))
        if isinstance(self.net, MemoryTrace):  # the DNC's usage and link matrix, for the first example
            steps = int(batch["mask"][0].nonzero().max()) + 1
            trace = self.net.memory_trace({k: v[:1, :steps] for k, v in batch.items()})
            fig = memory_plots.dnc_memory(trace["usage"][0].float().cpu(), trace["link"][0].float().cpu())
            paths.append(plots.save(fig, out_dir / "memory_0.png"))
        return paths
