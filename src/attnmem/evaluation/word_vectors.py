"""What word vectors are judged by: nearest neighbours, analogy questions (word2vec's format), a PCA projection."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from attnmem.core.errors import UserError


@dataclass(frozen=True)
class Analogy:
    """One question "a is to b as c is to d" of `section` (a `: name` line of the file)."""

    section: str
    a: str
    b: str
    c: str
    d: str


def read_analogies(path: Path) -> list[Analogy]:
    """The questions of a file in the format of word2vec's `questions-words.txt`: `: section` lines, then
    `a b c d` lines (lower-cased); a malformed line stops naming `file:line`."""
    if not path.is_file():
        raise UserError(f"task.analogies={path}: no such file")
    questions, section = [], ""
    with path.open(encoding="utf-8") as lines:
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            if line.startswith(":"):
                section = line[1:].strip()
                continue
            words = line.lower().split()
            if len(words) != 4:
                raise UserError(
                    f"{path}:{lineno}: expected four words 'a b c d' (a is to b as c is to d) or "
                    f"': section', got {len(words)} word(s) {line.strip()!r}"
                )
            questions.append(Analogy(section, *words))
    if not questions:
        raise UserError(f"task.analogies={path}: the file holds no question (lines of four words 'a b c d')")
    return questions


def analogy_accuracy(vectors: Tensor, itos: list[str], questions: list[Analogy]) -> tuple[float, int]:
    """The fraction answered right among the questions whose four words have vectors, and their number.

    The answer is argmax_x cos(x, b − a + c) over the vocabulary, a, b and c excluded (Mikolov et al. 2013a,
    §4.1, with unit-length vectors as in word2vec's compute-accuracy); pad id 0 is never an answer.
    """
    index = {w: i for i, w in enumerate(itos) if i}
    asked = [q for q in questions if all(w in index for w in (q.a, q.b, q.c, q.d))]
    if not asked:
        return 0.0, 0
    unit = F.normalize(vectors.detach().float(), dim=-1)  # (V, D)
    ids = torch.tensor([[index[w] for w in (q.a, q.b, q.c, q.d)] for q in asked])  # (Q, 4)
    target = unit[ids[:, 1]] - unit[ids[:, 0]] + unit[ids[:, 2]]  # (Q, D)
    scores = F.normalize(target, dim=-1) @ unit.T  # (Q, V)
    scores[:, 0] = -torch.inf
    scores.scatter_(1, ids[:, :3], -torch.inf)
    return (scores.argmax(-1) == ids[:, 3]).float().mean().item(), len(asked)


def nearest(vectors: Tensor, itos: list[str], words: list[str], k: int) -> dict[str, list[tuple[str, float]]]:
    """The `k` nearest words by cosine of each of `words` that has a vector, with their cosines."""
    index = {w: i for i, w in enumerate(itos) if i}
    unit = F.normalize(vectors.detach().float(), dim=-1)  # (V, D)
    found = {}
    for word in (w for w in words if w in index):
        cosines = unit @ unit[index[word]]  # (V,)
        cosines[[0, index[word]]] = -torch.inf
        top = cosines.topk(min(k, len(itos) - 2))
        found[word] = [(itos[i], round(c, 4)) for i, c in zip(top.indices.tolist(), top.values.tolist())]
    return found


def pca(vectors: Tensor, dims: int = 2) -> Tensor:
    """The rows of `vectors (N, D)` projected on their first `dims` principal components: (N, dims)."""
    centred = vectors.detach().float() - vectors.detach().float().mean(0)
    _, _, v = torch.linalg.svd(centred, full_matrices=False)  # rows of v: the principal directions
    return centred @ v[:dims].T
