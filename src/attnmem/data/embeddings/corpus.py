"""A text corpus as word ids: the tokeniser, the vocabulary (`min_count`, `max_vocab`) and the id stream.

Tokenisation (every source): the text is lower-cased and its words are the matches of `[^\\W_]+(?:'[^\\W_]+)*`:
runs of letters and digits, an inner apostrophe kept ("don't", "o'neill"); punctuation and underscores
separate words and are dropped. Documents (a file's line, a bAbI story, a SQuAD paragraph) are joined
into one stream with `window` ids 0 (`<pad>`, no word) between them, so no window spans two documents.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from attnmem.core.errors import UserError

PAD = "<pad>"
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")


def tokenize(text: str) -> list[str]:
    """The lower-cased words of `text`, punctuation dropped."""
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class Vocabulary:
    """Words by id (`itos[0]` is `<pad>`) and their training counts; the most frequent first."""

    itos: list[str]
    counts: list[int]  # counts[0] = 0 for the pad

    @classmethod
    def build(cls, documents: Iterable[str], *, min_count: int, max_vocab: int | None, where: str) -> Vocabulary:
        """The words seen at least `min_count` times, the `max_vocab` most frequent of them (ties by word)."""
        counter: Counter[str] = Counter()
        for document in documents:
            counter.update(tokenize(document))
        if not counter:
            raise UserError(f"{where}: the training text has no word (the corpus is empty): point the source at text")
        kept = sorted(((w, c) for w, c in counter.items() if c >= min_count), key=lambda wc: (-wc[1], wc[0]))
        if not kept:
            raise UserError(
                f"{where}: no word occurs data.min_count={min_count} times ({len(counter)} distinct, "
                f"the most frequent {max(counter.values())} times): lower data.min_count"
            )
        kept = kept[:max_vocab] if max_vocab is not None else kept
        return cls([PAD, *(w for w, _ in kept)], [0, *(c for _, c in kept)])

    def __len__(self) -> int:
        return len(self.itos)

    def state(self) -> dict[str, list]:
        """What a checkpoint keeps: the words and their counts."""
        return {"itos": list(self.itos), "counts": list(self.counts)}


def encode(documents: Iterable[str], vocab: Vocabulary, window: int) -> Tensor:
    """The documents' known words as one id stream, `window` pads before, between and after documents: (N,)."""
    index = {w: i for i, w in enumerate(vocab.itos) if i}
    gap = [0] * window
    ids: list[int] = list(gap)
    for document in documents:
        words = [index[w] for w in tokenize(document) if w in index]  # words below min_count are dropped
        if words:
            ids += words + gap
    return torch.tensor(ids, dtype=torch.int32)


def keep_probabilities(counts: Sequence[int], t: float | None) -> Tensor:
    """Mikolov et al. (2013b) §2.3 subsampling: keep word w with probability min(1, sqrt(t / f(w))): (V,)."""
    counts_t = torch.tensor(counts, dtype=torch.float64)
    if t is None:
        return torch.ones_like(counts_t)
    freq = counts_t / counts_t.sum()
    return torch.where(freq > 0, (t / freq.clamp_min(1e-300)).sqrt().clamp(max=1.0), 1.0)


def noise_distribution(counts: Sequence[int], power: float = 0.75) -> Tensor:
    """The negative-sampling noise P_n(w) ∝ U(w)^{3/4} (Mikolov et al. 2013b §2.2); 0 for the pad: (V,)."""
    weights = torch.tensor(counts, dtype=torch.float64) ** power
    weights[0] = 0.0
    return weights / weights.sum()
