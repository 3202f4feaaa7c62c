"""Vectorised bAbI-style QA data: vocabularies, tensors, dataset and loaders, shared by every qa source.

Word id 0 is `<pad>` and 1 is `<unk>`; answer class 0 is `<unk>`, so an answer never seen in training is
always counted wrong rather than crashing evaluation.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, RandomSampler

from attnmem.core.dims import QADims
from attnmem.core.errors import UserError

log = logging.getLogger(__name__)

PAD, UNK = 0, 1


@dataclass(frozen=True)
class Example:
    """One question with the statements before it in its story."""

    story: tuple[tuple[str, ...], ...]  # statements before the question, oldest first, as words
    query: tuple[str, ...]
    answer: str  # lower case; a comma list such as "n,w" is one answer
    supports: tuple[int, ...]  # indices into `story` of the supporting facts
    task: int
    story_id: int  # which story of its source
    story_key: str  # equal for stories of equal text, so a split can keep them together


def build_vocab(examples: Iterable[Example]) -> list[str]:
    """Word list, id -> word: `<pad>`, `<unk>`, then every story, query and answer word, sorted."""
    # answers are words too, so a model may tie its answer layer to a word embedding (MemN2N's Wᵀ = C^K)
    words = {w for ex in examples for sentence in (*ex.story, ex.query, (ex.answer,)) for w in sentence}
    return ["<pad>", "<unk>", *sorted(words)]


def build_answers(examples: Iterable[Example]) -> list[str]:
    """Answer classes, class -> answer: `<unk>`, then every answer string, sorted."""
    return ["<unk>", *sorted({ex.answer for ex in examples})]


def _id_dtype(vocab_size: int) -> torch.dtype:
    """Smallest dtype for word ids: the 10k joint set is ~200 MB as int16, four times that as int64."""
    return torch.int16 if vocab_size <= torch.iinfo(torch.int16).max else torch.int32


def vectorize(
    examples: Sequence[Example], vocab: list[str], answers: list[str], *, memory_size: int, sentence_len: int,
    query_len: int,
) -> dict[str, Tensor]:
    """Tensors of examples: the last `memory_size` statements left-aligned, unknown words <unk>, extra words cut."""
    index = {w: i for i, w in enumerate(vocab)}
    answer_index = {a: i for i, a in enumerate(answers)}
    dtype = _id_dtype(len(vocab))
    np_dtype = np.int16 if dtype == torch.int16 else np.int32
    rows: dict[tuple[str, ...], np.ndarray] = {}  # sentences repeat a lot across questions and stories

    def row(words: tuple[str, ...], width: int) -> np.ndarray:
        if words not in rows:
            ids = [index.get(w, UNK) for w in words[:width]]
            rows[words] = np.pad(np.array(ids, dtype=np_dtype), (0, width - len(ids)))
        return rows[words]

    n = len(examples)
    story = np.zeros((n, memory_size, sentence_len), dtype=np_dtype)  # (N, S, L)
    query = np.zeros((n, query_len), dtype=np_dtype)  # (N, Lq)
    for i, ex in enumerate(examples):
        kept = ex.story[-memory_size:]
        if kept:
            story[i, : len(kept)] = np.stack([row(s, sentence_len) for s in kept])
        ids = [index.get(w, UNK) for w in ex.query[:query_len]]
        query[i, : len(ids)] = ids
    return {
        "story": torch.from_numpy(story),
        "query": torch.from_numpy(query),
        "answer": torch.tensor([answer_index.get(ex.answer, 0) for ex in examples], dtype=torch.long),
        "task": torch.tensor([ex.task for ex in examples], dtype=torch.long),
    }


class QADataset(Dataset):
    """Pre-built tensors indexed a batch at a time (`__getitems__`), so no per-sample collate runs.

    A batch's story keeps only as many memory slots as its longest story fills (slots are
    left-aligned): most stories are far shorter than `memory_size`, and empty slots cost compute.
    """

    def __init__(self, tensors: dict[str, Tensor]) -> None:
        self.tensors = tensors
        self.slots = tensors["story"].ne(0).any(-1).sum(-1)  # (N,) filled memory slots per example

    def __len__(self) -> int:
        return len(self.tensors["answer"])

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        return {k: v[index].long() for k, v in self.tensors.items()}

    def __getitems__(self, indices: list[int]) -> dict[str, Tensor]:
        index = torch.as_tensor(indices, dtype=torch.long)
        batch = {k: v[index].long() for k, v in self.tensors.items()}
        batch["story"] = batch["story"][:, : max(int(self.slots[index].max()), 1)]  # (B, S_batch, L)
        return batch


_Batch = TypeVar("_Batch")  # what the dataset's __getitems__ returns: DataLoader passes it to collate_fn


def _batch_as_is(batch: _Batch) -> _Batch:
    """Collate for `QADataset`: `__getitems__` already returns the batch (module level so workers can pickle it)."""
    return batch


@dataclass
class QAData:
    """Vectorised splits with the vocabularies that give their ids meaning: what a qa datamodule serves."""

    vocab: list[str]
    answers: list[str]
    splits: dict[str, dict[str, Tensor]]  # "train"/"val"/"test" -> story (N, S, L), query (N, Lq), answer, task

    @classmethod
    def from_examples(cls, splits: dict[str, list[Example]], seen: Sequence[Example], *, memory_size: int,
                      fit_memory: bool = False) -> QAData:
        """Vocabularies from the `seen` examples, widths from every split's longest sentence and query, then tensors.

        `fit_memory`: min(`memory_size`, the longest `seen` story) slots, the MemN2N reference code's rule.
        """
        every = [ex for examples in splits.values() for ex in examples]
        if fit_memory:
            memory_size = min(memory_size, max((len(ex.story) for ex in seen), default=1) or 1)
        shape = {"memory_size": memory_size,
                 "sentence_len": max((len(s) for ex in every for s in ex.story), default=1) or 1,
                 "query_len": max((len(ex.query) for ex in every), default=1) or 1}
        vocab, answers = build_vocab(seen), build_answers(seen)
        return cls(vocab, answers, {k: vectorize(v, vocab, answers, **shape) for k, v in splits.items()})

    def dims(self, tasks: list[int]) -> QADims:
        """What a model needs to know about the data."""
        story, query = self.splits["train"]["story"], self.splits["train"]["query"]
        word_index = {w: i for i, w in enumerate(self.vocab)}
        # one global sentence length J covers statements and questions (as in the MemN2N reference code)
        return QADims(vocab_size=len(self.vocab), num_answers=len(self.answers), memory_size=story.shape[1],
                      sentence_len=max(story.shape[2], query.shape[1]), query_len=query.shape[1],
                      answer_words=[word_index.get(a, UNK) for a in self.answers], tasks=list(tasks), pad_id=PAD)

    def words(self, ids: Tensor) -> str:
        """1-D word ids as space-separated words, pads dropped."""
        return " ".join(self.vocab[i] for i in ids.tolist() if i != PAD)

    def state(self) -> dict[str, Any]:
        """What a checkpoint needs to give the same ids to other data."""
        story, query = self.splits["train"]["story"], self.splits["train"]["query"]
        return {"vocab": self.vocab, "answers": self.answers, "memory_size": story.shape[1],
                "sentence_len": story.shape[2], "query_len": query.shape[1]}

    def adopt(self, state: dict[str, Any]) -> QAData:
        """The same examples in a checkpoint's vocabularies and widths (unknown words -> <unk>)."""
        mine = self.state()
        if mine == state:
            return self
        if state["memory_size"] != mine["memory_size"]:
            raise UserError(f"the checkpoint was trained with {state['memory_size']} memory slots, these data have "
                            f"{mine['memory_size']}: set data.memory_size={state['memory_size']} data.fit_memory=false")
        if mine["sentence_len"] > state["sentence_len"] or mine["query_len"] > state["query_len"]:
            log.warning("sentences and queries are cut to the checkpoint's %d and %d words (these data have %d and %d)",
                        state["sentence_len"], state["query_len"], mine["sentence_len"], mine["query_len"])
        word_index = {w: i for i, w in enumerate(state["vocab"])}
        answer_index = {a: i for i, a in enumerate(state["answers"])}
        words = torch.tensor([word_index.get(w, UNK) for w in self.vocab])  # old id -> checkpoint id
        classes = torch.tensor([answer_index.get(a, 0) for a in self.answers])
        dtype = _id_dtype(len(state["vocab"]))
        splits = {
            name: {"story": _fit(words[t["story"].long()], state["sentence_len"]).to(dtype),
                   "query": _fit(words[t["query"].long()], state["query_len"]).to(dtype),
                   "answer": classes[t["answer"]], "task": t["task"]}
            for name, t in self.splits.items()
        }
        return QAData(list(state["vocab"]), list(state["answers"]), splits)

    def loader(self, split: str, *, batch_size: int, shuffle: bool, num_workers: int = 0,
               replacement: bool = False) -> DataLoader:
        """A DataLoader of dict batches; shuffled from torch's global RNG, so `seed_everything` fixes the order.
        `replacement`: each batch drawn uniformly with replacement, ⌊N / batch_size⌋ batches an epoch."""
        # A batch_size loader over a RandomSampler or none (not a custom sampler) lets Lightning swap in its
        # DistributedSampler (ddp: it shuffles each rank's share, without replacement) or SequentialSampler
        # (overfit_batches) and keep the batch size.
        dataset = QADataset(self.splits[split])
        sampler = None
        if replacement:
            batches = max(len(dataset) // batch_size, 1)
            sampler = RandomSampler(dataset, replacement=True, num_samples=batches * batch_size)
        return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle and sampler is None, sampler=sampler,
                          num_workers=num_workers, collate_fn=_batch_as_is, persistent_workers=num_workers > 0)


def _fit(ids: Tensor, width: int) -> Tensor:
    """Pad with zeros or cut the last dimension to `width`."""
    if ids.shape[-1] >= width:
        return ids[..., :width]
    return torch.nn.functional.pad(ids, (0, width - ids.shape[-1]))
