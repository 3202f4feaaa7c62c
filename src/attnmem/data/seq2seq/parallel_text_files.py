"""A reader of parallel text: one `source<TAB>target` pair per line, for a small translation corpus of your own.

Tokens are whitespace-separated words or single characters (`tokens`). The vocabularies come from the
training file; tokens seen only in validation or test become `<unk>` (counted in the log). Empty lines are
skipped (counted); a line without exactly one tab, or with an empty side, stops with `file:line`; sides
longer than `max_len` tokens are cut, with one warning giving the count.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import lightning as L
import torch
from torch.utils.data import DataLoader

from attnmem.core.dims import Seq2SeqDims
from attnmem.core.errors import UserError
from attnmem.data.seq2seq import SPECIALS, UNK, check_positive, loader, seq2seq_dims, tensors

log = logging.getLogger(__name__)

TOKENIZERS = ("word", "char")


def read_pairs(path: Path, tokens: str) -> list[tuple[list[str], list[str]]]:
    """Token lists of every non-empty line of a tab-separated file; `file:line` for a malformed one."""
    if not path.is_file():
        raise UserError(f"{path}: no such file (data.*_file)")
    pairs, empty = [], 0
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
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


def truncate(pairs: list[tuple[list[str], list[str]]], max_len: int, path: Path) -> list[tuple[list[str], list[str]]]:
    """Cut each side to `max_len` tokens, warning once with how many sides were cut."""
    cut = sum(len(side) > max_len for pair in pairs for side in pair)
    if cut:
        log.warning("%s: %d sequence(s) longer than data.max_len=%d truncated", path, cut, max_len)
    return [(s[:max_len], t[:max_len]) for s, t in pairs]


def build_itos(sequences: list[list[str]], min_count: int) -> list[str]:
    """Specials, then every token seen at least `min_count` times, most frequent first (ties alphabetical)."""
    counts = Counter(tok for seq in sequences for tok in seq)
    return SPECIALS + sorted(
        (t for t, c in counts.items() if c >= min_count and t not in SPECIALS), key=lambda t: (-counts[t], t)
    )


def to_ids(
    pairs: list[tuple[list[str], list[str]]],
    src_itos: list[str],
    tgt_itos: list[str],
    name: str,
) -> list[tuple[list[int], list[int]]]:
    """Ids of every token, unknown ones `<unk>`; logs how many were unknown."""
    src_index, tgt_index = {t: i for i, t in enumerate(src_itos)}, {t: i for i, t in enumerate(tgt_itos)}
    ids = [([src_index.get(t, UNK) for t in s], [tgt_index.get(t, UNK) for t in t_]) for s, t_ in pairs]
    unknown = sum(i == UNK for s, t in ids for i in (*s, *t))
    if unknown:
        log.info("%s: %d unknown token(s) mapped to <unk>", name, unknown)
    return ids


class ParallelTextDataModule(L.LightningDataModule):
    """Parallel text from tab-separated files: `train_file`, and optionally `val_file` and `test_file`.

    Without `val_file` the last `val_fraction` of a seeded shuffle of the training pairs is held out.
    Validation and test report BLEU (dims `bleu`), with tokens joined by spaces.
    """

    family: ClassVar[str] = "seq2seq"
    family_module: ClassVar[str] = "attnmem.tasks.seq2seq.Seq2SeqTask"

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
        batch_size: int = 32,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if tokens not in TOKENIZERS:
            raise ValueError(f"data.tokens must be one of {TOKENIZERS}, got {tokens!r}")
        check_positive(max_len=max_len, min_count=min_count, batch_size=batch_size)
        if not 0 < val_fraction < 1:
            raise ValueError(f"data.val_fraction must be in (0, 1), got {val_fraction}")
        self.files = {
            "train": Path(train_file),
            "val": Path(val_file) if val_file else None,
            "test": Path(test_file) if test_file else None,
        }
        self.tokens, self.max_len, self.min_count, self.val_fraction = tokens, max_len, min_count, val_fraction
        self.batch_size, self.seed = batch_size, seed
        self.data_files = [p for p in self.files.values() if p is not None]
        self.splits: dict[str, dict[str, torch.Tensor]] = {}
        self.vocab: dict[str, list[str]] = {}  # "src"/"tgt" -> itos; from the checkpoint when one is loaded

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
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
                    "pass data.val_file"
                )
            text["val"] = [text["train"][i] for i in order[-held:]]
            text["train"] = [text["train"][i] for i in order[:-held]]
        if not self.vocab:
            self.vocab = {
                "src": build_itos([s for s, _ in text["train"]], self.min_count),
                "tgt": build_itos([t for _, t in text["train"]], self.min_count),
            }
        for name, pairs in text.items():
            self.splits[name] = tensors(to_ids(pairs, self.vocab["src"], self.vocab["tgt"], f"{name} split"))

    @property
    def dims(self) -> Seq2SeqDims:
        return seq2seq_dims(self.splits, self.vocab["src"], self.vocab["tgt"], [], bleu=True)

    @property
    def has_test(self) -> bool:
        return self.files["test"] is not None

    def train_dataloader(self) -> DataLoader:
        return loader(self.splits["train"], self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return loader(self.splits["val"], self.batch_size, shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return loader(self.splits["test"], self.batch_size, shuffle=False)

    def state_dict(self) -> dict[str, Any]:
        return {"vocab": self.vocab}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # a checkpoint's vocabulary wins over the one these files would give
        vocab = {k: list(v) for k, v in (state_dict.get("vocab") or {}).items()}
        if vocab and vocab != self.vocab:
            built, self.vocab, self.splits = bool(self.splits), vocab, {}
            if built:
                self.setup()
