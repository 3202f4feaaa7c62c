"""A folder of plain UTF-8 text files as an embeddings corpus: every non-blank line is a document."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from attnmem.core.errors import UserError
from attnmem.data.embeddings.folder import FolderCorpus


class TextFolder(FolderCorpus):
    """The files matching `pattern` in `data_dir` (sorted; `**/*.txt` reaches sub-folders), read line by line.

    Validation is a seeded `val_fraction` of the lines (`split_seed`), the rest is training text.
    """

    default_pattern = "*.txt"
    expected = "point data_dir at a folder of .txt files"

    def read(self, path: Path) -> Iterator[str]:
        """The file's non-blank lines; a file that is not UTF-8 stops naming it and its line."""
        with path.open(encoding="utf-8") as f:
            lineno = 0
            try:
                for lineno, line in enumerate(f, 1):  # noqa: B007 - read in the error message
                    if line.strip():
                        yield line
            except UnicodeDecodeError:
                raise UserError(f"{path}:{lineno + 1}: not UTF-8 text (save the file as UTF-8)") from None
