"""MemN2N's options checked before it builds (`attnmem.models.memn2n`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from attnmem.blocks.checks import check_sizes
from attnmem.core.errors import UserError

__all__ = ["check_options", "output_words"]

ENCODINGS = ("position", "bow")
TYINGS = ("adjacent", "layerwise")
EMPTY_MEMORIES = ("attend", "mask")
ANSWER_SOFTMAXES = ("answers", "vocabulary")


def check_options(
    sizes: dict[str, int],
    *,
    encoding: str,
    tying: str,
    random_noise: float,
    init_std: float,
    empty_memories: str,
    answer_softmax: str,
    answer_words: Sequence[int] | None,
    embeddings: Tensor | None = None,
) -> None:
    """ValueError naming the first option of `MemN2N` that does not fit (UserError: the vectors' width)."""
    check_sizes("MemN2N", sizes)
    if embeddings is not None and embeddings.shape[1] != sizes["embed_dim"]:
        raise UserError(
            f"MemN2N: embed_dim={sizes['embed_dim']} differs from the width {embeddings.shape[1]} of the pretrained "
            f"embeddings: build it with embed_dim={embeddings.shape[1]} (in a run: model.embed_dim="
            f"{embeddings.shape[1]} for the vectors of data.source.embeddings)"
        )
    if tying == "adjacent" and answer_words is not None and len(answer_words) != sizes["num_answers"]:
        raise ValueError(f"MemN2N: answer_words has {len(answer_words)} ids for num_answers={sizes['num_answers']}")
    if answer_softmax not in ANSWER_SOFTMAXES:
        raise ValueError(f"MemN2N: answer_softmax must be one of {ANSWER_SOFTMAXES}, got {answer_softmax!r}")
    if answer_softmax == "vocabulary" and (tying != "adjacent" or answer_words is None):
        raise ValueError("MemN2N: answer_softmax='vocabulary' needs W^T = C^K: tying='adjacent' and answer_words")
    if empty_memories not in EMPTY_MEMORIES:
        raise ValueError(f"MemN2N: empty_memories must be one of {EMPTY_MEMORIES}, got {empty_memories!r}")
    if encoding not in ENCODINGS:
        raise ValueError(f"MemN2N: encoding must be one of {ENCODINGS}, got {encoding!r}")
    if tying not in TYINGS:
        raise ValueError(f"MemN2N: tying must be one of {TYINGS}, got {tying!r}")
    if not 0 <= random_noise < 1:
        raise ValueError(f"MemN2N: random_noise must be in [0, 1), got {random_noise}")
    if init_std < 0:
        raise ValueError(f"MemN2N: init_std must be >= 0, got {init_std}")


def output_words(answers: Sequence[int], vocab_size: int, vocabulary: bool) -> Tensor:
    """The rows of C^K that Wᵀ takes: the answers' words, then (a softmax over the vocabulary) every other word."""
    taken = set(answers)
    others = [w for w in range(vocab_size) if w not in taken] if vocabulary else []
    return torch.tensor([*answers, *others], dtype=torch.long)
