"""The paragraphs of a SQuAD-format file as documents labelled by their article: topic classification."""

from __future__ import annotations

import json
from pathlib import Path

from attnmem.core.errors import UserError
from attnmem.core.text import read_utf8
from attnmem.data.catalog import ensure
from attnmem.data.classify.document import Document, parsed, split_documents
from attnmem.data.squad_articles import first_articles

__all__ = ["SquadTopics"]


class SquadTopics:
    """Every paragraph (`context`) of a SQuAD v1.1 file is one document, its label its article's title.

    Unlike `data/squad_articles.py`'s split by article (span QA must not see a test article's text), the
    split here is by paragraph: every article is a class, so `val_fraction` / `test_fraction` of each
    article's paragraphs are held out, drawn with `seed`. `first_articles` keeps only the file's first articles;
    `download` fetches a missing SQuAD v1.1 file.
    """

    def __init__(self, *, path: str, val_fraction: float = 0.15, test_fraction: float = 0.15, seed: int = 0,
                 lowercase: bool = True, first_articles: int | None = None, download: bool = False) -> None:
        self.path, self.fractions = Path(path), [val_fraction, test_fraction]
        self.seed, self.lowercase, self.first, self.download = seed, lowercase, first_articles, download
        self.data_files = [self.path]

    def prepare(self) -> None:
        """Fetch the file if asked and missing; else stop with one line naming the command that fetches it."""
        ensure({"data.source.path": self.path}, self.download)

    def load(self) -> dict[str, list[Document]]:
        """The paragraphs of each split."""
        self.prepare()
        try:
            articles = first_articles(json.loads(read_utf8(self.path, "SQuAD files"))["data"], self.first, self.path)
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise UserError(f"{self.path}: not a SQuAD v1.1 file ({err}): it needs a top-level \"data\" list") from None
        documents = [
            parsed(article.get("title", str(a)), paragraph["context"], f"{self.path}:data[{a}].paragraphs[{p}]",
                   self.lowercase)
            for a, article in enumerate(articles)
            for p, paragraph in enumerate(article["paragraphs"])
        ]
        train, val, test = split_documents(documents, self.fractions, self.seed, "data.source")
        return {"train": train, "val": val, "test": test}
