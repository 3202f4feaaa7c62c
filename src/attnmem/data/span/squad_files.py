"""SQuAD (Rajpurkar et al. 2016, arXiv:1606.05250) read from the official JSON files, v1.1 or v2.0.

Schema: `{"data": [{"title", "paragraphs": [{"context", "qas": [{"id", "question", "answers":
[{"text", "answer_start"}]}]}]}]}`. v2.0's unanswerable questions are skipped with a count; an answer
whose `text` is not at its `answer_start` is moved to the nearest occurrence of the text in its context, or
skipped when there is none, each kind counted in one warning naming the first one's JSON path.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Collection
from pathlib import Path
from typing import Any

from attnmem.core.errors import UserError
from attnmem.core.glove import Vectors, read_vectors
from attnmem.core.text import read_utf8
from attnmem.data.catalog import ensure
from attnmem.data.span.tensors import SpanRecord
from attnmem.data.squad_articles import first_articles, split_articles

log = logging.getLogger(__name__)

Article = list[SpanRecord]


def _field(obj: Any, key: str, where: str, source: Path) -> Any:
    """`obj[key]`, or one line naming the file and the JSON path of the missing key."""
    if not isinstance(obj, dict) or key not in obj:
        raise UserError(f"{source}: {f'{where}.{key}' if where else key} is missing (the SQuAD format needs it)")
    return obj[key]


def _load_json(path: Path) -> Any:
    """The JSON of a SQuAD file, or one line naming the file and where it is not UTF-8 JSON."""
    text = read_utf8(path, "SQuAD files (JSON)")
    if not text.strip():
        raise UserError(f'{path}: the file is empty (a SQuAD file is JSON: {{"data": [articles]}})')
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None


def find_answer(context: str, text: Any, start: Any) -> tuple[str, int]:
    """How and where `text` lies in `context`: ("exact", start), ("moved", nearest occurrence), or (why, -1).

    Like the official preprocessing, an answer whose text is not at its `answer_start` is moved to the exact
    occurrence nearest it; "bad_start" (an `answer_start` that is no index of the context: the answer may
    belong to another paragraph) and "missing" (a text absent from the context, or blank) cannot be aligned.
    """
    if not isinstance(start, int) or isinstance(start, bool) or not 0 <= start <= len(context):
        return "bad_start", -1
    if not isinstance(text, str) or not text.strip():
        return "missing", -1
    if context[start : start + len(text)] == text:
        return "exact", start
    found = [m.start() for m in re.finditer(f"(?={re.escape(text)})", context)]
    if not found:
        return "missing", -1
    return "moved", min(found, key=lambda at: (abs(at - start), at))


_SKIPPED = {
    "bad_start": "answer(s) with answer_start beyond the context skipped",
    "missing": "answer(s) whose text is not in the context skipped",
    "moved": "answer(s) whose text is not at answer_start moved to its nearest occurrence in the context",
    "unanswerable": "unanswerable question(s) skipped",
}


def _answers(qa: Any, context: str, at: str, path: Path, counts: Counter[str], first: dict[str, str]) -> list:
    """The (text, start) answers of one question that lie in `context`, the others counted by kind."""
    answers = []
    for n, answer in enumerate(_field(qa, "answers", at, path)):
        text = _field(answer, "text", f"{at}.answers[{n}]", path)
        kind, start = find_answer(context, text, _field(answer, "answer_start", f"{at}.answers[{n}]", path))
        if kind != "exact":
            counts[kind] += 1
            first.setdefault(kind, f"{at}.answers[{n}]")
        if start >= 0:
            answers.append((text, start))
    return answers


def read_squad(path: Path) -> list[Article]:
    """Every answerable question of a SQuAD file, grouped by article; moved and skipped answers are counted."""
    root = _load_json(path)
    counts: Counter[str] = Counter()
    first: dict[str, str] = {}
    articles = []
    for a, article in enumerate(_field(root, "data", "", path)):
        records = []
        for p, paragraph in enumerate(_field(article, "paragraphs", f"data[{a}]", path)):
            where = f"data[{a}].paragraphs[{p}]"
            context = _field(paragraph, "context", where, path)
            if not isinstance(context, str):
                raise UserError(f"{path}: {where}.context is {type(context).__name__}, not text")
            for q, qa in enumerate(_field(paragraph, "qas", where, path)):
                at = f"{where}.qas[{q}]"
                counts["questions"] += 1
                answers = _answers(qa, context, at, path, counts, first)
                qid, question = _field(qa, "id", at, path), _field(qa, "question", at, path)
                if not answers:
                    # a question whose answers all were skipped is counted with those
                    counts["unanswerable"] += qa.get("is_impossible", False) or not qa["answers"]
                    continue
                records.append(SpanRecord(str(qid), context, question, tuple(answers)))
        articles.append(records)
    for kind, why in _SKIPPED.items():
        if counts[kind]:
            log.warning("%s: %d %s%s", path, counts[kind], why, f" (first: {first[kind]})" if kind in first else "")
    if not any(articles):
        raise UserError(
            f"{path}: no usable question ({counts['questions']} read: {counts['unanswerable']} "
            f"unanswerable, {counts['bad_start'] + counts['missing']} answer(s) not in their context): "
            "a SQuAD file needs answerable questions whose answer text is in their context"
        )
    return articles


class SquadFiles:
    """SQuAD-format files as a span source (`data.source`): train, validation (a file, or a seeded split of the
    training articles), test.

    Without `test_path`, `test_fraction` of the training articles (if > 0) form the test split; `first_articles`
    keeps only that many articles of `train_path` (the CPU recipes: the first 40 of the dev file). `embeddings`
    names an optional GloVe-format text file of pretrained vectors. With `download`, a missing file that
    `attnmem-data` knows (the SQuAD v1.1 files, GloVe) is fetched into its folder.
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
        first_articles: int | None = None,
        embeddings: str | None = None,
        download: bool = False,
    ) -> None:
        for name, value in {"val_fraction": val_fraction, "test_fraction": test_fraction}.items():
            if not 0 <= value < 1:
                raise ValueError(f"data.source.{name} must be in [0, 1), got {value}")
        if val_path is None and val_fraction == 0:
            raise ValueError("data.source.val_path is null and data.source.val_fraction is 0: give one of them")
        self.train_path = Path(train_path)
        self.paths = {
            "train": self.train_path,
            "val": Path(val_path) if val_path else None,
            "test": Path(test_path) if test_path else None,
        }
        self.fractions = {"val": 0.0 if val_path else val_fraction, "test": 0.0 if test_path else test_fraction}
        self.split_seed, self.embeddings = split_seed, Path(embeddings) if embeddings else None
        self.first_articles, self.download = first_articles, download
        self.data_files = [p for p in (*self.paths.values(), self.embeddings) if p is not None]

    def prepare_data(self) -> None:
        """Fetch a missing file if asked; else stop with one line naming the command that fetches them."""
        files = {f"data.source.{split}_path": path for split, path in self.paths.items() if path is not None}
        if self.embeddings is not None:
            files["data.source.embeddings"] = self.embeddings
        ensure(files, self.download)

    def splits(self) -> dict[str, list[SpanRecord]]:
        """Questions of each split: files as given, the rest split by article from the training file."""
        articles = first_articles(read_squad(self.train_path), self.first_articles, self.train_path)
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

    def vectors(self, words: Collection[str]) -> Vectors | None:
        """The GloVe vectors of those `words` that the `embeddings` file has, when it names one."""
        return None if self.embeddings is None else read_vectors(self.embeddings, words)
