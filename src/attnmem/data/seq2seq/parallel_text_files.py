"""Parallel text files, a seq2seq source: one `source<TAB>target` pair per line, for a small corpus of your own.

Tokens are whitespace-separated words or single characters (`tokens`). The vocabularies come from the
training file; tokens seen only in validation or test become `<unk>` (counted in the log). Empty lines are
skipped (counted); a line without exactly one tab, or with an empty side, stops with `file:line`; sides
longer than `max_len` tokens are cut, with one warning giving the count.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import torch

from attnmem.core.errors import UserError
from attnmem.core.text import read_utf8
from attnmem.data.seq2seq.tensors import SPECIALS, TextPair, Vocab

log = logging.getLogger(__name__)

TOKENIZERS = ("word", "char")


def read_pairs(path: Path, tokens: str) -> list[TextPair]:
    """Token lists of every non-empty line of a tab-separated file; `file:line` for a malformed one."""
    if not path.is_file():
        raise UserError(f"{path}: no such file (data.source.*_file)")
    pairs, empty = [], 0
    for number, line in enumerate(read_utf8(path, "parallel text files").splitlines(), 1):
        if not line.strip():
            empty += 1
            continue
        sides = line.split("\t")
        split = [s.split() if tokens == "word" else list(s.strip()) for s in sides]
        if len(sides) != 2 or not all(split):
            raise UserError(f"{path}:{number}: expected 'source<TAB>target' with both sides non-empty, got {line!r}")
        pairs.append((split[0], split[1]))
    if empty:
        log.info("%s: skipped %d empty line(s)", path, empty)
    if not pairs:
        raise UserError(f"{path}: no 'source<TAB>target' lines")
    return pairs


def truncate(pairs: list[TextPair], max_len: int, path: Path) -> list[TextPair]:
    """Cut each side to `max_len` tokens, warning once with how many sides were cut."""
    cut = sum(len(side) > max_len for pair in pairs for side in pair)
    if cut:
        log.warning("%s: %d sequence(s) longer than data.source.max_len=%d truncated", path, cut, max_len)
    return [(s[:max_len], t[:max_len]) for s, t in pairs]


def build_itos(sequences: list[list[str]], min_count: int) -> list[str]:
    """Specials, then every token seen at least `min_count` times, most frequent first (ties alphabetical)."""
    counts = Counter(tok for seq in sequences for tok in seq)
    return SPECIALS + sorted(
        (t for t, c in counts.items() if c >= min_count and t not in SPECIALS), key=lambda t: (-counts[t], t)
    )


class ParallelTextFiles:
    """Parallel text from tab-separated files as a seq2seq source (`data.source`): `train_file`, and optionally
    `val_file` and `test_file`.

    Without `val_file` the last `val_fraction` of a seeded shuffle of the training pairs is held out.
    Validation and test report BLEU (dims `bleu`), with tokens joined by spaces.
    """

    bleu = True

    def __init__(
        self,
        *,
        train_file: str,
        val_file: str | None = None,
        test_file: str | None = None,
        tokens: str = "word",
        max_len: int = 100,
        min_count: int = 1,
        val_fraction: float = 0.1,
        seed: int = 0,
    ) -> None:
        if tokens not in TOKENIZERS:
            raise ValueError(f"data.source.tokens must be one of {TOKENIZERS}, got {tokens!r}")
        for name, value in {"max_len": max_len, "min_count": min_count}.items():
            if value < 1:
                raise ValueError(f"data.source.{name} must be >= 1, got {value}")
        if not 0 < val_fraction < 1:
            raise ValueError(f"data.source.val_fraction must be in (0, 1), got {val_fraction}")
        self.files = {
            "train": Path(train_file),
            "val": Path(val_file) if val_file else None,
            "test": Path(test_file) if test_file else None,
        }
        self.tokens, self.max_len, self.min_count, self.val_fraction = tokens, max_len, min_count, val_fraction
        self.seed = seed
        self.data_files = [p for p in self.files.values() if p is not None]
        self.test_lengths: list[int] = []  # no test set of one length only

    def pairs(self) -> dict[str, list[TextPair]]:
        """The token pairs of each file; without `val_file`, validation held out of the training pairs."""
        text = {
            name: truncate(read_pairs(path, self.tokens), self.max_len, path)
            for name, path in self.files.items()
            if path is not None
        }
        if self.files["val"] is None:
            order = torch.randperm(len(text["train"]), generator=torch.Generator().manual_seed(self.seed)).tolist()
            held = max(1, round(self.val_fraction * len(order)))
            if held >= len(order):
                raise UserError(
                    f"{self.files['train']}: too few pairs ({len(order)}) to hold out a validation set; "
                    "pass data.source.val_file"
                )
            text["val"] = [text["train"][i] for i in order[-held:]]
            text["train"] = [text["train"][i] for i in order[:-held]]
        return text

    def vocab(self, train: list[TextPair]) -> Vocab:
        """Each side's vocabulary from the training pairs (tokens seen `min_count` times)."""
        return {
            "src": build_itos([s for s, _ in train], self.min_count),
            "tgt": build_itos([t for _, t in train], self.min_count),
        }
