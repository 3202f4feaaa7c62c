"""Dynamic Coattention Network (Xiong, Zhong & Socher 2016, arXiv:1611.01604), with DCN+'s deep residual
coattention encoder as an option (Xiong, Zhong & Socher 2017, arXiv:1711.00106, §2.1)."""

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
    In DCN+'s names (§2.1, eq. 3-5, coattn of eq. 8-9) Cᵠ is S^Q and Cᴰ is [S^D; C^D].
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
        """Return Cᴰ (B, m', 2l), Cᵠ (B, n', l), Aᵠ (B, n', m'), Aᴰ (B, m', n') for D (B, m', l) and Q (B, n', l).

        m' = m+1 and n' = n+1 where the inputs end with their sentinels (all but DCN+'s second layer).
        """
        summary_q, weights_q = attend(question, document, document, self._transposed,
                                      attn_mask=document_mask.unsqueeze(1))
        values = torch.cat([question, summary_q], dim=-1)  # (B, n+1, 2l)
        context_d, weights_d = attend(document, question, values, self.score, attn_mask=question_mask.unsqueeze(1))
        assert weights_q is not None and weights_d is not None  # attend returns the weights unless need_weights=False
        return context_d, summary_q, weights_q, weights_d


class DCN(nn.Module):
    """Dynamic Coattention Network for span QA (Xiong et al. 2016), or DCN+'s encoder with `coattention_layers=2`.

    DCN: a shared LSTM encodes document and question (eq. 1), each with a learned sentinel; the question
    gets a non-linear projection Q = tanh(W⁽ᵠ⁾Q' + b⁽ᵠ⁾). `Coattention` reads the affinity both ways; a
    bi-LSTM fuses [D; Cᴰ] into U (eq. 4), and the dynamic pointing decoder iterates start/end estimates with
    highway maxout networks (§2.3).

    DCN+ (Xiong et al. 2017, §2.1): a shared bi-LSTM encodes both, E^D_1 = biLSTM_1(L^D) and
    E^Q_1 = tanh(W biLSTM_1(L^Q) + b), h wide with a sentinel each (eq. 1-2); coattn_1 gives S^D_1, S^Q_1,
    C^D_1 (eq. 3-5, 8), the sentinels then dropped; one bi-LSTM, shared by both, re-encodes the summaries,
    E^D_2 = biLSTM_2(S^D_1), E^Q_2 = biLSTM_2(S^Q_1), 2h wide (eq. 6-7); coattn_2 without sentinels gives
    S^D_2, C^D_2 (eq. 9); U = biLSTM(concat(E^D_1; E^D_2; S^D_1; S^D_2; C^D_1; C^D_2)) (eq. 10, the residual
    concatenation). h is `hidden_size`; the decoder is the DCN's.

    `pred (B, iterations, 2, Lc)`: start (index 0) and end (1) logits of every decoder iteration.
    `attention`: per coattention layer, Aᵠ (B, Lq+1, Lc+1) then Aᴰ (B, Lc+1, Lq+1), sentinels last; DCN+'s
    second layer has no sentinel: (B, Lq, Lc), (B, Lc, Lq).
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
        if coattention_layers > 2:
            raise ValueError(f"DCN: coattention_layers must be 1 (DCN) or 2 (DCN+), got {coattention_layers} "
                             "(model.coattention_layers in a run)")
        deep = coattention_layers == 2
        if deep and hidden_size % 2:
            raise ValueError(f"DCN: hidden_size must be even with coattention_layers=2, got {hidden_size} "
                             "(model.hidden_size in a run)")
        if not 0 <= dropout < 1:
            raise ValueError(f"DCN: dropout must be in [0, 1), got {dropout} (model.dropout in a run)")
        size = hidden_size
        self.embedding = embedding(vocab_size, embed_dim, embeddings, freeze_embeddings)
        width = self.embedding.embedding_dim
        # DCN+'s biLSTM_1 is h wide: h/2 per direction
        self.encoder = BiLSTM(width, size // 2) if deep else nn.LSTM(width, size, batch_first=True)
        self.question_proj = nn.Linear(size, size)  # W^(Q), b^(Q)
        self.sentinels = nn.Parameter(torch.randn(1, 2, 1, size) * 0.1)  # d_∅, q_∅ of the first layer: (1, 2, 1, l)
        self.coattention = nn.ModuleList(Coattention(size * (k + 1), score) for k in range(coattention_layers))
        self.summary_encoder = BiLSTM(size, size) if deep else None  # biLSTM_2 (eq. 6-7): h -> 2h
        self.fusion = BiLSTM(9 * size if deep else 3 * size, size)  # U: 2h wide
        self.decoder = DynamicDecoder(size, pool_size, iterations)
        self.dropout = nn.Dropout(dropout)

    def _encode(self, words: Tensor, lengths: Tensor) -> Tensor:
        """The encoder shared by document and question: the DCN's LSTM or DCN+'s biLSTM_1, (B, T, l)."""
        inputs = self.dropout(self.embedding(words))  # (B, T, e)
        if isinstance(self.encoder, BiLSTM):
            return self.encoder(inputs, lengths)
        states, _ = recurrent(self.encoder, inputs)
        return states

    def forward(self, batch: dict[str, Tensor]) -> Output:
        context, question = batch["context"], batch["question"]  # (B, m), (B, n)
        m = context.shape[1]
        context_mask, question_mask = context.ne(0), question.ne(0)  # (B, m), (B, n)
        context_len = context_mask.sum(-1)  # (B,)
        document = self._encode(context, context_len)  # D, E^D_1 without d_∅: (B, m, l)
        question_states = self._encode(question, question_mask.sum(-1))  # Q', biLSTM_1(L^Q): (B, n, l)
        doc, doc_mask = with_sentinel(document, context_mask, self.sentinels[0, 0])  # (B, m+1, l)
        que, que_mask = with_sentinel(question_states, question_mask, self.sentinels[0, 1])  # (B, n+1, l)
        que = torch.tanh(self.question_proj(que))  # Q = tanh(W Q' + b), q_∅ included (eq. 1; DCN+ eq. 2)
        first = self.coattention[0](doc, que, doc_mask, que_mask)
        if self.summary_encoder is None:
            context_d, _, weights_q, weights_d = first
            fused, attention = [document, context_d[:, :m]], [weights_q, weights_d]  # [D; Cᴰ] without d_∅: (B, m, 3l)
        else:
            fused, attention = self._second_layer(document, first, context_mask, question_mask)
        encoding = self.dropout(self.fusion(torch.cat(fused, dim=-1), context_len))  # U: (B, m, 2l)
        return Output(pred=self.decoder(encoding, context_mask), attention=attention)

    def _second_layer(
        self, document: Tensor, first: tuple[Tensor, ...], context_mask: Tensor, question_mask: Tensor
    ) -> tuple[list[Tensor], list[Tensor]]:
        """DCN+ (§2.1, eq. 5-10): the inputs of U's bi-LSTM and both layers' attention weights."""
        context_d, summary_q, weights_q, weights_d = first  # [S^D_1; C^D_1] (B, m+1, 2l), S^Q_1 (B, n+1, l)
        assert self.summary_encoder is not None  # the second layer is DCN+'s, which has its summary encoder
        m, n, size = context_mask.shape[1], question_mask.shape[1], document.shape[-1]
        summary_d, coattention_d = context_d[:, :m].split(size, dim=-1)  # S^D_1, C^D_1 without d_∅: (B, m, l)
        document_2 = self.summary_encoder(summary_d, context_mask.sum(-1))  # E^D_2 (eq. 6): (B, m, 2l)
        question_2 = self.summary_encoder(summary_q[:, :n], question_mask.sum(-1))  # E^Q_2 (eq. 7): (B, n, 2l)
        context_d2, _, weights_q2, weights_d2 = self.coattention[1](document_2, question_2, context_mask, question_mask)
        summary_d2, coattention_d2 = context_d2.split(2 * size, dim=-1)  # S^D_2, C^D_2 (eq. 9): (B, m, 2l)
        fused = [document, document_2, summary_d, summary_d2, coattention_d, coattention_d2]  # eq. 10: (B, m, 9l)
        return fused, [weights_q, weights_d, weights_q2, weights_d2]
