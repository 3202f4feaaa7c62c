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
from typing import Any

from torch import Tensor

from attnmem.core.errors import UserError
from attnmem.data.span.glove import read_embeddings
from attnmem.data.span.tensors import SpanRecord

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
        raise UserError(f"data.source.val_fraction/test_fraction leave no training article out of {count}")
    parts, first = [], 0
    for size in sizes:
        parts.append(sorted(order[first : first + size]))
        first += size
    return [sorted(order[first:]), *parts]


class SquadFiles:
    """SQuAD-format files as a span source (`data.source`): train, validation (a file, or a seeded split of the
    training articles), test.

    Without `test_path`, `test_fraction` of the training articles (if > 0) form the test split;
    `embeddings` names an optional GloVe-format text file, its missing words drawn from `split_seed`.
    """

    def __init__(
        self,
        *,
        train_path: str,
        val_path: str | None = None,
        test_path: str | None = None,
        val_fraction: float = 0.1,
        test_fraction: float = 0.0,
        split_seed: int = 0,
        embeddings: str | None = None,
    ) -> None:
        for name, value in {"val_fraction": val_fraction, "test_fraction": test_fraction}.items():
            if not 0 <= value < 1:
                raise ValueError(f"data.source.{name} must be in [0, 1), got {value}")
        if val_path is None and val_fraction == 0:
            raise ValueError("data.source.val_path is null and data.source.val_fraction is 0: give one of them")
        self.paths = {
            "train": Path(train_path),
            "val": val_path and Path(val_path),
            "test": test_path and Path(test_path),
        }
        self.fractions = {"val": 0.0 if val_path else val_fraction, "test": 0.0 if test_path else test_fraction}
        self.split_seed, self.embeddings = split_seed, embeddings and Path(embeddings)
        self.data_files = [p for p in (*self.paths.values(), self.embeddings) if p is not None]

    def prepare_data(self) -> None:
        """Stop with one line naming the option of a file that is not there."""
        for split, path in self.paths.items():
            if path is not None and not path.is_file():
                raise UserError(f"data.source.{split}_path={path}: no such file")

    def splits(self) -> dict[str, list[SpanRecord]]:
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

    def embedding_weight(self, vocab: list[str]) -> Tensor | None:
        """The GloVe vectors of `vocab` when `embeddings` names a file."""
        return None if self.embeddings is None else read_embeddings(self.embeddings, vocab, seed=self.split_seed)[0]
