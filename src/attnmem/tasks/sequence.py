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
from attnmem.evaluation import plots
from attnmem.tasks import optim
from attnmem.tasks.qa import Totals

FIELDS = 5  # per split/slice: cost (nats), bit errors, exact sequences, sequences, bits


class SequenceTask(L.LightningModule):
    """Trains any `sequence` model: bit-wise BCE with logits on the output phase (`mask`) only.

    Metrics per split (Graves et al. 2014, §4): `cost` in bits per sequence, `bit_errors` per
    sequence (an output bit counts as 1 when its probability is > 0.5), `exact_match` (the
    fraction of sequences without a bit error), and `loss` (BCE per bit, in nats). Test dataloader
    k > 0 is the generalisation set of `dims.test_lengths[k - 1]`, logged as `test/len{L}/...`.
    """

    monitor: ClassVar[str] = "val/bit_errors"
    mode: ClassVar[str] = "min"

    def __init__(
        self,
        net: nn.Module,
        *,
        optimizer: Callable[..., torch.optim.Optimizer],
        scheduler: Callable[..., Any] | None = None,
        dims: SequenceDims,
    ) -> None:
        super().__init__()
        self.net = net
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.test_names = ["test", *(f"test/len{n}" for n in dims.test_lengths)]
        sizes = {"train": 1, "val": 1, "test": len(self.test_names)}
        self.totals = nn.ModuleDict({f"{s}_totals": Totals(FIELDS * n) for s, n in sizes.items()})

    def forward(self, batch: dict[str, Tensor]):
        return self.net(batch)

    def _step(self, batch: dict[str, Tensor], split: str, slot: int = 0) -> Tensor:
        logits, targets = self.net(batch).pred, batch["targets"]  # (B, T, W)
        mask = batch["mask"].unsqueeze(-1).to(logits.dtype)  # (B, T, 1)
        nats = F.binary_cross_entropy_with_logits(logits, targets, reduction="none") * mask
        bits = mask.sum() * logits.shape[-1]
        loss = nats.sum() / bits
        errors = (((logits > 0) != (targets > 0.5)) * mask).sum((1, 2))  # (B,)
        summed = torch.stack([nats.detach().sum(), errors.sum(), (errors == 0).sum(), errors.new_tensor(len(errors)),
                              bits]).double()
        # one metric update per step, summed into this slice's place: no per-step logging
        values = torch.zeros(self.totals[f"{split}_totals"].total.shape, dtype=torch.float64, device=logits.device)
        values[FIELDS * slot : FIELDS * (slot + 1)] = summed.to(values)
        self.totals[f"{split}_totals"].update(values)
        return loss

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._step(batch, "val")

    def test_step(self, batch: dict[str, Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        self._step(batch, "test", dataloader_idx)

    def _log_split(self, split: str) -> None:
        totals = self.totals[f"{split}_totals"]
        if not totals.update_called:
            return
        rows = totals.compute().view(-1, FIELDS)  # synced across processes
        totals.reset()
        names = self.test_names if split == "test" else [split]
        logged = {}
        for name, (nats, errors, exact, count, bits) in zip(names, rows):
            if count > 0:
                logged |= {f"{name}/loss": nats / bits, f"{name}/cost": nats / math.log(2) / count,
                           f"{name}/bit_errors": errors / count, f"{name}/exact_match": exact / count}
        self.log_dict({k: v.float() for k, v in logged.items()}, prog_bar=split == "val", add_dataloader_idx=False)

    def on_train_epoch_end(self) -> None:
        self._log_split("train")

    def on_validation_epoch_end(self) -> None:
        self._log_split("val")

    def on_test_epoch_end(self) -> None:
        self._log_split("test")

    def configure_optimizers(self) -> Any:
        return optim.configure(self.parameters(), self.optimizer_factory, self.scheduler_factory)

    @torch.no_grad()
    def plot_examples(self, datamodule: L.LightningDataModule, out_dir: Path, num_examples: int) -> list[Path]:
        """Input, target and output of the first validation sequences, with the memory weightings if any."""
        batch, out = plots.val_examples(self, datamodule, num_examples)
        weights = torch.stack(out.attention, 1).float().cpu() if out.attention else None  # (B, T, heads, N)
        read_heads = getattr(self.net, "read_heads", 0)
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
        return paths
