"""The bAbI v1.2 files as an embeddings corpus: each story's text, line numbers, answers and supports stripped."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from attnmem.core.errors import UserError
from attnmem.data.catalog import fetch_for
from attnmem.data.embeddings.folder import FolderCorpus

_LINE = re.compile(r"(\d+) (.*)")


class BabiCorpus(FolderCorpus):
    """The stories of the bAbI files matching `pattern` in `data_dir` (`*_train.txt`: every task's training file).

    A story (from a line numbered 1 to the next) is one document: its statements, and its questions without
    the answer and supporting line numbers that follow the question's tab. Validation is a seeded
    `val_fraction` of the stories. With `download`, a missing `en/` or `en-10k/` folder is fetched first (`attnmem-data
    fetch babi` into its parent).
    """

    default_pattern = "*_train.txt"
    expected = "expected bAbI files such as qa1_single-supporting-fact_train.txt"

    def __init__(self, *, data_dir: str, pattern: str | None = None, val_fraction: float = 0.05, split_seed: int = 0,
                 download: bool = False) -> None:
        super().__init__(data_dir=data_dir, pattern=pattern, val_fraction=val_fraction, split_seed=split_seed)
        self.download = download

    def prepare_data(self) -> None:
        """Fetch the bAbI folders if asked and missing; then stop with one line when the folder holds no file."""
        if self.download and not self.data_dir.is_dir():
            fetch_for(self.data_dir)  # en/ or en-10k/: bAbI into its parent; another folder: nothing to fetch
        super().prepare_data()

    def read(self, path: Path) -> Iterator[str]:
        """The file's stories; a line without its number stops naming the file and line."""
        story: list[str] = []
        with path.open(encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                match = _LINE.fullmatch(line.rstrip("\r\n"))
                if match is None:
                    raise UserError(f"{path}:{lineno}: expected 'ID text', got {line.strip()!r}")
                if match[1] == "1" and story:
                    yield " ".join(story)
                    story = []
                story.append(match[2].split("\t")[0])  # a question's text, without answer and supports
        if story:
            yield " ".join(story)
