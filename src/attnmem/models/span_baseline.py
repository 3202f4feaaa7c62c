"""A simple span QA baseline: BiLSTM encoders, a question-aware document, start/end pointers."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import torch
from torch import Tensor, nn

from attnmem.attention import attend
from attnmem.blocks.bilstm import BiLSTM
from attnmem.blocks.checks import check_sizes
from attnmem.blocks.embedding import embedding
from attnmem.blocks.output import Output

__all__ = ["SpanBaseline"]


class SpanBaseline(nn.Module):
    """BiLSTM reader with attention to the question and pointer scores (after Chen et al. 2017, DrQA, §3.1).

    Document and question are encoded by BiLSTMs; each document word attends over the question
    (`score`), a second BiLSTM reads [d; c; d∘c]; the question is pooled by attention from a learned query
    and the start and end logits are `score(W_s q, G)` and `score(W_e q, G)` (with `bilinear`,
    DrQA's p_start ∝ exp(g_t W_s q)).

    `pred (B, 1, 2, Lc)`: start and end logits (one "iteration", as the DCN's). `attention`: the
    question-over-document weights transposed to (B, Lq, Lc), question words as rows like the DCN's Aᵠ.
    """

    families: ClassVar[tuple[str, ...]] = ("span",)

    def __init__(
        self,
        *,
        vocab_size: int,
        score: Callable[..., nn.Module],
        embeddings: Tensor | None = None,
        embed_dim: int = 100,
        freeze_embeddings: bool = True,
        hidden_size: int = 128,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        sizes = {"vocab_size": vocab_size, "embed_dim": embed_dim, "hidden_size": hidden_size}
        check_sizes("SpanBaseline", sizes, prefix="model.")
        if not 0 <= dropout < 1:
            raise ValueError(f"SpanBaseline: dropout must be in [0, 1), got {dropout} (model.dropout in a run)")
        width = 2 * hidden_size
        self.embedding = embedding(vocab_size, embed_dim, embeddings, freeze_embeddings)
        self.document_encoder = BiLSTM(self.embedding.embedding_dim, hidden_size)
        self.question_encoder = BiLSTM(self.embedding.embedding_dim, hidden_size)
        self.question_score = score(query_dim=width, key_dim=width)
        self.modeling = BiLSTM(3 * width, hidden_size)
        self.pool_query = nn.Parameter(torch.randn(1, 1, width) * 0.1)  # DrQA's w in b_j ∝ exp(w·q_j)
        self.pool_score = score(query_dim=width, key_dim=width)
        self.start_proj, self.end_proj = nn.Linear(width, width), nn.Linear(width, width)
        self.start_score = score(query_dim=width, key_dim=width)
        self.end_score = score(query_dim=width, key_dim=width)
        self.dropout = nn.Dropout(dropout)

    def forward(self, batch: dict[str, Tensor]) -> Output:
        context, question = batch["context"], batch["question"]  # (B, m), (B, n)
        context_mask, question_mask = context.ne(0), question.ne(0)
        document = self.document_encoder(self.dropout(self.embedding(context)), context_mask.sum(-1))  # (B, m, 2h)
        query = self.question_encoder(self.dropout(self.embedding(question)), question_mask.sum(-1))  # (B, n, 2h)
        aligned, weights = attend(document, query, query, self.question_score, attn_mask=question_mask.unsqueeze(1))
        assert weights is not None  # attend returns the weights unless need_weights=False
        states = self.modeling(torch.cat([document, aligned, document * aligned], dim=-1), context_mask.sum(-1))
        states = self.dropout(states)  # G: (B, m, 2h)
        pool_query = self.pool_query.expand(query.shape[0], -1, -1)  # (B, 1, 2h)
        summary, _ = attend(pool_query, query, query, self.pool_score, attn_mask=question_mask.unsqueeze(1))  # (B,1,2h)
        start = self.start_score(self.start_proj(summary), states).squeeze(1)  # (B, m)
        end = self.end_score(self.end_proj(summary), states).squeeze(1)  # (B, m)
        logits = torch.stack([start, end], dim=1).masked_fill(~context_mask.unsqueeze(1), float("-inf"))
        return Output(pred=logits.unsqueeze(1), attention=[weights.transpose(1, 2)])  # (B, 1, 2, m)
