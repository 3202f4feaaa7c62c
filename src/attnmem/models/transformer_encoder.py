"""Encoder-only Transformer for the `qa` family (story and question as one sequence) and the `sequence` family."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar

import torch
from torch import Tensor, nn

from attnmem.blocks.output import Output
from attnmem.models.memn2n import position_encoding
from attnmem.models.transformer import Encoder, Positions, check_options

__all__ = ["TransformerEncoder", "pack_story"]

PAD = 0  # the qa family's padding word id
UNITS = ("word", "sentence")


def pack_story(story: Tensor, query: Tensor) -> tuple[Tensor, Tensor]:
    """Story sentences then the query as one left-aligned token row per example, padding moved to the end.

    Returns `tokens (B, T)` and each token's sentence index `(B, T)` (the query's is S), T the longest row.
    """
    b, s, length = story.shape
    tokens = torch.cat([story.reshape(b, s * length), query], dim=1).long()  # (B, S·L + Lq)
    counts = torch.tensor([length] * s + [query.shape[1]], device=story.device)
    sentence = torch.arange(s + 1, device=story.device).repeat_interleave(counts)  # (S·L + Lq,)
    keep = tokens != PAD
    order = torch.sort((~keep).byte(), dim=1, stable=True).indices[:, : max(1, int(keep.sum(1).max()))]
    return tokens.gather(1, order), sentence.expand(b, -1).gather(1, order)  # (B, T) each


class TransformerEncoder(nn.Module):
    """Encoder-only Transformer (Vaswani et al. 2017, §3.1 encoder) used as a reader or a sequence model.

    - `qa`: the story's words, then the question's, form one sequence (padding dropped); each word also
      gets its sentence's temporal embedding (MemN2N's T_A, Sukhbaatar et al. 2015 §4.1: index 0 for the
      most recent sentence, `memory_size` for the question), so "the latest fact about X" is a content
      match plus a recency preference rather than a count over positions; a learned readout
      vector in front (BERT's [CLS], Devlin et al. 2019) attends with bidirectional self-attention, and
      its final state is classified into the answers. `unit="sentence"` makes each story sentence one
      token instead (MemN2N's position-encoded bag of words, §4.1, plus the same recency embedding), so
      binding a person to a place within a sentence is given and the layers only select the sentence:
      on generated task 1 words as tokens stayed at ~46% accuracy, sentences reached ~100% in two
      epochs (conf/experiment/transformer_babi.yaml). In eval mode `Output.attention` holds, per layer,
      the readout's attention (mean over heads) summed over each story sentence, (B, S): one "hop" per
      layer for the qa plots.
    - `sequence`: each input vector (B, T, W) is projected to d_model and the encoder is causal: step t
      sees steps <= t, as a recurrent baseline does. The output phase follows the input phase, so it
      sees the whole input; padding steps sit at the end and, being later, never reach a real step (no
      padding mask needed). Logits per step (B, T, output_size). In eval mode `Output.attention` holds the
      last layer's weights per step (B, heads, T), shown by the sequence plots as one read head per head.
    """

    families: ClassVar[tuple[str, ...]] = ("qa", "sequence")

    def __init__(
        self,
        *,
        family: str,
        score: Callable[..., nn.Module],
        vocab_size: int | None = None,
        num_answers: int | None = None,
        memory_size: int | None = None,
        sentence_len: int | None = None,
        input_size: int | None = None,
        output_size: int | None = None,
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
            raise ValueError(f"TransformerEncoder: unit must be one of {UNITS}, got {unit!r}")
        if family not in self.families:
            raise ValueError(f"TransformerEncoder: family must be one of {self.families}, got {family!r}")
        check_options(
            "TransformerEncoder",
            d_model=d_model,
            heads=heads,
            d_ff=d_ff,
            layers=layers,
            dropout=dropout,
            positions=positions,
            max_len=max_len,
        )
        needed = {"qa": ("vocab_size", "num_answers", "memory_size"), "sequence": ("input_size", "output_size")}
        needed = needed[family] + (("sentence_len",) if family == "qa" and unit == "sentence" else ())
        sizes = {
            "vocab_size": vocab_size,
            "num_answers": num_answers,
            "memory_size": memory_size,
            "sentence_len": sentence_len,
            "input_size": input_size,
            "output_size": output_size,
        }
        if any(sizes[name] is None or sizes[name] < 1 for name in needed):
            raise ValueError(
                f"TransformerEncoder: family {family!r} needs {', '.join(needed)} >= 1, got "
                f"{', '.join(str(sizes[n]) for n in needed)}"
            )
        # read_heads: the sequence plots label every head a read head
        self.family, self.unit, self.read_heads = family, unit, heads
        if family == "qa":
            self.embed = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
            nn.init.normal_(self.embed.weight, std=d_model**-0.5)  # times √d in forward: unit variance
            with torch.no_grad():
                self.embed.weight[PAD].zero_()  # padding words add nothing to a sentence's bag of words
            self.memory_size = memory_size
            self.temporal = nn.Embedding(memory_size + 1, d_model)  # sentence recency; the question last
            self.readout = nn.Parameter(torch.randn(d_model) * d_model**-0.5)
            if unit == "sentence":  # one J for every batch, however much padding it has (as MemN2N)
                self.register_buffer("encoding", position_encoding(sentence_len, d_model), persistent=False)  # (J, D)
        else:
            self.embed = nn.Linear(input_size, d_model)
        self.scale = math.sqrt(d_model) if family == "qa" else 1.0
        self.positions = Positions(d_model, max_len, positions, dropout)
        self.encoder = Encoder(
            layers=layers, norm_first=norm_first, d_model=d_model, heads=heads, d_ff=d_ff, score=score, dropout=dropout
        )
        self.head = nn.Linear(d_model, num_answers if family == "qa" else output_size)

    def forward(self, batch: dict[str, Tensor]) -> Output:
        if self.family == "sequence":
            return self._sequence(batch)
        return self._qa_sentences(batch) if self.unit == "sentence" else self._qa(batch)

    def _qa_sentences(self, batch: dict[str, Tensor]) -> Output:
        story, query = batch["story"], batch["query"]  # (B, S, L), (B, Lq)
        b, s, length = story.shape
        sentences = (self.embed(story) * self.encoding[:length]).sum(2)  # (B, S, D): MemN2N's PE bag of words
        question = (self.embed(query) * self.encoding[: query.shape[1]]).sum(1, keepdim=True)  # (B, 1, D)
        real = (story != PAD).any(-1)  # (B, S), sentences left-aligned
        recency = (real.sum(1, keepdim=True) - 1 - torch.arange(s, device=story.device)).clamp(0, self.memory_size - 1)
        sentences = sentences * self.scale + self.temporal(recency)  # (B, S, D)
        question = question * self.scale + self.temporal.weight[self.memory_size]
        x = torch.cat([self.readout.expand(b, 1, -1), sentences, question], dim=1)  # (B, 1 + S + 1, D)
        mask = torch.cat([real.new_ones(b, 1), real, real.new_ones(b, 1)], dim=1).unsqueeze(1)  # (B, 1, 1 + S + 1)
        hidden, weights = self.encoder(self.positions.dropout(x), mask=mask, need_weights=not self.training)
        attention = [w[:, :, 0, 1 : 1 + s].mean(1) for w in weights]  # the readout's attention per sentence (B, S)
        return Output(pred=self.head(hidden[:, 0]), attention=attention)

    def _qa(self, batch: dict[str, Tensor]) -> Output:
        story = batch["story"]  # (B, S, L)
        tokens, sentence = pack_story(story, batch["query"])  # (B, T)
        count = (story != PAD).any(-1).sum(1, keepdim=True)  # (B, 1): real sentences, left-aligned
        recency = (count - 1 - sentence).clamp(0, self.memory_size - 1)  # 0 = the most recent sentence
        recency = recency.masked_fill(sentence == story.shape[1], self.memory_size)  # the question's words
        x = self.embed(tokens) * self.scale + self.temporal(recency)  # (B, T, D)
        x = torch.cat([self.readout.expand(len(x), 1, -1), x], dim=1)  # (B, 1 + T, D)
        real = torch.cat([torch.ones_like(tokens[:, :1], dtype=torch.bool), tokens != PAD], dim=1)  # (B, 1 + T)
        hidden, weights = self.encoder(self.positions(x), mask=real.unsqueeze(1), need_weights=not self.training)
        return Output(
            pred=self.head(hidden[:, 0]), attention=[_per_sentence(w, sentence, story.shape[1]) for w in weights]
        )

    def _sequence(self, batch: dict[str, Tensor]) -> Output:
        x = self.positions(self.embed(batch["inputs"]))  # (B, T, D)
        steps = x.shape[1]
        causal = torch.ones(steps, steps, dtype=torch.bool, device=x.device).tril().unsqueeze(0)  # (1, T, T)
        hidden, weights = self.encoder(x, mask=causal, need_weights=not self.training)
        attention = list(weights[-1].unbind(2)) if weights else []  # per step t: (B, heads, T)
        return Output(pred=self.head(hidden), attention=attention)  # (B, T, output_size)


def _per_sentence(weights: Tensor, sentence: Tensor, sentences: int) -> Tensor:
    """The readout's attention (B, H, 1 + T, 1 + T) averaged over heads, summed per story sentence: (B, S)."""
    readout = weights[:, :, 0, 1:].mean(1)  # (B, T)
    summed = readout.new_zeros(len(readout), sentences + 1).scatter_add_(1, sentence, readout)
    return summed[:, :sentences]  # the question's share dropped
