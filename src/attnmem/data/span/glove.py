"""Pretrained word vectors from a local GloVe-format text file (`word v1 v2 ... vD` per line)."""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from torch import Tensor

from attnmem.core.errors import UserError

log = logging.getLogger(__name__)


def read_embeddings(path: Path, vocab: list[str], *, seed: int, std: float = 0.1) -> tuple[Tensor, int]:
    """An embedding matrix `(V, D)` for `vocab` and the number of words not in the file.

    Words are matched exactly, then lower-cased; the first vector found wins. Words not in the
    file get N(0, std²) vectors from `seed`; id 0 (`<pad>`) is all zeros. D comes from the first line;
    a line with another number of values stops the run naming `file:line`.
    """
    if not path.is_file():
        raise UserError(f"data.source.embeddings={path}: no such file")
    wanted = {w: i for i, w in enumerate(vocab)}
    lowered: dict[str, list[int]] = {}
    for word, i in wanted.items():
        lowered.setdefault(word.lower(), []).append(i)
    vectors: dict[int, Tensor] = {}
    dim = None
    with path.open(encoding="utf-8") as lines:
        for lineno, line in enumerate(lines, 1):
            parts = line.rstrip("\n").rstrip(" ").split(" ")
            dim = dim or len(parts) - 1
            if len(parts) - 1 != dim or dim < 1:
                raise UserError(f"{path}:{lineno}: expected a word and {dim} numbers, got {len(parts) - 1} values")
            targets = [wanted[parts[0]]] if parts[0] in wanted else lowered.get(parts[0].lower(), [])
            targets = [i for i in targets if i not in vectors]
            if targets:
                vector = _numbers(parts[1:], f"{path}:{lineno}")
                vectors.update((i, vector) for i in targets)
    if dim is None:
        raise UserError(f"data.source.embeddings={path}: the file is empty")
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(len(vocab), dim, generator=generator) * std  # (V, D)
    for i, vector in vectors.items():
        weight[i] = vector
    weight[0] = 0.0
    missing = len(vocab) - 1 - sum(1 for i in vectors if i != 0)
    log.warning("data.source.embeddings: %d of %d words not in %s, initialised randomly", missing, len(vocab) - 1, path)
    return weight, missing


def _numbers(values: list[str], where: str) -> Tensor:
    try:
        return torch.tensor([float(v) for v in values])
    except ValueError as err:
        raise UserError(f"{where}: a value is not a number ({err})") from None
