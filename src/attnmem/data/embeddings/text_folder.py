"""A folder of plain UTF-8 text files as an embeddings corpus: every non-blank line is a document."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from attnmem.core.errors import UserError
from attnmem.data.embeddings.corpus import held_out


class TextFolder:
    """The files matching `pattern` in `data_dir` (sorted; `**/*.txt` reaches sub-folders), read line by line.

    Validation is a seeded `val_fraction` of the lines (`split_seed`), the rest is training text.
    """

    def __init__(
        self, *, data_dir: str, pattern: str = "*.txt", val_fraction: float = 0.05, split_seed: int = 0
    ) -> None:
        if not 0 < val_fraction < 1:
            raise ValueError(f"data.source.val_fraction must be in (0, 1), got {val_fraction}")
        self.data_dir, self.pattern = Path(data_dir).expanduser(), pattern
        self.val_fraction, self.split_seed = val_fraction, split_seed
        self.where = f"data.source.data_dir={self.data_dir}"
        self.data_files: list[Path] = []

    def prepare_data(self) -> None:
        """Stop with one line when the folder is missing or holds no matching file."""
        if not self.data_dir.is_dir():
            raise UserError(f"{self.where}: no such folder")
        self.data_files = sorted(p for p in self.data_dir.glob(self.pattern) if p.is_file())
        if not self.data_files:
            raise UserError(
                f"{self.where}: no file matches data.source.pattern={self.pattern}: "
                "point data_dir at a folder of .txt files"
            )

    def lines(self) -> Iterator[str]:
        """Every non-blank line of every file, in order; a file that is not UTF-8 stops naming it and its line."""
        if not self.data_files:
            self.prepare_data()
        for path in self.data_files:
            with path.open(encoding="utf-8") as f:
                lineno = 0
                try:
                    for lineno, line in enumerate(f, 1):  # noqa: B007 - read in the error message
                        if line.strip():
                            yield line
                except UnicodeDecodeError:
                    raise UserError(f"{path}:{lineno + 1}: not UTF-8 text (save the file as UTF-8)") from None

    def documents(self, split: str) -> Iterator[str]:
        """The lines of `split`."""
        return held_out(self.lines(), split, self.val_fraction, self.split_seed)
