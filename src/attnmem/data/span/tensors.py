"""Span QA examples as tensors, whatever their source: tokens with character offsets,
character spans mapped to token spans, truncation, vocabulary, batches.

Word id 0 is `<pad>` and 1 is `<unk>`. Each example keeps its text and token offsets, so a
predicted token span maps back to the exact characters of the context (what EM/F1 compare).
Character ids (`word_len` > 0) are fixed, not learned from the data: 0 `<pad>`, 1 `<unk>` (a code point
past 255), 2 + the code point of a Latin-1 character; a word keeps its first `word_len` characters.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

log = logging.getLogger(__name__)

PAD, UNK = 0, 1
CHAR_VOCAB_SIZE = 258  # <pad>, <unk>, the 256 Latin-1 code points
# words (letters, digits, underscore) or single other non-space characters: every token keeps its offsets
_TOKEN = re.compile(r"\w+|[^\w\s]")


def tokenize(text: str) -> list[tuple[str, int, int]]:
    """Tokens of `text` with their character offsets `(token, start, end)`, `text[start:end] == token`."""
    return [(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(text)]


@dataclass(frozen=True)
class SpanRecord:
    """One question as read from a file or generated: text and character-level answers."""

    id: str
    context: str
    question: str
    answers: tuple[tuple[str, int], ...]  # (text, answer_start) pairs; the first one is trained on


@dataclass(frozen=True)
class SpanExample:
    """A tokenised question: what a batch's `index` points at to map token spans back to text."""

    id: str
    context: str
    offsets: tuple[tuple[int, int], ...]  # character span of each (kept) context token
    context_words: tuple[str, ...]
    question_words: tuple[str, ...]
    answers: tuple[str, ...]  # every reference text, for EM/F1
    start: int  # token span of the first answer; -1 when it is not among the kept tokens
    end: int

    def span_text(self, start: int, end: int) -> str:
        """The context's characters from token `start` to token `end` (inclusive)."""
        return self.context[self.offsets[start][0] : self.offsets[end][1]]


def align(offsets: Sequence[tuple[int, int]], char_start: int, char_end: int) -> tuple[int, int, bool] | None:
    """Token span covering characters [char_start, char_end), and whether its edges are the answer's own.

    None when no token overlaps the characters (an answer of only white space).
    """
    covering = [i for i, (s, e) in enumerate(offsets) if s < char_end and e > char_start]
    if not covering:
        return None
    first, last = covering[0], covering[-1]
    return first, last, offsets[first][0] == char_start and offsets[last][1] == char_end


def build_examples(
    records: Iterable[SpanRecord], *, split: str, max_context_len: int, max_question_len: int, lowercase: bool
) -> list[SpanExample]:
    """Tokenise, align the first answer, truncate; training drops what it cannot learn from, with counts.

    Training skips questions whose answer cannot be aligned exactly to token edges or lies past the
    truncation; validation and test keep every question (EM/F1 compare text), with span -1 for
    the loss when the answer is past the kept tokens.
    """
    counts: Counter[str] = Counter()
    examples = []
    for record in records:
        tokens = tokenize(record.context)
        counts["truncated"] += len(tokens) > max_context_len
        text, char_start = record.answers[0]
        aligned = align([(s, e) for _, s, e in tokens], char_start, char_start + len(text))
        start, end = (aligned[0], aligned[1]) if aligned is not None else (-1, -1)
        if aligned is None or not aligned[2]:
            counts["unaligned"] += 1
        if end >= max_context_len:
            counts["past_truncation"] += 1
            start, end = -1, -1
        if split == "train" and (start < 0 or aligned is None or not aligned[2]):
            continue
        tokens = tokens[:max_context_len]
        offsets = tuple((s, e) for _, s, e in tokens)
        words = tuple(w.lower() if lowercase else w for w, _, _ in tokens)
        question = tuple(w.lower() if lowercase else w for w, _, _ in tokenize(record.question)[:max_question_len])
        examples.append(
            SpanExample(
                record.id, record.context, offsets, words, question, tuple(t for t, _ in record.answers), start, end
            )
        )
    log.info("%s split: %d question(s)", split, len(examples))
    for name, number in sorted(counts.items()):
        if number:
            log.warning(
                "%s split: %d question(s) %s%s",
                split,
                number,
                _WHY[name],
                " (skipped)" if split == "train" and name != "truncated" else "",
            )
    return examples


_WHY = {
    "truncated": "with contexts cut to data.max_context_len tokens",
    "past_truncation": "whose answer lies past the cut",
    "unaligned": "whose answer does not start and end on token edges",
}


def build_vocab(examples: Iterable[SpanExample], min_count: int = 1, also: Iterable[str] = ()) -> list[str]:
    """Word list, id -> word: `<pad>`, `<unk>`, then every context and question word of `examples` seen
    `min_count` times and every word of `also` (those with a pretrained vector), sorted."""
    counts = Counter(w for ex in examples for w in (*ex.context_words, *ex.question_words))
    return ["<pad>", "<unk>", *sorted({w for w, c in counts.items() if c >= min_count} | set(also))]


def words(examples: Iterable[SpanExample]) -> set[str]:
    """Every context and question word of `examples`."""
    return {w for ex in examples for w in (*ex.context_words, *ex.question_words)}


