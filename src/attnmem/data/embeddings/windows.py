"""Batches of windows over an id stream, with negative samples: what every embeddings model trains on.

A batch is `window (B, 2w+1)` word ids, the centre word at index w and id 0 (`<pad>`) where the window
reaches past its document, and `negatives (B, K)` words drawn from the noise distribution
P_n(w) ∝ U(w)^{3/4}: negative samples (word2vec) and corrupted centre words (C&W).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor
from torch.utils.data import IterableDataset


class Windows(IterableDataset):
    """The windows centred on every word of `stream (N,)`, each pass its own seeded draw.

    Training (`shuffle`): every pass first discards each word w with probability 1 - `keep[w]` (subsampling,
    before the windows are cut, so the kept words see further), then visits the centres in a random order.
    Evaluation: no subsampling, at most `limit` centres spread evenly over the stream, the same negatives
    every pass. The pass number seeds the draws, so the same seed gives the same batches.
    """

    def __init__(
        self,
        stream: Tensor,
        *,
        window: int,
        keep: Tensor,
        noise: Tensor,
        negatives: int,
        batch_size: int,
        seed: int,
        shuffle: bool,
        limit: int | None = None,
    ) -> None:
        super().__init__()
        self.stream, self.window, self.keep, self.noise = stream.long(), window, keep.float(), noise.float()
        self.negatives, self.batch_size, self.seed = negatives, batch_size, seed
        self.shuffle, self.limit, self.passes = shuffle, limit, 0

    def centres(self, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """This pass's (possibly subsampled) stream and its centre positions in visiting order."""
        stream = self.stream
        if self.shuffle:
            kept = torch.rand(len(stream), generator=generator) < self.keep[stream]
            stream = stream[kept | (stream == 0)]  # the pads between documents always stay
        positions = torch.nonzero(stream, as_tuple=True)[0]  # (C,), real words only: the edges are pads
        if self.shuffle:
            positions = positions[torch.randperm(len(positions), generator=generator)]
        elif self.limit is not None and len(positions) > self.limit:
            positions = positions[torch.linspace(0, len(positions) - 1, self.limit).long()]
        return stream, positions

    def __iter__(self) -> Iterator[dict[str, Tensor]]:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + (self.passes if self.shuffle else 0))
        self.passes += 1
        stream, positions = self.centres(generator)
        offsets = torch.arange(-self.window, self.window + 1)  # (2w+1,)
        for first in range(0, len(positions), self.batch_size):
            centre = positions[first : first + self.batch_size]  # (B,)
            window = stream[centre.unsqueeze(1) + offsets]  # (B, 2w+1)
            drawn = torch.multinomial(self.noise, len(centre) * self.negatives, replacement=True, generator=generator)
            yield {"window": window, "negatives": drawn.view(len(centre), self.negatives)}  # (B, K)
