"""The LightningModule of the `seq2seq` family: a source sequence in, a target sequence out."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchmetrics.text import BLEUScore

from attnmem.core.dims import Seq2SeqDims
from attnmem.evaluation import decode as decoding
from attnmem.evaluation import plots
from attnmem.tasks import optim
from attnmem.tasks.qa import Totals

FIELDS = 5  # per split/slice: loss (nats), target tokens, correct tokens, sequences, exact sequences
LENGTH_FIELDS = 4  # per source length: target tokens, correct tokens, sequences, exact sequences
DECODE = {"beam_size": 1, "max_len": None, "length_penalty": 0.0}


class Seq2SeqTask(L.LightningModule):
    """Trains any `seq2seq` model: cross-entropy on the target tokens with teacher forcing (Sutskever et al. 2014).

    Training reports the teacher-forced `loss`, `token_acc` and `exact_match`. Validation and test decode
    each source (greedy, or beam search with `decode.beam_size` > 1, see `attnmem.evaluation.decode`) and compare the
    output with the target position by position over y1 .. yn and eos: `token_acc` is the fraction of
    those positions right, `exact_match` the fraction of sequences right everywhere, `bleu` (corpus BLEU-4,
    torchmetrics, when the data ask for it: parallel text) over the tokens up to eos; `loss` stays
    teacher-forced. Test dataloader k > 0 is the set of length `test_lengths[k - 1]`, logged as
    `test/len{L}/...`; the main test set is also reported per source-length bucket of `length_bucket`
    lengths (`test/len41-50/token_acc`; 0 turns this off), the measure of Bahdanau et al. 2015's Figure 2.
    `label_smoothing` (Szegedy et al. 2016) applies to the training loss.
    """

    monitor: ClassVar[str] = "val/exact_match"
    mode: ClassVar[str] = "max"

    def __init__(
        self,
        net: nn.Module,
        *,
        optimizer: Callable[..., torch.optim.Optimizer],
        scheduler: Callable[..., Any] | None = None,
        dims: Seq2SeqDims,
        label_smoothing: float = 0.0,
        decode: dict[str, Any] | None = None,
        length_bucket: int = 10,
    ) -> None:
        super().__init__()
        unknown = set(decode or {}) - set(DECODE)
        if unknown:
            raise ValueError(f"task.decode has no option {sorted(unknown)}; options: {sorted(DECODE)}")
        self.decode = DECODE | dict(decode or {})
        if self.decode["beam_size"] < 1:
            raise ValueError(f"decode.beam_size must be >= 1, got {self.decode['beam_size']}")
        if not 0 <= label_smoothing < 1:
            raise ValueError(f"task.label_smoothing must be in [0, 1), got {label_smoothing}")
        if length_bucket < 0:
            raise ValueError(f"task.length_bucket must be >= 0 (0: no buckets), got {length_bucket}")
        self.net = net
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.label_smoothing, self.length_bucket = label_smoothing, length_bucket
        self.ids = {"pad": dims.pad_id, "bos": dims.bos_id, "eos": dims.eos_id}
        self.tgt_itos, self.src_itos = dims.tgt_itos, dims.src_itos
        self.max_src_len = dims.max_src_len
        self.test_names = ["test", *(f"test/len{n}" for n in dims.test_lengths)]
        sizes = {"train": 1, "val": 1, "test": len(self.test_names)}
        self.totals = nn.ModuleDict({f"{s}_totals": Totals(FIELDS * n) for s, n in sizes.items()})
        self.by_length = Totals(LENGTH_FIELDS * (self.max_src_len + 1))
        self.bleu = nn.ModuleDict({s: BLEUScore() for s in ("val", "test")}) if dims.bleu else None

    def forward(self, batch: dict[str, Tensor]):
        return self.net(batch)

    def _add(self, split: str, slot: int, fields: list[Tensor]) -> None:
        # one metric update per step, summed into this slice's place: no per-step logging
        totals = self.totals[f"{split}_totals"]
        values = torch.zeros(totals.total.shape, dtype=torch.float64, device=self.device)
        values[FIELDS * slot : FIELDS * (slot + 1)] = torch.stack(fields).to(values)
        totals.update(values)

    def _teacher_forced(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        logits, targets = self.net(batch).pred, batch["tgt"][:, 1:]  # (B, Lt-1, V), (B, Lt-1)
        smoothing = self.label_smoothing if self.training else 0.0
        nats = F.cross_entropy(
            logits.flatten(0, 1).float(),
            targets.flatten(),
            ignore_index=self.ids["pad"],
            reduction="sum",
            label_smoothing=smoothing,
        )
        return nats, logits.argmax(-1), targets

    def _compare(self, predicted: Tensor, targets: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Per sequence: target tokens, correct tokens, exact (bool); `predicted` is padded or cut to the target."""
        width = targets.shape[1]
        predicted = F.pad(predicted[:, :width], (0, max(0, width - predicted.shape[1])), value=self.ids["pad"])
        real = targets != self.ids["pad"]
        correct = ((predicted == targets) & real).sum(1)  # (B,)
        tokens = real.sum(1)
        return tokens, correct, correct == tokens

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        nats, predicted, targets = self._teacher_forced(batch)
        tokens, correct, exact = self._compare(predicted, targets)
        self._add("train", 0, [nats.detach(), tokens.sum(), correct.sum(), tokens.new_tensor(len(exact)), exact.sum()])
        return nats / tokens.sum()

    def _evaluate(self, batch: dict[str, Tensor], split: str, slot: int) -> None:
        nats, _, targets = self._teacher_forced(batch)
        # by default no further than the batch's longest target: later tokens cannot change token_acc or exact_match
        predicted = self.generate(batch["src"], max_len=self.decode["max_len"] or targets.shape[1])
        tokens, correct, exact = self._compare(predicted, targets)
        self._add(split, slot, [nats, tokens.sum(), correct.sum(), tokens.new_tensor(len(exact)), exact.sum()])
        if split == "test" and slot == 0 and self.length_bucket:
            length = (batch["src"] != self.ids["pad"]).sum(1).clamp_max(self.max_src_len)  # (B,)
            stats = torch.stack([tokens, correct, torch.ones_like(tokens), exact.long()], -1).double()  # (B, 4)
            values = torch.zeros(self.max_src_len + 1, LENGTH_FIELDS, dtype=torch.float64, device=self.device)
            self.by_length.update(values.index_add_(0, length, stats).flatten())
        if self.bleu is not None and slot == 0:
            self.bleu[split].update([self.text(p) for p in predicted], [[self.text(t)] for t in targets])

    @torch.no_grad()
    def generate(self, src: Tensor, *, max_len: int) -> Tensor:
        """Decoded tokens (B, T) after bos, up to eos then padding: greedy, or beam search when `beam_size` > 1."""
        if self.decode["beam_size"] == 1:
            return decoding.greedy(
                self.net, src, max_len=max_len, bos_id=self.ids["bos"], eos_id=self.ids["eos"], pad_id=self.ids["pad"]
            )
        return decoding.beam(
            self.net,
            src,
            self.decode["beam_size"],
            max_len=max_len,
            bos_id=self.ids["bos"],
            eos_id=self.ids["eos"],
            pad_id=self.ids["pad"],
            length_penalty=self.decode["length_penalty"],
        )

    def text(self, ids: Tensor, itos: list[str] | None = None) -> str:
        """Space-joined tokens of a 1-D id row, up to its eos; padding and bos dropped."""
        vocab, words = itos or self.tgt_itos, []
        for i in ids.tolist():
            if i == self.ids["eos"]:
                break
            if i not in (self.ids["pad"], self.ids["bos"]):
                words.append(vocab[i] if vocab else str(i))
        return " ".join(words)

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._evaluate(batch, "val", 0)

    def test_step(self, batch: dict[str, Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        self._evaluate(batch, "test", dataloader_idx)

    def _log_split(self, split: str) -> None:
        totals = self.totals[f"{split}_totals"]
        if not totals.update_called:
            return
        rows = totals.compute().view(-1, FIELDS)  # synced across processes
        totals.reset()
        names = self.test_names if split == "test" else [split]
        logged = {}
        for name, (nats, tokens, correct, count, exact) in zip(names, rows):
            if count > 0:
                logged |= {
                    f"{name}/loss": nats / tokens,
                    f"{name}/token_acc": correct / tokens,
                    f"{name}/exact_match": exact / count,
                }
        if split == "test" and self.by_length.update_called:
            logged |= self._buckets(self.by_length.compute().view(-1, LENGTH_FIELDS))
            self.by_length.reset()
        if self.bleu is not None and split != "train":
            logged[f"{split}/bleu"] = self.bleu[split].compute()
            self.bleu[split].reset()
        self.log_dict({k: v.float() for k, v in logged.items()}, prog_bar=split == "val", add_dataloader_idx=False)

    def _buckets(self, per_length: Tensor) -> dict[str, Tensor]:
        """`test/len{a}-{b}/token_acc` and `.../exact_match` for source lengths a .. b, buckets from length 1."""
        logged = {}
        for low in range(1, len(per_length), self.length_bucket):
            high = min(low + self.length_bucket, len(per_length)) - 1
            tokens, correct, count, exact = per_length[low : high + 1].sum(0)
            if count > 0:
                name = f"test/len{low}-{low + self.length_bucket - 1}"
                logged |= {f"{name}/token_acc": correct / tokens, f"{name}/exact_match": exact / count}
        return logged

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
        """Source × target attention of the first validation examples: one heatmap per 3-D weight tensor
        (B, Lt, Ls), a grid of per-head maps per 4-D one (B, H, Lt, Ls), from a teacher-forced eval forward."""
        batch, out = plots.val_examples(self, datamodule, num_examples)
        paths = []
        for i in range(len(batch["src"])):
            source = self.text(batch["src"][i], self.src_itos).split()
            target = [*self.text(batch["tgt"][i]).split(), "<eos>"]  # the rows: what each step predicts
            for layer, weights in enumerate(out.attention):
                w = weights[i, ..., : len(target), : len(source)].float().cpu()
                suffix = f"_layer{layer + 1}" if len(out.attention) > 1 else ""
                if w.dim() == 2:
                    fig = plots.alignment_heatmap(w, source, target)
                    paths.append(plots.save(fig, out_dir / f"alignment_{i}{suffix}.png"))
                else:
                    fig = plots.head_heatmaps(w, source, target, title=f"layer {layer + 1}")
                    paths.append(plots.save(fig, out_dir / f"attention_{i}{suffix}.png"))
        return paths
