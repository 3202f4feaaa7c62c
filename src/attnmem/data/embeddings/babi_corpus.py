"""The bAbI v1.2 files as an embeddings corpus: each story's text, line numbers, answers and supports stripped."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from attnmem.core.errors import UserError
from attnmem.data.embeddings.corpus import held_out

_LINE = re.compile(r"(\d+) (.*)")


class BabiCorpus:
    """The stories of the bAbI files matching `pattern` in `data_dir` (`*_train.txt`: every task's training file).

    A story (from a line numbered 1 to the next) is one document: its statements, and its questions without
    the answer and supporting line numbers that follow the question's tab. Validation is a seeded
    `val_fraction` of the stories.
    """

    def __init__(
        self, *, data_dir: str, pattern: str = "*_train.txt", val_fraction: float = 0.05, split_seed: int = 0
    ) -> None:
        if not 0 < val_fraction < 1:
            raise ValueError(f"data.source.val_fraction must be in (0, 1), got {val_fraction}")
        self.data_dir, self.pattern = Path(data_dir).expanduser(), pattern
        self.val_fraction, self.split_seed = val_fraction, split_seed
        self.where = f"data.source.data_dir={self.data_dir}"
        self.data_files: list[Path] = []

    def prepare_data(self) -> None:
        """Stop with one line when the folder holds no matching bAbI file."""
        self.data_files = sorted(self.data_dir.glob(self.pattern)) if self.data_dir.is_dir() else []
        if not self.data_files:
            raise UserError(
                f"{self.where}: no bAbI file matches data.source.pattern={self.pattern} "
                "(expected files such as qa1_single-supporting-fact_train.txt)"
            )

    def stories(self) -> Iterator[str]:
        """Every story's text, file by file; a line without its number stops naming the file and line."""
        if not self.data_files:
            self.prepare_data()
        for path in self.data_files:
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

    def documents(self, split: str) -> Iterator[str]:
        """The stories of `split`."""
        return held_out(self.stories(), split, self.val_fraction, self.split_seed)
