"""The classify family's one datamodule: labelled documents of sentences from a pluggable source, as word ids."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, ClassVar, Protocol

import lightning as L
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from attnmem.core.dims import ClassifyDims
from attnmem.core.errors import UserError
from attnmem.data.classify.document import Document

__all__ = ["ClassifyDataModule", "ClassifySource"]

SPLITS = ("train", "val", "test")
PAD, UNK = "<pad>", "<unk>"


class ClassifySource(Protocol):
    """Where a classify datamodule's documents come from (`DocumentGenerator`, `ClassifyFiles`, `AclImdb`,
    `SquadTopics`): `data.source`."""

    data_files: list[Path]  # the files the last `load` read, for the run's manifest

    def prepare(self) -> None:
        """Fetch what `load` needs (called once, on the first process)."""

    def load(self) -> dict[str, list[Document]]:
        """The documents of `train`, `val` and `test` (an empty list: no such split)."""


class _Rows(Dataset):
    """The rows of a dict of equally long tensors."""

    def __init__(self, tensors: dict[str, Tensor]) -> None:
        self.tensors = tensors

    def __len__(self) -> int:
        return len(self.tensors["label"])

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        return {k: v[index] for k, v in self.tensors.items()}


class ClassifyDataModule(L.LightningDataModule):
    """Document classification (Yang et al. 2016): a document of sentences of words in, one label out.

    A batch holds `document (B, S, L)` word ids (0 pads; sentences left-aligned, each sentence's words too),
    `label (B,)` and `deciding (B,)`, the index of the sentence that decides the label where the source knows
    it (generated documents), else -1. Documents keep their first `max_sentences` sentences and each sentence
    its first `max_words` words. The words come from the training split (seen `min_count` times, the
    `max_vocab` most frequent), the labels too: a validation or test label never seen in training is an error.
    """

    family: ClassVar[str] = "classify"
    family_module: ClassVar[str] = "attnmem.tasks.classify.ClassifyTask"

    def __init__(self, *, source: ClassifySource, batch_size: int = 32, max_sentences: int = 30,
                 max_words: int = 50, min_count: int = 1, max_vocab: int | None = None, num_workers: int = 0) -> None:
        super().__init__()
        for name, value in (("batch_size", batch_size), ("max_sentences", max_sentences),
                            ("max_words", max_words), ("min_count", min_count), ("max_vocab", max_vocab or 1)):
            if value < 1:
                raise ValueError(f"data.{name} must be >= 1, got {value}")
        if num_workers < 0:
            raise ValueError(f"data.num_workers must be >= 0, got {num_workers}")
        self.source, self.batch_size, self.num_workers = source, batch_size, num_workers
        self.max_sentences, self.max_words = max_sentences, max_words
        self.min_count, self.max_vocab = min_count, max_vocab
        self.itos: list[str] = []
        self.classes: list[str] = []
        self._tensors: dict[str, dict[str, Tensor]] | None = None

    def prepare_data(self) -> None:
        self.source.prepare()

    def setup(self, stage: str | None = None) -> None:
        if self._tensors is not None:
            return
        documents = self.source.load()
        if not documents["train"]:
            raise UserError(f"data.source ({type(self.source).__name__}) gave no training documents")
        if not self.itos:  # a checkpoint's vocabulary (load_state_dict) is kept
            self.itos, self.classes = self._vocabulary(documents["train"])
        self._tensors = {split: self._encode(documents[split]) for split in SPLITS if documents.get(split)}

    def _vocabulary(self, train: list[Document]) -> tuple[list[str], list[str]]:
        counts = Counter(w for doc in train for sentence in self._cut(doc) for w in sentence)
        kept = sorted((w for w, c in counts.items() if c >= self.min_count), key=lambda w: (-counts[w], w))
        return [PAD, UNK, *kept[: self.max_vocab]], sorted({doc.label for doc in train})

    def _cut(self, doc: Document) -> list[list[str]]:
        return [s[: self.max_words] for s in doc.sentences[: self.max_sentences]]

    def _encode(self, documents: list[Document]) -> dict[str, Tensor]:
        """`document (N, S, L)`, `label (N,)`, `deciding (N,)`, S and L the split's longest (within the limits)."""
        stoi, label_id = {w: i for i, w in enumerate(self.itos)}, {c: i for i, c in enumerate(self.classes)}
        cut = [self._cut(doc) for doc in documents]
        s, length = max(map(len, cut)), max(len(w) for sentences in cut for w in sentences)
        ids = torch.zeros(len(documents), s, length, dtype=torch.long)
        labels, deciding = torch.empty(len(documents), dtype=torch.long), torch.empty(len(documents), dtype=torch.long)
        for i, (doc, sentences) in enumerate(zip(documents, cut)):
            if doc.label not in label_id:
                raise UserError(f"{doc.origin or 'a generated document'}: label {doc.label!r} is not a training "
                                f"label ({', '.join(self.classes)}): give the training split documents of it, or "
                                "drop this document")
            for j, words in enumerate(sentences):
                ids[i, j, : len(words)] = torch.tensor([stoi.get(w, 1) for w in words])
            labels[i] = label_id[doc.label]
            deciding[i] = doc.deciding if doc.deciding < len(sentences) else -1
        return {"document": ids, "label": labels, "deciding": deciding}

    def words(self, ids: Tensor) -> list[str]:
        """The words of a row of word ids, padding dropped."""
        return [self.itos[i] for i in ids.tolist() if i != 0]

    @property
    def data_files(self) -> list[Path]:
        """The files the source read (none for generated data), for the run's manifest."""
        return self.source.data_files

    @property
    def dims(self) -> ClassifyDims:
        if not self.itos:
            raise RuntimeError("call setup() before using the datamodule's dims")
        return ClassifyDims(vocab_size=len(self.itos), num_classes=len(self.classes), classes=list(self.classes),
                            itos=list(self.itos))

    @property
    def has_test(self) -> bool:
        return self._tensors is not None and "test" in self._tensors

    def state_dict(self) -> dict[str, Any]:
        return {"itos": list(self.itos), "classes": list(self.classes)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.itos, self.classes = list(state_dict.get("itos", [])), list(state_dict.get("classes", []))

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        if self._tensors is None:
            raise RuntimeError("call setup() before using the datamodule's data")
        return DataLoader(_Rows(self._tensors[split]), batch_size=self.batch_size, shuffle=shuffle,
                          num_workers=self.num_workers, persistent_workers=self.num_workers > 0)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", shuffle=False)

    def test_dataloader(self) -> DataLoader | list:
        return self._loader("test", shuffle=False) if self.has_test else []
