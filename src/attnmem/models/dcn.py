"""Dynamic Coattention Network (Xiong, Zhong & Socher 2016, arXiv:1611.01604), with DCN+'s deep residual
coattention as an option (Xiong, Zhong & Socher 2017, arXiv:1711.00106, §2.1)."""

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
from attnmem.core.float32 import recurrent
from attnmem.models.dcn_decoder import DynamicDecoder

__all__ = ["DCN", "Coattention"]


def with_sentinel(states: Tensor, mask: Tensor, sentinel: Tensor) -> tuple[Tensor, Tensor]:
    """`states (B, T, l)` with the sentinel appended as position T, and the mask (B, T+1) that keeps it."""
    b = states.shape[0]
    states = torch.cat([states, sentinel.expand(b, 1, -1)], dim=1)  # (B, T+1, l)
    return states, torch.cat([mask, mask.new_ones(b, 1)], dim=1)  # (B, T+1)


class Coattention(nn.Module):
    """Coattention (Xiong et al. 2016, §2.2, eq. 2-3): one affinity L = score(D, Q), read both ways.

    Aᵠ = softmax over the document of L (each question word's weights), Cᵠ = D Aᵠ;
    Aᴰ = softmax over the question of Lᵀ, Cᴰ = [Q; Cᵠ] Aᴰ. With `dot` L = DᵀQ, the paper's affinity.
    """

    def __init__(self, hidden_size: int, score: Callable[..., nn.Module]) -> None:
        super().__init__()
        self.score = score(query_dim=hidden_size, key_dim=hidden_size)

    def _transposed(self, question: Tensor, document: Tensor) -> Tensor:
        """Lᵀ (B, n+1, m+1): the same affinity score(D, Q), read from the question's side."""
        return self.score(document, question).transpose(-1, -2)

    def forward(
        self, document: Tensor, question: Tensor, document_mask: Tensor, question_mask: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Return Cᴰ (B, m+1, 2l), Cᵠ (B, n+1, l), Aᵠ (B, n+1, m+1), Aᴰ (B, m+1, n+1); inputs include sentinels."""
        summary_q, weights_q = attend(question, document, document, self._transposed, mask=document_mask.unsqueeze(1))
        values = torch.cat([question, summary_q], dim=-1)  # (B, n+1, 2l)
        context_d, weights_d = attend(document, question, values, self.score, mask=question_mask.unsqueeze(1))
        return context_d, summary_q, weights_q, weights_d


class DCN(nn.Module):
    """Dynamic Coattention Network for span QA (Xiong et al. 2016).

    A shared LSTM encodes document and question (eq. 1), each with a learned sentinel; the
    question gets a non-linear projection Q = tanh(W⁽ᵠ⁾Q' + b⁽ᵠ⁾). `Coattention` layers read the
    affinity both ways; a bi-LSTM fuses [D; Cᴰ] into U (eq. 4), and the dynamic pointing decoder
    iterates start/end estimates with highway maxout networks (§2.3). `coattention_layers=2` is
    DCN+'s deep coattention: layer k+1 re-encodes layer k's Cᴰ and Cᵠ with bi-LSTMs, and the fusion
    reads every layer's [D_k; Cᴰ_k] (the residual concatenation).

    `pred (B, iterations, 2, Lc)`: start (index 0) and end (1) logits of every decoder iteration.
    `attention`: per coattention layer, Aᵠ (B, Lq+1, Lc+1) then Aᴰ (B, Lc+1, Lq+1), sentinels last.
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
        hidden_size: int = 200,
        pool_size: int = 16,
        iterations: int = 4,
        coattention_layers: int = 1,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        sizes = {"vocab_size": vocab_size, "embed_dim": embed_dim, "hidden_size": hidden_size}
        sizes |= {"pool_size": pool_size, "iterations": iterations, "coattention_layers": coattention_layers}
        check_sizes("DCN", sizes, prefix="model.")
        if coattention_layers > 1 and hidden_size % 2:
            raise ValueError(f"DCN: model.hidden_size must be even with coattention_layers > 1, got {hidden_size}")
        if not 0 <= dropout < 1:
            raise ValueError(f"DCN: model.dropout must be in [0, 1), got {dropout}")
        size = hidden_size
        self.embedding = embedding(vocab_size, embed_dim, embeddings, freeze_embeddings)
        self.encoder = nn.LSTM(self.embedding.embedding_dim, size, batch_first=True)
        self.question_proj = nn.Linear(size, size)  # W^(Q), b^(Q)
        self.sentinels = nn.Parameter(torch.randn(coattention_layers, 2, 1, size) * 0.1)  # (layers, D|Q, 1, l)
        self.coattention = nn.ModuleList(Coattention(size, score) for _ in range(coattention_layers))
        # DCN+: layer k+1 re-encodes Cᴰ_k (2l wide) and Cᵠ_k (l wide) to l with bi-LSTMs of l/2 per direction
        self.deep_document = nn.ModuleList(BiLSTM(2 * size, size // 2) for _ in range(coattention_layers - 1))
        self.deep_question = nn.ModuleList(BiLSTM(size, size // 2) for _ in range(coattention_layers - 1))
        self.fusion = BiLSTM(3 * size * coattention_layers, size)
        self.decoder = DynamicDecoder(size, pool_size, iterations)
        self.dropout = nn.Dropout(dropout)

    def _encode(self, words: Tensor) -> Tensor:
        states, _ = recurrent(self.encoder, self.dropout(self.embedding(words)))
        return states  # (B, T, l)

    def forward(self, batch: dict[str, Tensor]) -> Output:
        context, question = batch["context"], batch["question"]  # (B, m), (B, n)
        m, n = context.shape[1], question.shape[1]
        context_mask, question_mask = context.ne(0), question.ne(0)  # (B, m), (B, n)
        context_len, question_len = context_mask.sum(-1), question_mask.sum(-1)  # (B,)
        document, question_states = self._encode(context), self._encode(question)  # D, Q': (B, m, l), (B, n, l)
        fused, attention = [], []
        for k, layer in enumerate(self.coattention):
            doc, doc_mask = with_sentinel(document, context_mask, self.sentinels[k, 0])  # (B, m+1, l)
            que, que_mask = with_sentinel(question_states, question_mask, self.sentinels[k, 1])  # (B, n+1, l)
            if k == 0:  # Q = tanh(W Q' + b), the sentinel q_∅ included (eq. 1)
                que = torch.tanh(self.question_proj(que))
            context_d, summary_q, weights_q, weights_d = layer(doc, que, doc_mask, que_mask)
            fused.append(torch.cat([doc[:, :m], context_d[:, :m]], dim=-1))  # (B, m, 3l): [D; Cᴰ] without sentinel
            attention += [weights_q, weights_d]
            if k + 1 < len(self.coattention):  # DCN+: this layer's coattention contexts, re-encoded for the next
                document = self.deep_document[k](context_d[:, :m], context_len)  # (B, m, l)
                question_states = self.deep_question[k](summary_q[:, :n], question_len)  # (B, n, l)
        encoding = self.dropout(self.fusion(torch.cat(fused, dim=-1), context_len))  # U: (B, m, 2l)
        return Output(pred=self.decoder(encoding, context_mask), attention=attention)
