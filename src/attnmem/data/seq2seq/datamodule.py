"""The seq2seq family's one datamodule: token pairs from a pluggable source, as ids, batched, checkpointed.

A source (`TokenTasks`, `ParallelTextFiles`, or any class with the `Seq2SeqSource` members) gives token
pairs and the vocabulary it would build; this module maps them to ids and serves loaders, the same for all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Protocol

import lightning as L
from torch import Tensor
from torch.utils.data import DataLoader

from attnmem.core.dims import Seq2SeqDims
from attnmem.data.seq2seq.tensors import BOS, EOS, PAD, TextPair, Vocab, lengths, loader, tensors, to_ids


class Seq2SeqSource(Protocol):
    """Where the pairs of a seq2seq datamodule come from (`data.source`)."""

    data_files: list[Path]  # what the run's manifest hashes; empty for generated data
    test_lengths: list[int]  # each adds the split `test{k}` of that source length (test dataloader k)
    bleu: bool  # whether evaluation reports BLEU

    def pairs(self) -> dict[str, list[TextPair]]:
        """Token pairs of each split: "train" and "val" always, "test" (and "test1", ...) when the source has them."""

    def vocab(self, train: list[TextPair]) -> Vocab:
        """Both sides' vocabularies, when no checkpoint gives them."""


class Seq2SeqDataModule(L.LightningDataModule):
    """Sequence-to-sequence pairs from `source`, as ids in one vocabulary per side.

    The vocabulary is the source's (from the training pairs, or fixed for generated tasks); a checkpoint's
    vocabulary wins over it, its unknown tokens becoming `<unk>`.
    """

    family: ClassVar[str] = "seq2seq"
    family_module: ClassVar[str] = "attnmem.tasks.seq2seq.Seq2SeqTask"

    def __init__(self, *, source: Seq2SeqSource, batch_size: int = 64) -> None:
        super().__init__()
        if batch_size < 1:
            raise ValueError(f"data.batch_size must be >= 1, got {batch_size}")
        self.source, self.batch_size = source, batch_size
        self.data_files = list(source.data_files)
        self.splits: dict[str, dict[str, Tensor]] = {}
        self.vocab: Vocab = {}  # "src"/"tgt" -> itos; from the checkpoint when one is loaded

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        text = self.source.pairs()
        if not self.vocab:
            self.vocab = self.source.vocab(text["train"])
        self.splits = {name: tensors(to_ids(pairs, self.vocab, f"{name} split")) for name, pairs in text.items()}

    @property
    def dims(self) -> Seq2SeqDims:
        return Seq2SeqDims(
            src_vocab_size=len(self.vocab["src"]),
            tgt_vocab_size=len(self.vocab["tgt"]),
            pad_id=PAD,
            bos_id=BOS,
            eos_id=EOS,
            max_src_len=max(lengths(s, "src") for s in self.splits.values()),
            max_tgt_len=max(lengths(s, "tgt") for s in self.splits.values()),
            test_lengths=list(self.source.test_lengths),
            src_itos=list(self.vocab["src"]),
            tgt_itos=list(self.vocab["tgt"]),
            bleu=self.source.bleu,
        )

    @property
    def has_test(self) -> bool:
        return "test" in self.splits

    def train_dataloader(self) -> DataLoader:
        return loader(self.splits["train"], self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return loader(self.splits["val"], self.batch_size, shuffle=False)

    def test_dataloader(self) -> list[DataLoader]:
        names = ["test", *(f"test{k + 1}" for k in range(len(self.source.test_lengths)))]
        return [loader(self.splits[name], self.batch_size, shuffle=False) for name in names]

    def state_dict(self) -> dict[str, Any]:
        return {"vocab": self.vocab}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # a checkpoint's vocabulary wins over the one the source would give
        vocab = {k: list(v) for k, v in (state_dict.get("vocab") or {}).items()}
        if vocab and vocab != self.vocab:
            built, self.vocab, self.splits = bool(self.splits), vocab, {}
            if built:
                self.setup()
