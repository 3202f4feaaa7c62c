"""Word vectors in the GloVe format (`word v1 ... vD` per line): read by span and qa data, written by embeddings."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from attnmem.core.atomic import write_text
from attnmem.core.errors import UserError


@dataclass(frozen=True)
class Vectors:
    """The vectors `(D,)` that a file holds for the words asked for, by word."""

    dim: int
    table: dict[str, Tensor]

    def matrix(self, vocab: list[str]) -> Tensor:
        """An embedding matrix `(V, D)` in `vocab` order; a word without a vector (`<pad>`, `<unk>`) gets zeros.

        Zero vectors for out-of-vocabulary words, as in the DCN (Xiong et al. 2016, arXiv:1611.01604, §4.1).
        """
        weight = torch.zeros(len(vocab), self.dim)  # (V, D)
        for i, word in enumerate(vocab):
            if word in self.table:
                weight[i] = self.table[word]
        return weight


def read_vectors(path: Path, words: Collection[str]) -> Vectors:
    """The vectors of those `words` that the file has: matched exactly, then lower-cased; the first found wins.

    D comes from the first line (or from a word2vec header `count D`, which is skipped). A word is what precedes
    a line's last D fields: GloVe 840B has tokens with spaces in them (`. . .`). A line with fewer than D + 1
    fields stops the run naming `file:line`.
    """
    if not path.is_file():
        raise UserError(f"data.source.embeddings={path}: no such file")
    lowered: dict[str, list[str]] = {}
    for word in words:
        lowered.setdefault(word.lower(), []).append(word)
    wanted = set(words)
    table: dict[str, Tensor] = {}
    dim = 0
    with path.open(encoding="utf-8") as lines:
        for lineno, line in enumerate(lines, 1):
            line = line.rstrip("\n").rstrip(" ")
            if lineno == 1 and _word2vec_header(line):
                dim = int(line.split(" ")[1])
                continue
            spaces = line.count(" ")
            dim = dim or spaces
            if spaces < dim or dim < 1:
                raise UserError(f"{path}:{lineno}: expected a word and {dim} numbers, got {spaces} values")
            word = line[: line.index(" ")] if spaces == dim else line.rsplit(" ", dim)[0]  # cheap for most lines
            targets = [word] if word in wanted else lowered.get(word.lower(), [])
            targets = [w for w in targets if w not in table]
            if targets:
                vector = _numbers(line.rsplit(" ", dim)[1:], f"{path}:{lineno}")
                table.update((w, vector) for w in targets)
    if not dim:
        raise UserError(f"data.source.embeddings={path}: the file is empty")
    return Vectors(dim, table)


def _word2vec_header(line: str) -> bool:
    """Whether a first line is word2vec's text header, `<count> <dimension>`."""
    parts = line.split(" ")
    return len(parts) == 2 and all(p.isdigit() for p in parts)


def _numbers(values: list[str], where: str) -> Tensor:
    try:
        return torch.tensor([float(v) for v in values])
    except ValueError as err:
        raise UserError(f"{where}: a value is not a number ({err})") from None


def write_vectors(path: Path, words: Sequence[str], matrix: Tensor) -> None:
    """Write one line `word v1 ... vD` per word of `words`, row i of `matrix (V, D)` for word i, atomically."""
    if len(words) != matrix.shape[0]:
        raise ValueError(f"write_vectors: {len(words)} words for {matrix.shape[0]} vectors")
    rows = matrix.detach().float().cpu().tolist()
    write_text(path, "".join(f"{w} {' '.join(f'{v:.6g}' for v in row)}\n" for w, row in zip(words, rows)))
