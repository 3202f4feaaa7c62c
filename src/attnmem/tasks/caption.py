"""The LightningModule of the `caption` family: an image in, a caption (a token sequence) out."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, cast

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchmetrics.text import BLEUScore

from attnmem.core.dims import CaptionDims
from attnmem.evaluation import plots
from attnmem.evaluation.caption_plots import attention_over_image
from attnmem.evaluation.decode import Decodable
from attnmem.tasks import tokens
from attnmem.tasks.family import FamilyModule
from attnmem.tasks.metrics import Sums, SumsDict, counted

# per test set: loss, target tokens, captions; `words` of exactly right captions with boxes, `in_box` of them
FIELDS = ("nats", "tokens", "correct", "count", "exact", "penalty", "words", "in_box")


def in_box(alpha: Tensor, boxes: Tensor, height: int, width: int) -> Tensor:
    """Per word (B, T): whether the grid cell of `alpha (B, T, h, w)`'s largest weight overlaps the word's pixel
    box `boxes (B, T, 4)` (top, left, bottom, right; bottom and right exclusive) on a `height` x `width` image."""
    rows, cols = alpha.shape[-2:]
    cell = alpha.flatten(2).argmax(-1)  # (B, T)
    row, col = (cell // cols).float(), (cell % cols).float()
    tall, wide = height / rows, width / cols  # the pixels of one cell
    top, left, bottom, right = boxes.float().unbind(-1)
    return (row * tall < bottom) & ((row + 1) * tall > top) & (col * wide < right) & ((col + 1) * wide > left)


class CaptionTask(FamilyModule):
    """Trains any `caption` model: Show, Attend and Tell's objective (Xu et al. 2015).

    The loss is the teacher-forced cross-entropy of the caption's words and eos plus the doubly stochastic
    regulariser λ Σ_i (1 − Σ_t α_ti)² (eq. 14, λ = `alpha_c`, over the steps of the caption), per target token; λ is
    0 by default (`task.alpha_c=1` is the paper's): where captions have fewer words than the grid has cells, as
    on the digits, every cell cannot be attended once and the term only spreads the weights (docs/caption.md). A
    model whose `Output.attention` also holds the one-hot `chosen` locations (hard attention) adds, while training,
    REINFORCE (eqs. 9-12): −λ_r (log p(y | s̃, a) − b) log p(s̃ | a) − λ_e H[s̃], with λ_r = `reinforce`,
    λ_e = `entropy` and the moving average b ← `baseline_decay` · b + (1 − `baseline_decay`) log p(y | s̃, a)
    (eq. 10). Validation and test decode every image (`decode` as in seq2seq: greedy, or beam search) and report
    `exact_match`, `token_acc` (over y1 .. yn and eos), `bleu` (corpus BLEU-4, torchmetrics: 0 for captions under
    4 words) and, where the batch has `boxes`, `attention_in_box`: over the words of the exactly right captions, the
    fraction whose most attended grid cell overlaps the word's box. `loss` is the cross-entropy alone, `penalty`
    the regulariser per token. Test dataloader k > 0 is the set of captions of `test_lengths[k - 1]` words.
    """

    monitor: ClassVar[str] = "val/exact_match"
    mode: ClassVar[str] = "max"
    baseline: Tensor  # the buffer of b (eq. 10)

    def __init__(self, net: nn.Module, *, optimizer: Callable[..., torch.optim.Optimizer],
                 scheduler: Callable[..., Any] | None = None, dims: CaptionDims, alpha_c: float = 0.0,
                 reinforce: float = 1.0, entropy: float = 0.01, baseline_decay: float = 0.9,
                 decode: dict[str, Any] | None = None) -> None:
        super().__init__()
        for name, value in {"alpha_c": alpha_c, "reinforce": reinforce, "entropy": entropy}.items():
            if value < 0:
                raise ValueError(f"task.{name} must be >= 0, got {value}")
        if not 0 <= baseline_decay < 1:
            raise ValueError(f"task.baseline_decay must be in [0, 1), got {baseline_decay}")
        self.net, self.decode = net, tokens.decode_options(decode)
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.alpha_c, self.reinforce, self.entropy, self.decay = alpha_c, reinforce, entropy, baseline_decay
        self.ids = {"pad": dims.pad_id, "bos": dims.bos_id, "eos": dims.eos_id}
        self.itos, self.size = dims.itos, (dims.height, dims.width)
        self.test_names = ["test", *(f"test/len{n}" for n in dims.test_lengths)]
        slices = {"train": 1, "val": 1, "test": len(self.test_names)}
        self.sums = SumsDict({f"{s}_sums": Sums(FIELDS, slices=n) for s, n in slices.items()})
        self.bleu = nn.ModuleList(BLEUScore(n_gram=4) for _ in range(1 + len(self.test_names)))  # val, then tests
        self.register_buffer("baseline", torch.tensor(float("nan")))  # b of eq. 10; NaN until the first batch

    prog_bar_splits: ClassVar[tuple[str, ...]] = ("val",)

    def shared_step(self, batch: dict[str, Tensor], split: str, test_set: int = 0) -> Tensor:
        """The loss per target token; val and test score the decoded captions, training the teacher-forced ones."""
        out = self.net(batch)
        targets = batch["tgt"][:, 1:]  # (B, T): y1 .. yn, eos
        real = targets != self.ids["pad"]
        nats = F.cross_entropy(out.pred.transpose(1, 2).float(), targets, ignore_index=self.ids["pad"],
                               reduction="none").sum(1)  # (B,) −log p(y | a)
        alpha = out.attention[0].float()  # (B, T, h, w)
        coverage = (alpha * real[..., None, None]).sum(1)  # Σ_t α_ti (B, h, w)
        penalty = ((1 - coverage) ** 2).flatten(1).sum(1)  # (B,) eq. 14
        count = real.sum()
        loss = (nats.sum() + self.alpha_c * penalty.sum()) / count
        if split == "train" and len(out.attention) > 1:
            loss = loss + self._reinforce(nats, alpha, out.attention[1].float(), real) / count
        predicted = out.pred.argmax(-1)
        if split != "train":
            predicted = tokens.generate(cast(Decodable, self.net), batch["image"], self.decode, self.ids,
                                        max_len=self.decode["max_len"] or targets.shape[1])
        words, correct, exact = tokens.compare(predicted, targets, self.ids["pad"])
        looked = torch.zeros(2, device=loss.device)
        if split != "train" and "boxes" in batch:
            has_box = (batch["boxes"][..., 0] >= 0) & exact.unsqueeze(1)  # (B, T)
            hits = in_box(alpha, batch["boxes"], *self.size) & has_box
            looked = torch.stack([has_box.sum(), hits.sum()]).float()
        summed = [nats.sum().detach(), words.sum(), correct.sum(), words.new_tensor(len(exact)), exact.sum(),
                  penalty.sum().detach()]
        self.sums[f"{split}_sums"].add(torch.cat([torch.stack(summed).double(), looked.double()]), test_set)
        if split != "train":
            cast(BLEUScore, self.bleu[0 if split == "val" else 1 + test_set]).update(
                [tokens.text(p, self.itos, self.ids) for p in predicted],
                [[tokens.text(t, self.itos, self.ids)] for t in targets])
        return loss

    def _reinforce(self, nats: Tensor, alpha: Tensor, chosen: Tensor, real: Tensor) -> Tensor:
        """−λ_r (log p(y | s̃) − b) log p(s̃) − λ_e H[s̃], summed over the batch (eqs. 10-12); b then moves."""
        log_alpha = alpha.flatten(2).clamp_min(1e-12).log()  # (B, T, L)
        log_p_s = (chosen.flatten(2) * log_alpha).sum(-1).masked_fill(~real, 0).sum(1)  # (B,) log p(s̃ | a)
        entropy = -(alpha.flatten(2) * log_alpha).sum(-1).masked_fill(~real, 0).sum()
        log_p_y = -nats.detach()  # (B,)
        if torch.isnan(self.baseline):
            self.baseline.copy_(log_p_y.mean())
        advantage = log_p_y - self.baseline
        self.baseline.mul_(self.decay).add_((1 - self.decay) * log_p_y.mean())
        return -(self.reinforce * advantage * log_p_s).sum() - self.entropy * entropy

    def epoch_metrics(self, split: str) -> dict[str, Tensor]:
        """Loss, penalty, token accuracy, exact match of each of the split's sets; BLEU and attention_in_box."""
        logged: dict[str, Tensor] = {}
        names = self.test_names if split == "test" else [split]
        for name, s in counted(self.sums[f"{split}_sums"].read(), names):
            logged |= {f"{name}/loss": s["nats"] / s["tokens"], f"{name}/penalty": s["penalty"] / s["tokens"],
                       f"{name}/token_acc": s["correct"] / s["tokens"], f"{name}/exact_match": s["exact"] / s["count"]}
            if s["words"] > 0:
                logged[f"{name}/attention_in_box"] = s["in_box"] / s["words"]
            if split != "train":
                bleu = cast(BLEUScore, self.bleu[0 if split == "val" else 1 + names.index(name)])
                logged[f"{name}/bleu"] = bleu.compute()
                bleu.reset()
        return logged

    @torch.no_grad()
    def plot_examples(self, datamodule: L.LightningDataModule, out_dir: Path, num_examples: int) -> list[Path]:
        """The first validation images, each with the attention of every word it is captioned with (greedy) over it."""
        batch, _ = plots.val_examples(self, datamodule, num_examples)
        predicted = tokens.generate(cast(Decodable, self.net), batch["image"], self.decode, self.ids,
                                    max_len=self.decode["max_len"] or batch["tgt"].shape[1])
        bos = predicted.new_full((len(predicted), 1), self.ids["bos"])
        out = plots.eval_outputs(self.net, {**batch, "tgt": torch.cat([bos, predicted], 1)})
        paths = []
        for i in range(len(predicted)):
            words = [*tokens.text(predicted[i], self.itos, self.ids).split(), "<eos>"][: predicted.shape[1]]
            truth = tokens.text(batch["tgt"][i], self.itos, self.ids)
            fig = attention_over_image(batch["image"][i], out.attention[0][i, : len(words)], words,
                                       title=f"truth: {truth}")
            paths.append(plots.save(fig, out_dir / f"caption_{i}.png"))
        return paths
