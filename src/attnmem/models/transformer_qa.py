"""Encoder-only Transformer for the `qa` family: story and question as one sequence, read by a readout vector."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar

import torch
from torch import Tensor, nn

from attnmem.blocks.checks import check_sizes
from attnmem.blocks.output import Output
from attnmem.blocks.position_encoding import bag_of_words, position_encoding
from attnmem.blocks.recency import recency
from attnmem.blocks.transformer import encoder_stack

__all__ = ["TransformerQA", "pack_story"]

UNITS = ("word", "sentence")


def pack_story(story: Tensor, query: Tensor, pad_id: int = 0) -> tuple[Tensor, Tensor]:
    """Story sentences then the query as one left-aligned token row per example, padding moved to the end.

    Returns `tokens (B, T)` and each token's sentence index `(B, T)` (the query's is S), T the longest row.
    """
    b, s, length = story.shape
    tokens = torch.cat([story.reshape(b, s * length), query], dim=1).long()  # (B, S·L + Lq)
    counts = torch.tensor([length] * s + [query.shape[1]], device=story.device)
    sentence = torch.arange(s + 1, device=story.device).repeat_interleave(counts)  # (S·L + Lq,)
    keep = tokens != pad_id
    order = torch.sort((~keep).byte(), dim=1, stable=True).indices[:, : max(1, int(keep.sum(1).max()))]
    return tokens.gather(1, order), sentence.expand(b, -1).gather(1, order)  # (B, T) each


class TransformerQA(nn.Module):
    """Encoder-only Transformer (Vaswani et al. 2017, §3.1 encoder) as a bAbI reader.

    The story's words, then the question's, form one sequence (padding dropped); each word also gets
    its sentence's temporal embedding (MemN2N's T_A, Sukhbaatar et al. 2015 §4.1: index 0 for the most
    recent sentence, `memory_size` for the question), so "the latest fact about X" is a content match
    plus a recency preference rather than a count over positions; a learned readout vector in front
    (BERT's [CLS], Devlin et al. 2019) attends with bidirectional self-attention, and its final state is
    classified into the answers. `unit="sentence"` makes each story sentence one token instead
    (MemN2N's position-encoded bag of words, §4.1, plus the same recency embedding), so binding a person
    to a place within a sentence is given and the layers only select the sentence: on generated task 1
    words as tokens stayed at ~46% accuracy, sentences reached ~100% in two epochs
    (conf/experiment/transformer_babi.yaml). In eval mode `Output.attention` holds, per layer, the
    readout's attention (mean over heads) summed over each story sentence, (B, S): one "hop" per layer.
    """

    families: ClassVar[tuple[str, ...]] = ("qa",)
    encoding: Tensor  # a buffer, registered with unit="sentence" only

    def __init__(
        self,
        *,
        vocab_size: int,
        num_answers: int,
        memory_size: int,
        sentence_len: int,
        score: Callable[..., nn.Module],
        pad_id: int = 0,
        d_model: int = 64,
        heads: int = 4,
        layers: int = 2,
        d_ff: int = 256,
        dropout: float = 0.1,
        positions: str = "sinusoidal",
        max_len: int = 512,
        norm_first: bool = True,
        unit: str = "word",
    ) -> None:
        super().__init__()
        if unit not in UNITS:
            raise ValueError(f"TransformerQA: unit must be one of {UNITS}, got {unit!r}")
        sizes = {"vocab_size": vocab_size, "num_answers": num_answers, "memory_size": memory_size}
        check_sizes("TransformerQA", sizes | {"sentence_len": sentence_len})
        self.unit, self.pad_id, self.memory_size, self.scale = unit, pad_id, memory_size, math.sqrt(d_model)
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        nn.init.normal_(self.embed.weight, std=d_model**-0.5)  # times √d in forward: unit variance
        with torch.no_grad():
            self.embed.weight[pad_id].zero_()  # padding words add nothing to a sentence's bag of words
        self.temporal = nn.Embedding(memory_size + 1, d_model)  # sentence recency; the question last
        self.readout = nn.Parameter(torch.randn(d_model) * d_model**-0.5)
        if unit == "sentence":
            self.register_buffer("encoding", position_encoding(sentence_len, d_model), persistent=False)  # (J, D)
        self.positions, self.encoder = encoder_stack(
            "TransformerQA",
            score=score,
            d_model=d_model,
            heads=heads,
            layers=layers,
            d_ff=d_ff,
            dropout=dropout,
            positions=positions,
            max_len=max_len,
            norm_first=norm_first,
        )
        self.head = nn.Linear(d_model, num_answers)

    def forward(self, batch: dict[str, Tensor]) -> Output:
        return self._sentences(batch) if self.unit == "sentence" else self._words(batch)

    def _sentences(self, batch: dict[str, Tensor]) -> Output:
        story, query = batch["story"], batch["query"]  # (B, S, L), (B, Lq)
        (b, s, _), pad = story.shape, self.pad_id
        sentences = bag_of_words(self.embed.weight, story, self.encoding, owner="TransformerQA", padding_idx=pad)
        question = bag_of_words(self.embed.weight, query, self.encoding, owner="TransformerQA", padding_idx=pad)
        question = question.unsqueeze(1)  # (B, 1, D); sentences (B, S, D)
        real = (story != self.pad_id).any(-1)  # (B, S), sentences left-aligned
        sentences = sentences * self.scale + self.temporal(recency(real).clamp_max(self.memory_size - 1))
        question = question * self.scale + self.temporal.weight[self.memory_size]
        x = torch.cat([self.readout.expand(b, 1, -1), sentences, question], dim=1)  # (B, 1 + S + 1, D)
        mask = torch.cat([real.new_ones(b, 1), real, real.new_ones(b, 1)], dim=1).unsqueeze(1)  # (B, 1, 1 + S + 1)
        hidden, weights = self.encoder(self.positions.dropout(x), mask=mask, need_weights=not self.training)
        attention = [w[:, :, 0, 1 : 1 + s].mean(1) for w in weights]  # the readout's attention per sentence (B, S)
        return Output(pred=self.head(hidden[:, 0]), attention=attention)

    def _words(self, batch: dict[str, Tensor]) -> Output:
        story = batch["story"]  # (B, S, L)
        tokens, sentence = pack_story(story, batch["query"], self.pad_id)  # (B, T)
        real = (story != self.pad_id).any(-1)  # (B, S): real sentences, left-aligned
        index = recency(real, sentence).clamp_max(self.memory_size - 1)  # 0 = the most recent sentence
        index = index.masked_fill(sentence == story.shape[1], self.memory_size)  # the question's words
        x = self.embed(tokens) * self.scale + self.temporal(index)  # (B, T, D)
        x = torch.cat([self.readout.expand(len(x), 1, -1), x], dim=1)  # (B, 1 + T, D)
        keep = torch.cat([torch.ones_like(tokens[:, :1], dtype=torch.bool), tokens != self.pad_id], dim=1)
        hidden, weights = self.encoder(self.positions(x), mask=keep.unsqueeze(1), need_weights=not self.training)
        return Output(
            pred=self.head(hidden[:, 0]), attention=[_per_sentence(w, sentence, story.shape[1]) for w in weights]
        )


def _per_sentence(weights: Tensor, sentence: Tensor, sentences: int) -> Tensor:
    """The readout's attention (B, H, 1 + T, 1 + T) averaged over heads, summed per story sentence: (B, S)."""
    readout = weights[:, :, 0, 1:].mean(1)  # (B, T)
    summed = readout.new_zeros(len(readout), sentences + 1).scatter_add_(1, sentence, readout)
    return summed[:, :sentences]  # the question's share dropped
