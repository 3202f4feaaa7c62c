"""The LightningModule of the `seq2seq` family: a source sequence in, a target sequence out."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, cast

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchmetrics.text import BLEUScore

from attnmem.core.dims import Seq2SeqDims
from attnmem.evaluation import plots
from attnmem.evaluation.decode import Decodable
from attnmem.tasks import tokens as tokens_
from attnmem.tasks.family import FamilyModule
from attnmem.tasks.metrics import Sums, SumsDict, counted

FIELDS = ("nats", "tokens", "correct", "count", "exact")  # per test set: loss, target tokens, sequences
LENGTH_FIELDS = ("tokens", "correct", "count", "exact")  # per source length


class Seq2SeqTask(FamilyModule):
    """Trains any `seq2seq` model: cross-entropy on the target tokens with teacher forcing (Sutskever et al. 2014).

    Training reports the teacher-forced `loss`, `token_acc` and `exact_match`. Validation and test decode
    each source (greedy, or beam search with `decode.beam_size` > 1 ranked with the GNMT length penalty of α =
    `decode.length_penalty`, see `attnmem.evaluation.decode.beam`) and compare the
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

    def __init__(self, net: nn.Module, *, optimizer: Callable[..., torch.optim.Optimizer],
                 scheduler: Callable[..., Any] | None = None, dims: Seq2SeqDims, label_smoothing: float = 0.0,
                 decode: dict[str, Any] | None = None, length_bucket: int = 10) -> None:
        super().__init__()
        self.decode = tokens_.decode_options(decode)
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
        slices = {"train": 1, "val": 1, "test": len(self.test_names)}
        self.sums = SumsDict({f"{s}_sums": Sums(FIELDS, slices=n) for s, n in slices.items()})
        self.lengths = Sums(LENGTH_FIELDS, slices=self.max_src_len + 1)  # the main test set by source length
        self.bleu = nn.ModuleDict({s: BLEUScore() for s in ("val", "test")}) if dims.bleu else None

    prog_bar_splits: ClassVar[tuple[str, ...]] = ("val",)

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
        return tokens_.compare(predicted, targets, self.ids["pad"])

    def shared_step(self, batch: dict[str, Tensor], split: str, test_set: int = 0) -> Tensor:
        """The teacher-forced loss per target token; val and test score the decoded output, training the forced one."""
        nats, predicted, targets = self._teacher_forced(batch)
        if split != "train":
            # by default no further than the batch's longest target: later tokens cannot change token_acc or exact_match
            predicted = self.generate(batch["src"], max_len=self.decode["max_len"] or targets.shape[1])
        tokens, correct, exact = self._compare(predicted, targets)
        summed = torch.stack([nats.detach(), tokens.sum(), correct.sum(), tokens.new_tensor(len(exact)), exact.sum()])
        self.sums[f"{split}_sums"].add(summed, test_set)
        if split == "test" and test_set == 0 and self.length_bucket:
            length = (batch["src"] != self.ids["pad"]).sum(1).clamp_max(self.max_src_len)  # (B,)
            self.lengths.add_rows(length, torch.stack([tokens, correct, torch.ones_like(tokens), exact.long()], -1))
        if split != "train" and test_set == 0 and self.bleu is not None:
            bleu = cast(BLEUScore, self.bleu[split])
            bleu.update([self.text(p) for p in predicted], [[self.text(t)] for t in targets])
        return nats / tokens.sum()

    def generate(self, src: Tensor, *, max_len: int) -> Tensor:
        """Decoded tokens (B, T) after bos, up to eos then padding: greedy, or beam search when `beam_size` > 1."""
        return tokens_.generate(cast(Decodable, self.net), src, self.decode, self.ids, max_len=max_len)

    def text(self, ids: Tensor, itos: list[str] | None = None) -> str:
        """Space-joined tokens of a 1-D id row, up to its eos; padding and bos dropped."""
        return tokens_.text(ids, itos or self.tgt_itos, self.ids)

    def epoch_metrics(self, split: str) -> dict[str, Tensor]:
        """Loss, token accuracy and exact match of each of the split's sets; length buckets and BLEU where measured."""
        logged: dict[str, Tensor] = {}
        for name, s in counted(self.sums[f"{split}_sums"].read(), self.test_names if split == "test" else [split]):
            tokens = s["tokens"]
            logged |= {f"{name}/loss": s["nats"] / tokens, f"{name}/token_acc": s["correct"] / tokens,
                       f"{name}/exact_match": s["exact"] / s["count"]}
        if split == "test" and self.length_bucket:
            logged |= self._buckets(self.lengths.read())
        if self.bleu is not None and split != "train":
            bleu = cast(BLEUScore, self.bleu[split])
            logged[f"{split}/bleu"] = bleu.compute()
            bleu.reset()
        return logged

    def _buckets(self, lengths: dict[str, Tensor]) -> dict[str, Tensor]:
        """`test/len{a}-{b}/token_acc` and `.../exact_match` for source lengths a .. b, buckets from length 1."""
        logged: dict[str, Tensor] = {}
        for low in range(1, len(lengths["count"]), self.length_bucket):
            tokens, correct, count, exact = (lengths[f][low : low + self.length_bucket].sum() for f in LENGTH_FIELDS)
            if count > 0:
                name = f"test/len{low}-{low + self.length_bucket - 1}"
                logged |= {f"{name}/token_acc": correct / tokens, f"{name}/exact_match": exact / count}
        return logged

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
