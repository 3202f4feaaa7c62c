"""SQuAD (Rajpurkar et al. 2016, arXiv:1606.05250) read from the official JSON files, v1.1 or v2.0.

Schema: `{"data": [{"title", "paragraphs": [{"context", "qas": [{"id", "question", "answers":
[{"text", "answer_start"}]}]}]}]}`. v2.0's unanswerable questions are skipped with a count.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import lightning as L
from torch.utils.data import DataLoader

from attnmem.core.dims import SpanDims
from attnmem.core.errors import UserError
from attnmem.data.glove import read_embeddings
from attnmem.data.span_tensors import SpanData, SpanExample, SpanRecord, build_examples, build_vocab

log = logging.getLogger(__name__)

Article = list[SpanRecord]


def _field(obj: Any, key: str, where: str, source: Path) -> Any:
    """`obj[key]`, or one line naming the file and the JSON path of the missing key."""
    if not isinstance(obj, dict) or key not in obj:
        raise UserError(f"{source}: {f'{where}.{key}' if where else key} is missing (the SQuAD format needs it)")
    return obj[key]


def read_squad(path: Path) -> list[Article]:
    """Every answerable question of a SQuAD file, grouped by article; skipped questions are counted."""
    try:
        root = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise UserError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    skipped = {"unanswerable": 0, "bad_start": 0}
    first_bad = None
    articles = []
    for a, article in enumerate(_field(root, "data", "", path)):
        records = []
        for p, paragraph in enumerate(_field(article, "paragraphs", f"data[{a}]", path)):
            where = f"data[{a}].paragraphs[{p}]"
            context = _field(paragraph, "context", where, path)
            for q, qa in enumerate(_field(paragraph, "qas", where, path)):
                at = f"{where}.qas[{q}]"
                answers = []
                for n, answer in enumerate(_field(qa, "answers", at, path)):
                    text = _field(answer, "text", f"{at}.answers[{n}]", path)
                    start = _field(answer, "answer_start", f"{at}.answers[{n}]", path)
                    if not isinstance(start, int) or start < 0 or start + len(text) > len(context):
                        skipped["bad_start"] += 1
                        first_bad = first_bad or f"{at}.answers[{n}]"
                        continue
                    answers.append((text, start))
                qid, question = _field(qa, "id", at, path), _field(qa, "question", at, path)
                if not answers:
                    # a question whose answers all had a bad start is counted with those
                    skipped["unanswerable"] += qa.get("is_impossible", False) or not qa["answers"]
                    continue
                records.append(SpanRecord(str(qid), context, question, tuple(answers)))
        articles.append(records)
    if skipped["bad_start"]:
        log.warning(
            "%s: %d answer(s) with answer_start beyond the context skipped (first: %s)",
            path,
            skipped["bad_start"],
            first_bad,
        )
    if skipped["unanswerable"]:
        log.warning("%s: %d unanswerable question(s) skipped", path, skipped["unanswerable"])
    return articles


def split_articles(count: int, fractions: Sequence[float], seed: int) -> list[list[int]]:
    """Article indices in seeded random order, cut into parts of the given fractions (each >= 1 when > 0)."""
    order = list(range(count))
    random.Random(f"squad/{seed}").shuffle(order)
    sizes = [max(1, round(f * count)) if f > 0 else 0 for f in fractions]
    if sum(sizes) >= count:
        raise UserError(f"data.val_fraction/test_fraction leave no training article out of {count}")
    parts, first = [], 0
    for size in sizes:
        parts.append(sorted(order[first : first + size]))
        first += size
    return [sorted(order[first:]), *parts]


class SquadDataModule(L.LightningDataModule):
    """SQuAD-format files: train, validation (a file, or a seeded split of the training articles), test.

    Contexts are tokenised keeping character offsets (regex, no model download); the first answer
    of each question is its training span, every answer is a reference for EM/F1. The vocabulary
    comes from the training questions; `embeddings` names an optional GloVe-format text file.
    Without `test_path`, `test_fraction` of the training articles (if > 0) form the test split.
    """

    family: ClassVar[str] = "span"
    family_module: ClassVar[str] = "attnmem.tasks.span.SpanTask"

    def __init__(
        self,
        *,
        train_path: str,
        val_path: str | None = None,
        test_path: str | None = None,
        val_fraction: float = 0.1,
        test_fraction: float = 0.0,
        split_seed: int = 0,
        max_context_len: int = 400,
        max_question_len: int = 40,
        lowercase: bool = True,
        min_count: int = 1,
        embeddings: str | None = None,
        batch_size: int = 32,
        num_workers: int = 0,
    ) -> None:
        super().__init__()
        for name, value in {"val_fraction": val_fraction, "test_fraction": test_fraction}.items():
            if not 0 <= value < 1:
                raise ValueError(f"data.{name} must be in [0, 1), got {value}")
        for name, value in {
            "max_context_len": max_context_len,
            "max_question_len": max_question_len,
            "min_count": min_count,
            "batch_size": batch_size,
        }.items():
            if value < 1:
                raise ValueError(f"data.{name} must be >= 1, got {value}")
        if val_path is None and val_fraction == 0:
            raise ValueError("data.val_path is null and data.val_fraction is 0: give one of them")
        self.paths = {
            "train": Path(train_path),
            "val": val_path and Path(val_path),
            "test": test_path and Path(test_path),
        }
        self.fractions = {"val": 0.0 if val_path else val_fraction, "test": 0.0 if test_path else test_fraction}
        self.split_seed, self.min_count, self.embeddings = split_seed, min_count, embeddings and Path(embeddings)
        self.sizes = {"max_context_len": max_context_len, "max_question_len": max_question_len, "lowercase": lowercase}
        self.batch_size, self.num_workers = batch_size, num_workers
        self.data_files = [p for p in (*self.paths.values(), self.embeddings) if p is not None]
        self._data: SpanData | None = None
        self._state: dict[str, Any] | None = None
        self._embedding_weight = None

    def prepare_data(self) -> None:
        for split, path in self.paths.items():
            if path is not None and not path.is_file():
                raise UserError(f"data.{split}_path={path}: no such file")

    def setup(self, stage: str | None = None) -> None:
        if self._data is not None:
            return
        records = self._records()
        examples = {split: build_examples(r, split=split, **self.sizes) for split, r in records.items()}
        data = SpanData(build_vocab(examples["train"], self.min_count), examples)
        self._data = data.adopt(self._state) if self._state is not None else data
        if self.embeddings is not None:
            self._embedding_weight, _ = read_embeddings(self.embeddings, self._data.vocab, seed=self.split_seed)

    def _records(self) -> dict[str, list[SpanRecord]]:
        """Questions of each split: files as given, the rest split by article from the training file."""
        articles = read_squad(self.paths["train"])
        train, val, test = split_articles(
            len(articles), [self.fractions["val"], self.fractions["test"]], self.split_seed
        )
        records = {"train": [r for i in train for r in articles[i]]}
        for split, part in (("val", val), ("test", test)):
            path = self.paths[split]
            if path is not None:
                records[split] = [r for article in read_squad(path) for r in article]
            elif part:
                records[split] = [r for i in part for r in articles[i]]
        return records

    @property
    def data(self) -> SpanData:
        """The built data; `setup()` must have run."""
        if self._data is None:
            raise RuntimeError("call setup() before using the datamodule's data")
        return self._data

    @property
    def dims(self) -> SpanDims:
        return SpanDims(vocab_size=len(self.data.vocab), embeddings=self._embedding_weight)

    @property
    def has_test(self) -> bool:
        return "test" in self.data.examples

    def examples(self, split: str) -> list[SpanExample]:
        """The examples a batch's `index` points into."""
        return self.data.examples[split]

    def train_dataloader(self) -> DataLoader:
        return self.data.loader("train", batch_size=self.batch_size, shuffle=True, num_workers=self.num_workers)

    def val_dataloader(self) -> DataLoader:
        return self.data.loader("val", batch_size=self.batch_size, shuffle=False, num_workers=self.num_workers)

    def test_dataloader(self) -> DataLoader:
        return self.data.loader("test", batch_size=self.batch_size, shuffle=False, num_workers=self.num_workers)

    def state_dict(self) -> dict[str, Any]:
        return self.data.state() if self._data is not None else dict(self._state or {})

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._state = dict(state_dict) or None
        if self._data is not None and self._state is not None:
            self._data = self._data.adopt(self._state)
