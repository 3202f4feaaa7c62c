"""What the families that generate token sequences (seq2seq, caption) share: decoding options, decoding,
scoring a decoded row against its target, and a row as text."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from attnmem.evaluation import decode as decoding

DECODE = {"beam_size": 1, "max_len": None, "length_penalty": 0.0}  # task.decode's options and defaults


def decode_options(decode: dict[str, Any] | None) -> dict[str, Any]:
    """`task.decode` over the defaults; ValueError naming an unknown option or a beam below 1."""
    unknown = set(decode or {}) - set(DECODE)
    if unknown:
        raise ValueError(f"task.decode has no option {sorted(unknown)}; options: {sorted(DECODE)}")
    options = DECODE | dict(decode or {})
    if options["beam_size"] < 1:
        raise ValueError(f"decode.beam_size must be >= 1, got {options['beam_size']}")
    return options


@torch.no_grad()
def generate(net: decoding.Decodable, src: Tensor, decode: dict[str, Any], ids: dict[str, int], *,
             max_len: int) -> Tensor:
    """Decoded tokens (B, T) after bos, up to eos then padding: greedy, or beam search when `beam_size` > 1."""
    special = {"bos_id": ids["bos"], "eos_id": ids["eos"], "pad_id": ids["pad"]}
    if decode["beam_size"] == 1:
        return decoding.greedy(net, src, max_len=max_len, **special)
    return decoding.beam(net, src, decode["beam_size"], max_len=max_len, length_penalty=decode["length_penalty"],
                         **special)


def compare(predicted: Tensor, targets: Tensor, pad_id: int) -> tuple[Tensor, Tensor, Tensor]:
    """Per sequence: target tokens, correct tokens, exact (bool); `predicted` is padded or cut to the target."""
    width = targets.shape[1]
    predicted = F.pad(predicted[:, :width], (0, max(0, width - predicted.shape[1])), value=pad_id)
    real = targets != pad_id
    correct = ((predicted == targets) & real).sum(1)  # (B,)
    tokens = real.sum(1)
    return tokens, correct, correct == tokens


def text(ids: Tensor, itos: list[str] | None, special: dict[str, int]) -> str:
    """Space-joined tokens of a 1-D id row, up to its eos; padding and bos dropped (ids as text without `itos`)."""
    words = []
    for i in ids.tolist():
        if i == special["eos"]:
            break
        if i not in (special["pad"], special["bos"]):
            words.append(itos[i] if itos else str(i))
    return " ".join(words)
