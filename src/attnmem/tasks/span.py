"""The LightningModule of the `span` family: a context, a question, an answer span of the context."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, cast

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.core.dims import SpanDims
from attnmem.evaluation import plots
from attnmem.evaluation.squad_metric import best_over_references, exact_match, f1
from attnmem.models.contract import NamedAttention
from attnmem.tasks.family import FamilyModule, datamodule_of
from attnmem.tasks.metrics import Sums, SumsDict

SPLITS = ("train", "val", "test")
FIELDS = ("loss", "loss_count", "em", "f1", "count")


def decode(start_logits: Tensor, end_logits: Tensor, max_answer_len: int) -> tuple[Tensor, Tensor]:
    """The span (s, e) maximising p_start(s) · p_end(e) with s ≤ e < s + max_answer_len: (B,), (B,)."""
    length = start_logits.shape[-1]
    scores = start_logits.log_softmax(-1).unsqueeze(2) + end_logits.log_softmax(-1).unsqueeze(1)  # (B, L, L)
    offset = torch.arange(length, device=scores.device)
    width = offset.unsqueeze(0) - offset.unsqueeze(1)  # (L, L): e - s
    scores = scores.masked_fill((width < 0) | (width >= max_answer_len), float("-inf"))
    best = scores.flatten(1).argmax(-1)  # (B,)
    return best // length, best % length


def span_losses(logits: Tensor, start: Tensor, end: Tensor) -> Tensor:
    """Cross-entropy of start and end, summed over decoder iterations (Xiong et al. 2016, §2.3): (B,).

    `logits (B, K, 2, L)`; a target of -1 (an answer past the truncation) contributes 0.
    """
    k = logits.shape[1]
    targets = torch.stack([start, end], dim=1).unsqueeze(1).expand(-1, k, -1)  # (B, K, 2)
    losses = F.cross_entropy(logits.flatten(0, 2).float(), targets.flatten(), ignore_index=-1, reduction="none")
    return losses.view(-1, k * 2).sum(-1)  # (B,)


class SpanData(Protocol):
    """What the span family reads of its datamodule (`attnmem.data.span.datamodule.SpanDataModule`)."""

    def examples(self, split: str) -> Sequence[Any]: ...


class SpanTask(FamilyModule):
    """Trains any `span` model: loss summed over decoder iterations, EM/F1 on text at val and test.

    `net(batch).pred` is `(B, K, 2, Lc)`: start/end logits of K iterations (K = 1 for a one-shot
    model); the last iteration is decoded with end ≥ start and at most `max_answer_len` tokens, mapped
    back to the context's characters and scored with the official SQuAD EM and F1 against every
    reference. The test predictions (`{question_id: answer_text}`, gathered from every process) stay in
    `predictions`, which `attnmem.callbacks.predictions.PredictionsWriter` writes to `predictions.json`.
    """

    monitor: ClassVar[str] = "val/f1"
    mode: ClassVar[str] = "max"

    def __init__(self, net: nn.Module, *, optimizer: Callable[..., torch.optim.Optimizer],
                 scheduler: Callable[..., Any] | None = None, dims: SpanDims, max_answer_len: int = 15) -> None:
        super().__init__()
        if max_answer_len < 1:
            raise ValueError(f"task.max_answer_len must be >= 1, got {max_answer_len}")
        self.net, self.max_answer_len = net, max_answer_len
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.sums = SumsDict({f"{split}_sums": Sums(FIELDS) for split in SPLITS})
        self.predictions: dict[str, str] = {}

    prog_bar_splits: ClassVar[tuple[str, ...]] = ("train", "val")

    def shared_step(self, batch: dict[str, Tensor], split: str, test_set: int = 0) -> Tensor:
        """The loss over iterations; at val and test EM and F1 on text too (one test set: `test_set` is 0)."""
        logits = self.net(batch).pred  # (B, K, 2, Lc)
        losses = span_losses(logits, batch["start"], batch["end"])  # (B,)
        counted = batch["start"].ge(0)  # (B,)
        em = f1_sum = losses.new_zeros((), dtype=torch.float64)
        if split != "train":
            # padding never wins, whatever a model puts there
            last = logits[:, -1].detach().masked_fill(batch["context"].eq(0).unsqueeze(1), float("-inf"))  # (B, 2, Lc)
            em, f1_sum = self._score_text(last, batch["index"], split)
        stats = torch.stack(
            [losses.detach().sum().double(), counted.sum().double(), em, f1_sum, em.new_tensor(float(len(losses)))]
        )
        self.sums[f"{split}_sums"].add(stats)
        return losses.sum() / counted.sum().clamp_min(1)

    def _score_text(self, logits: Tensor, index: Tensor, split: str) -> tuple[Tensor, Tensor]:
        """Sums of EM and F1 of the decoded spans against the references; test spans kept as predictions."""
        starts, ends = decode(logits[:, 0], logits[:, 1], self.max_answer_len)
        examples = cast(SpanData, datamodule_of(self.trainer)).examples(split)  # the span family's data
        em = f1_sum = 0.0
        for i, s, e in zip(index.tolist(), starts.tolist(), ends.tolist()):
            example = examples[i]
            text = example.span_text(s, e)
            em += best_over_references(exact_match, text, example.answers)
            f1_sum += best_over_references(f1, text, example.answers)
            if split == "test":
                self.predictions[example.id] = text
        return logits.new_tensor(em, dtype=torch.float64), logits.new_tensor(f1_sum, dtype=torch.float64)

    def epoch_metrics(self, split: str) -> dict[str, Tensor]:
        """The loss per counted question; EM and F1 at val and test."""
        sums = self.sums[f"{split}_sums"].read()  # summed across processes
        loss, loss_count, em, f1_sum, count = (sums[f][0] for f in FIELDS)
        if not count:
            return {}
        logged = {f"{split}/loss": loss / loss_count.clamp_min(1)}
        if split != "train":
            logged |= {f"{split}/em": em / count, f"{split}/f1": f1_sum / count}
        return logged

    def on_test_epoch_start(self) -> None:
        self.predictions = {}

    def on_test_epoch_end(self) -> None:
        super().on_test_epoch_end()
        if dist.is_available() and dist.is_initialized() and self.trainer.world_size > 1:
            gathered: list[dict[str, str]] = [{} for _ in range(self.trainer.world_size)]
            dist.all_gather_object(gathered, self.predictions)
            self.predictions = {k: v for part in gathered for k, v in part.items()}

    @torch.no_grad()
    def plot_examples(self, datamodule: SpanData, out_dir: Path, num_examples: int) -> list[Path]:
        """Attention weights (question × document) and start/end probabilities per decoder iteration.

        The weights are `attention[0]`, named by the net's `attention_name` (BiDAF: "C2Q attention"; default
        "coattention"), which also names the file.
        """
        batch, out = plots.val_examples(self, datamodule, num_examples)
        name = self.net.attention_name if isinstance(self.net, NamedAttention) else "coattention"
        examples = datamodule.examples("val")
        paths = []
        for i, index in enumerate(batch["index"].tolist()):
            example = examples[index]
            m, n = len(example.context_words), len(example.question_words)
            low = max(0, min(example.start, m) - 20)
            window = slice(low, min(m, low + 50))  # a readable stretch of the document around the answer
            probs = out.pred[i, :, :, :m].float().softmax(-1).cpu()  # (K, 2, m)
            title = f"Q: {' '.join(example.question_words)}   answer: {example.answers[0]}"
            words = list(example.context_words[window])
            paths.append(
                plots.save(
                    plots.pointer_iterations(
                        probs[:, 0, window], probs[:, 1, window], words, (example.start - low, example.end - low), title
                    ),
                    out_dir / f"pointers_{i}.png",
                )
            )
            if out.attention:
                weights = out.attention[0][i].float().cpu()  # (Lq[+1], Lc[+1]), question words as rows
                sentinel = weights.shape[0] == batch["question"].shape[1] + 1
                rows = [*range(n), weights.shape[0] - 1] if sentinel else list(range(n))
                cols = (
                    [*range(window.start, window.stop), weights.shape[1] - 1]
                    if sentinel
                    else list(range(window.start, window.stop))
                )
                labels = (list(example.question_words) + ["∅"] * sentinel, words + ["∅"] * sentinel)
                paths.append(
                    plots.save(
                        plots.coattention_heatmap(weights[rows][:, cols], *labels, title, name),
                        out_dir / f"{name.split()[0].lower()}_{i}.png",
                    )
                )
        return paths

