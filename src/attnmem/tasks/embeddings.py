"""The LightningModule of the `embeddings` family: the three objectives, analogies, and the vectors' export."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, cast

import torch
import torch.nn.functional as F
from lightning.pytorch.trainer.states import TrainerFn
from torch import Tensor, nn

from attnmem.core.atomic import write_json
from attnmem.core.dims import EmbeddingsDims
from attnmem.core.glove import write_vectors
from attnmem.evaluation import plots
from attnmem.evaluation.word_vectors import analogy_accuracy, nearest, pca, read_analogies
from attnmem.models.contract import WordVectors
from attnmem.tasks.family import FamilyModule
from attnmem.tasks.metrics import Sums, SumsDict

log = logging.getLogger(__name__)


def next_word_loss(pred: Tensor, window: Tensor) -> tuple[Tensor, Tensor]:
    """NNLM: −log P(w_t | history), the softmax of `pred (B, V)` at the centre word: losses (B,), weights (B,)."""
    return F.cross_entropy(pred, window[:, window.shape[1] // 2].long(), reduction="none"), pred.new_ones(len(pred))


def ranking_loss(pred: Tensor, window: Tensor) -> tuple[Tensor, Tensor]:
    """C&W: Σ_k max(0, 1 − s(x) + s(x̃_k)) of `pred (B, 1+K)` (column 0 the real window): (B,), weights (B,)."""
    return F.relu(1 - pred[:, :1] + pred[:, 1:]).sum(-1), pred.new_ones(len(pred))


def negative_sampling_loss(pred: Tensor, window: Tensor) -> tuple[Tensor, Tensor]:
    """word2vec: −log σ(s⁺) − Σ_k log σ(−s⁻_k) per prediction of `pred (B, P, 1+K)`: (B, P), weights (B, P).

    P = 1 is CBOW's one prediction per window; P = 2w are skip-gram's context positions, weighted 0 at pads.
    """
    losses = -F.logsigmoid(pred[..., 0]) - F.logsigmoid(-pred[..., 1:]).sum(-1)  # (B, P)
    if pred.shape[1] == 1:
        return losses, torch.ones_like(losses)
    w = window.shape[1] // 2
    context = torch.cat([window[:, :w], window[:, w + 1 :]], dim=1)  # (B, 2w)
    return losses, (context != 0).to(losses.dtype)


OBJECTIVES: dict[str, Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]] = {
    "next_word": next_word_loss,
    "ranking": ranking_loss,
    "negative_sampling": negative_sampling_loss,
}
SPLITS = ("train", "val")


class EmbeddingsTask(FamilyModule):
    """Trains any `embeddings` model with the loss its `objective` names; judges and exports its `vectors()`.

    Validation logs `val/loss` and, with `analogies` (a file in the format of word2vec's questions-words.txt),
    `val/analogy_acc` over the questions whose words are in the vocabulary (`val/analogy_questions`). After
    training, the final validation (of the best checkpoint) writes to the run directory `vectors.txt` (GloVe
    text format, the pad left out), `neighbours.json` (the `num_neighbours` nearest words of each of
    `neighbours`, by default the 10 most frequent words) and `plots/words_pca.png` (those words and their
    neighbours, PCA).
    """

    monitor: ClassVar[str] = "val/loss"
    mode: ClassVar[str] = "min"

    def __init__(
        self,
        net: nn.Module,
        *,
        optimizer: Callable[..., torch.optim.Optimizer],
        scheduler: Callable[..., Any] | None = None,
        dims: EmbeddingsDims,
        analogies: str | None = None,
        neighbours: list[str] | None = None,
        num_neighbours: int = 5,
    ) -> None:
        super().__init__()
        objective = net.objective if isinstance(net, WordVectors) else None
        if objective not in OBJECTIVES:
            raise TypeError(
                f"an embeddings model needs `objective` in {sorted(OBJECTIVES)} and a vectors() method; "
                f"{type(net).__name__} has objective {objective!r}"
            )
        if num_neighbours < 1:
            raise ValueError(f"task.num_neighbours must be >= 1, got {num_neighbours}")
        self.net, self.loss_fn, self.itos = net, OBJECTIVES[objective], list(dims.itos)
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.analogies = read_analogies(Path(analogies)) if analogies else None
        self.neighbours = list(neighbours) if neighbours else self.itos[1:11]
        self.num_neighbours = num_neighbours
        self.sums = SumsDict({f"{s}_sums": Sums(("loss", "count")) for s in SPLITS})

    prog_bar_splits: ClassVar[tuple[str, ...]] = ("val",)

    def shared_step(self, batch: dict[str, Tensor], split: str, test_set: int = 0) -> Tensor:
        """The mean loss of the batch's predictions; its sum and count added in place."""
        losses, weights = self.loss_fn(self.net(batch).pred, batch["window"])
        total, count = (losses * weights).sum(), weights.sum()
        self.sums[f"{split}_sums"].add(torch.stack([total.detach(), count]).double())
        return total / count.clamp_min(1.0)

    def epoch_metrics(self, split: str) -> dict[str, Tensor]:
        """The loss per prediction; on validation, the analogy accuracy when `analogies` is given."""
        sums = {k: v.sum() for k, v in self.sums[f"{split}_sums"].read().items()}
        if not sums["count"]:
            return {}
        logged = {f"{split}/loss": sums["loss"] / sums["count"]}
        if split == "val" and self.analogies is not None:
            accuracy, asked = analogy_accuracy(cast(WordVectors, self.net).vectors(), self.itos, self.analogies)
            logged |= {"val/analogy_acc": torch.tensor(accuracy), "val/analogy_questions": torch.tensor(float(asked))}
        return logged

    def on_fit_end(self) -> None:
        self.fitted = True  # the next validation is the run's own, of its best checkpoint

    def on_validation_end(self) -> None:
        # only after this module's training: eval.py's validation writes metrics, never files beside them
        if getattr(self, "fitted", False) and self.trainer.state.fn == TrainerFn.VALIDATING:
            if self.trainer.is_global_zero:
                self.export(Path(self.trainer.default_root_dir))

    @torch.no_grad()
    def export(self, out_dir: Path) -> list[Path]:
        """Write `vectors.txt`, `neighbours.json` and `plots/words_pca.png` to `out_dir`."""
        vectors = cast(WordVectors, self.net).vectors().detach().float().cpu()  # `__init__` accepts no other
        write_vectors(out_dir / "vectors.txt", self.itos[1:], vectors[1:])
        found = nearest(vectors, self.itos, self.neighbours, self.num_neighbours)
        write_json(out_dir / "neighbours.json", {w: [n for n, _ in near] for w, near in found.items()})
        for word, near in found.items():
            log.info("nearest to %s: %s", word, ", ".join(f"{n} ({c:.2f})" for n, c in near))
        index = {w: i for i, w in enumerate(self.itos)}
        words = list(dict.fromkeys([*found, *(n for near in found.values() for n, _ in near)]))
        if len(words) < 2:
            return [out_dir / "vectors.txt", out_dir / "neighbours.json"]
        points = pca(vectors[[index[w] for w in words]])
        figure = plots.word_map(points, words, f"{type(self.net).__name__}: words and their neighbours (PCA)")
        plot = plots.save(figure, out_dir / "plots" / "words_pca.png")
        return [out_dir / "vectors.txt", out_dir / "neighbours.json", plot]
