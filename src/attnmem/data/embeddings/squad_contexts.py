"""The paragraphs (contexts) of a SQuAD-format file as an embeddings corpus, split by article like `SquadFiles`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from attnmem.core.errors import UserError
from attnmem.core.text import read_utf8
from attnmem.data.catalog import ensure
from attnmem.data.squad_articles import first_articles, split_articles


class SquadContexts:
    """Each paragraph's `context` of the SQuAD file `path` is one document; questions are not read.

    The articles are split as the span family's `SquadFiles` splits them with the same `val_fraction`,
    `test_fraction` and `split_seed`: training text is only the training articles' paragraphs (vectors for
    a DCN trained on that split never saw its validation or test text), validation the validation articles'.
    `first_articles` keeps only the file's first articles; `download` fetches a missing SQuAD v1.1 file.
    """

    def __init__(
        self, *, path: str, val_fraction: float = 0.1, test_fraction: float = 0.0, split_seed: int = 0,
        first_articles: int | None = None, download: bool = False,
    ) -> None:
        if not 0 < val_fraction < 1 or not 0 <= test_fraction < 1:
            raise ValueError(
                f"data.source.val_fraction must be in (0, 1) and test_fraction in [0, 1), "
                f"got {val_fraction} and {test_fraction}"
            )
        self.path = Path(path).expanduser()
        self.fractions, self.split_seed = [val_fraction, test_fraction], split_seed
        self.where = f"data.source.path={self.path}"  # what the datamodule's errors name
        self.first, self.download = first_articles, download
        self.data_files = [self.path]
        self._articles: list[list[str]] | None = None

    def prepare_data(self) -> None:
        """Fetch the file if asked and missing; else stop with one line naming the command that fetches it."""
        ensure({"data.source.path": self.path}, self.download)

    def articles(self) -> list[list[str]]:
        """The contexts of each article, in file order; a file that is not SQuAD JSON stops in one line."""
        if self._articles is None:
            self.prepare_data()
            text = read_utf8(self.path, "SQuAD files (JSON)")
            try:
                root = json.loads(text) if text.strip() else {}
            except json.JSONDecodeError as err:
                raise UserError(f"{self.path}:{err.lineno}: not valid JSON ({err.msg})") from None
            try:
                articles = [[p["context"] for p in a["paragraphs"]] for a in root["data"]]
            except (KeyError, TypeError) as err:
                raise UserError(
                    f"{self.path}: not a SQuAD file (missing {err}): expected "
                    '{"data": [{"paragraphs": [{"context": ...}]}]}'
                ) from None
            self._articles = first_articles(articles, self.first, self.path)
        return self._articles

    def documents(self, split: str) -> Iterator[str]:
        """The paragraphs of `split`'s articles."""
        articles = self.articles()
        train, val, _ = split_articles(len(articles), self.fractions, self.split_seed)
        for i in train if split == "train" else val:
            yield from articles[i]
