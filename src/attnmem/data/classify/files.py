"""The user's labelled documents: JSONL (`{"label": ..., "text": ...}` per line) or TSV (`label<TAB>text`)."""

from __future__ import annotations

import json
from pathlib import Path

from attnmem.core.errors import UserError
from attnmem.core.text import read_utf8
from attnmem.data.classify.document import Document, parsed, split_documents

__all__ = ["ClassifyFiles", "read_documents"]

FORMATS = (".jsonl", ".tsv")


def _fields(line: str, where: str, suffix: str) -> tuple[str, str]:
    if suffix == ".tsv":
        if "\t" not in line:
            raise UserError(f"{where}: no tab: a TSV line is the label, a tab, then the text")
        label, text = line.split("\t", 1)
        return label, text
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise UserError(f"{where}: not JSON ({err.msg}): a JSONL line is one object "
                        '{"label": ..., "text": ...}') from None
    if not isinstance(record, dict) or not {"label", "text"} <= record.keys():
        raise UserError(f'{where}: a JSONL line needs the keys "label" and "text"')
    return str(record["label"]), str(record["text"])


def read_documents(path: Path, lowercase: bool = True) -> list[Document]:
    """The documents of one JSONL or TSV file, blank lines skipped; errors name the file and line."""
    if path.suffix not in FORMATS:
        raise UserError(f"{path}: unknown format {path.suffix!r}: name the file *.jsonl or *.tsv")
    if not path.is_file():
        raise UserError(f"{path}: no such file: set data.source.train_file (and val_file, test_file) to your files")
    documents = []
    for number, line in enumerate(read_utf8(path, "classification files").splitlines(), start=1):
        if line.strip():
            where = f"{path}:{number}"
            documents.append(parsed(*_fields(line, where, path.suffix), where, lowercase))
    if not documents:
        raise UserError(f"{path}: no documents: one per line, label then text")
    return documents


class ClassifyFiles:
    """Labelled documents from `train_file` and optionally `val_file` / `test_file` (JSONL or TSV, by suffix).

    Without a `val_file` (`test_file`), `val_fraction` (`test_fraction`) of the training documents, drawn per
    label with `seed`, are held out. Sentences split as `document.sentences` says (docs/classify.md).
    """

    def __init__(self, *, train_file: str, val_file: str | None = None, test_file: str | None = None,
                 val_fraction: float = 0.1, test_fraction: float = 0.0, seed: int = 0, lowercase: bool = True) -> None:
        self.files = {"train": Path(train_file), "val": val_file and Path(val_file),
                      "test": test_file and Path(test_file)}
        self.fractions = {"val": 0.0 if val_file else val_fraction, "test": 0.0 if test_file else test_fraction}
        self.seed, self.lowercase = seed, lowercase
        self.data_files = [p for p in self.files.values() if p]

    def prepare(self) -> None:
        """Nothing to fetch."""

    def load(self) -> dict[str, list[Document]]:
        """The three splits: the files given, the rest held out of the training file."""
        read = {split: read_documents(p, self.lowercase) for split, p in self.files.items() if p}
        train, val, test = split_documents(read["train"], [self.fractions["val"], self.fractions["test"]], self.seed,
                                           "data.source")
        return {"train": train, "val": read.get("val", val), "test": read.get("test", test)}
