"""The DNC as a bAbI reader (Graves et al. 2016, "bAbI"): the story and question word by word, then the answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import torch
from torch import Tensor, nn

from attnmem.blocks.checks import check_sizes
from attnmem.blocks.dnc import DNCCore, weightings
from attnmem.blocks.output import Output
from attnmem.blocks.rnn import compact

__all__ = ["DNCReader"]


class DNCReader(nn.Module):
    """A DNC that reads a bAbI story and its question one word per step (Graves et al. 2016, Methods, "bAbI").

    The story's words, then the question's, are embedded (`embed_dim`) and fed as the DNC's input; the
    answer class is read from the output y_T = W [h_T; r_T] at the question's last word (the paper emits
    answer words after a '-' symbol; with one answer class per question a single output step does the
    same). Padding is dropped (`compact`), so every row's sequence is its own length.
    """

    families: ClassVar[tuple[str, ...]] = ("qa",)

    def __init__(self, *, vocab_size: int, num_answers: int, score: Callable[..., nn.Module], pad_id: int = 0,
                 embed_dim: int = 32, controller_size: int = 64, memory_locations: int = 32,
                 memory_width: int = 16, read_heads: int = 2, masking: bool = False, deallocation: bool = False,
                 link_sharpness: bool = False, interface_clip: float = 20.0) -> None:
        super().__init__()
        check_sizes("DNCReader", {"vocab_size": vocab_size, "num_answers": num_answers, "embed_dim": embed_dim})
        self.pad_id = pad_id
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_id)
        self.core = DNCCore(input_size=embed_dim, score=score, controller_size=controller_size,
                            memory_locations=memory_locations, memory_width=memory_width, read_heads=read_heads,
                            masking=masking, deallocation=deallocation, link_sharpness=link_sharpness,
                            interface_clip=interface_clip)
        self.head = nn.Linear(self.core.output_size, num_answers)

    def forward(self, batch: dict[str, Tensor]) -> Output:
        words = compact(torch.cat([batch["story"].flatten(1), batch["query"]], 1).long(), self.pad_id)  # (B, T)
        steps = words != self.pad_id  # (B, T): a shorter row keeps its state over its padding
        features, states = self.core(self.embedding(words), steps)  # (B, T, C + R·W)
        return Output(pred=self.head(features[:, -1]), attention=weightings(states))  # (B, num_answers)