def char_ids(sequences: Sequence[Sequence[str]], width: int, word_len: int) -> Tensor:
    """The character ids of each word of `sequences`, right-padded: (N, width, word_len), int16."""
    rows = {w: i + 1 for i, w in enumerate(sorted({w for words in sequences for w in words}))}  # row 0: padding
    table = torch.zeros(len(rows) + 1, word_len, dtype=torch.int16)  # (U+1, W)
    for w, row in rows.items():
        codes = [2 + ord(c) if ord(c) < 256 else UNK for c in w[:word_len]]
        table[row, : len(codes)] = torch.tensor(codes, dtype=torch.int16)
    index = torch.zeros(len(sequences), width, dtype=torch.long)  # (N, width)
    for i, words in enumerate(sequences):
        index[i, : len(words)] = torch.tensor([rows[w] for w in words], dtype=torch.long)
    return table[index]  # (N, width, W)


def vectorize(examples: Sequence[SpanExample], vocab: list[str], word_len: int = 0) -> dict[str, Tensor]:
    """Right-padded word ids and spans: context (N, Lc), question (N, Lq), start, end, index (N,); with
    `word_len` > 0 also the character ids context_chars (N, Lc, W) and question_chars (N, Lq, W)."""
    index = {w: i for i, w in enumerate(vocab)}
    n = len(examples)
    width_c = max((len(ex.context_words) for ex in examples), default=1)
    width_q = max((len(ex.question_words) for ex in examples), default=1)
    context = torch.zeros(n, max(width_c, 1), dtype=torch.int32)  # (N, Lc)
    question = torch.zeros(n, max(width_q, 1), dtype=torch.int32)  # (N, Lq)
    for i, ex in enumerate(examples):
        context[i, : len(ex.context_words)] = torch.tensor(
            [index.get(w, UNK) for w in ex.context_words], dtype=torch.int32
        )
        question[i, : len(ex.question_words)] = torch.tensor(
            [index.get(w, UNK) for w in ex.question_words], dtype=torch.int32
        )
    tensors = {
        "context": context,
        "question": question,
        "start": torch.tensor([ex.start for ex in examples], dtype=torch.long),
        "end": torch.tensor([ex.end for ex in examples], dtype=torch.long),
        "index": torch.arange(n),
    }
    if word_len > 0:
        tensors["context_chars"] = char_ids([ex.context_words for ex in examples], context.shape[1], word_len)
        tensors["question_chars"] = char_ids([ex.question_words for ex in examples], question.shape[1], word_len)
    return tensors


class SpanDataset(Dataset):
    """Pre-built tensors indexed a batch at a time; a batch is cut to its longest context and question."""

    def __init__(self, tensors: dict[str, Tensor]) -> None:
        self.tensors = tensors
        self.context_len = tensors["context"].ne(PAD).sum(-1)  # (N,)
        self.question_len = tensors["question"].ne(PAD).sum(-1)  # (N,)

    def __len__(self) -> int:
        return len(self.tensors["index"])

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        return {k: v[index].long() for k, v in self.tensors.items()}

    def __getitems__(self, indices: list[int]) -> dict[str, Tensor]:
        index = torch.as_tensor(indices, dtype=torch.long)
        batch = {k: v[index].long() for k, v in self.tensors.items()}
        lengths = {"context": self.context_len, "question": self.question_len}
        for key in [k for k in batch if k.startswith(("context", "question"))]:
            side = lengths[key.removesuffix("_chars")]
            batch[key] = batch[key][:, : max(int(side[index].max()), 1)]  # (B, Lc[, W]), (B, Lq[, W])
        return batch


_Batch = TypeVar("_Batch")  # what the dataset's __getitems__ returns: DataLoader passes it to collate_fn


def _batch_as_is(batch: _Batch) -> _Batch:
    """Collate for `SpanDataset` (module level so workers can pickle it)."""
    return batch


@dataclass
class SpanData:
    """Tokenised splits, their vocabulary and tensors: what a span datamodule serves."""

    vocab: list[str]
    examples: dict[str, list[SpanExample]]  # "train"/"val"/"test" -> examples, in tensor order
    word_len: int = 0  # characters per word in the character ids; 0: none

    def __post_init__(self) -> None:
        self.tensors = {split: vectorize(ex, self.vocab, self.word_len) for split, ex in self.examples.items()}

    def state(self) -> dict[str, Any]:
        """What a checkpoint needs to give other data the same ids."""
        return {"vocab": list(self.vocab)}

    def adopt(self, state: dict[str, Any]) -> SpanData:
        """The same examples in a checkpoint's vocabulary (unknown words -> <unk>)."""
        return self if state["vocab"] == self.vocab else SpanData(list(state["vocab"]), self.examples, self.word_len)

    def words(self, ids: Tensor) -> list[str]:
        """1-D word ids as words, pads dropped."""
        return [self.vocab[i] for i in ids.tolist() if i != PAD]

    def loader(self, split: str, *, batch_size: int, shuffle: bool, num_workers: int = 0) -> DataLoader:
        """A DataLoader of dict batches, shuffled from torch's global RNG (seed_everything fixes the order)."""
        return DataLoader(
            SpanDataset(self.tensors[split]),
            batch_size=batch_size,
            shuffle=shuffle,
            num_workers=num_workers,
            collate_fn=_batch_as_is,
            persistent_workers=num_workers > 0,
        )
