"""Hierarchical attention network for document classification (Yang et al. 2016)."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnmem.attention import attend
from attnmem.blocks.checks import check_sizes
from attnmem.blocks.output import Output
from attnmem.blocks.rnn import Encoder, check_rnn_options, stacked
from attnmem.core.float32 import recurrent

__all__ = ["HAN"]


class HAN(nn.Module):
    """Hierarchical Attention Network (Yang et al. 2016, §2): words → sentence vectors → a document vector.

    Word encoder (eq. 1-4): h_it = [→h_it; ←h_it], a bidirectional GRU over each sentence's embedded words.
    Word attention (eq. 5-7): α_it = softmax_t score(u_w, h_it), s_i = Σ_t α_it h_it, with u_w a learned word
    context vector as the query. With `attention=additive` the score is vᵀ tanh(W u_w + U h_it + b): since u_w is
    constant, W u_w + b is one learned bias and v plays u_w's part, which is the paper's
    u_itᵀ u_w with u_it = tanh(W_w h_it + b_w) exactly. Sentence encoder (eq. 8-9): a bidirectional GRU over the
    s_i; sentence attention (eq. 10): β_i = softmax_i score(u_s, h_i), v = Σ_i β_i h_i; eq. 11: softmax(W_c v + b_c).
    Each GRU direction has `hidden_size // 2` units (the paper: 50 each, so h is 100 wide), and both context
    vectors are `hidden_size` wide. `Output.attention` is `[α (B, S, L), β (B, S)]`, zeros on padding.
    """

    families: ClassVar[tuple[str, ...]] = ("classify",)

    def __init__(self, *, vocab_size: int, num_classes: int, score: Callable[..., nn.Module], pad_id: int = 0,
                 embed_dim: int = 64, hidden_size: int = 64, dropout: float = 0.0) -> None:
        super().__init__()
        check_sizes("HAN", {"vocab_size": vocab_size, "num_classes": num_classes})
        check_rnn_options("HAN", cell="gru", hidden_size=hidden_size, num_layers=1, dropout=dropout,
                          embed_dim=embed_dim, bidirectional=True)
        self.pad_id, self.hidden_size = pad_id, hidden_size
        self.word_encoder = Encoder(vocab_size=vocab_size, pad_id=pad_id, cell="gru", embed_dim=embed_dim,
                                    hidden_size=hidden_size, num_layers=1, bidirectional=True, dropout=0.0)
        self.word_context = nn.Parameter(torch.randn(hidden_size) * hidden_size**-0.5)  # u_w
        self.word_score = score(query_dim=hidden_size, key_dim=hidden_size)
        self.sentence_encoder = stacked("gru", hidden_size, hidden_size // 2, 1, 0.0, bidirectional=True)
        self.sentence_context = nn.Parameter(torch.randn(hidden_size) * hidden_size**-0.5)  # u_s
        self.sentence_score = score(query_dim=hidden_size, key_dim=hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(hidden_size, num_classes)  # W_c, b_c

    def forward(self, batch: dict[str, Tensor]) -> Output:
        document = batch["document"].long()  # (B, S, L)
        b, s, length = document.shape
        words = document.view(b * s, length)  # (B·S, L)
        real = (words != self.pad_id).any(-1)  # (B·S,) the sentences that have words
        index = real.nonzero().squeeze(-1)  # (N,)
        h, _, mask = self.word_encoder(words[index])  # eq. 1-4: (N, L, H), (N, L)
        u_w = self.word_context.to(h.dtype).expand(len(h), 1, -1)  # (N, 1, H)
        # eqs. 5-7: (N, 1, H), (N, 1, L)
        sentence, alpha = attend(u_w, h, h, self.word_score, attn_mask=mask.unsqueeze(1))
        assert alpha is not None  # attend returns the weights unless need_weights=False
        vectors = sentence.new_zeros(b * s, self.hidden_size).index_copy(0, index, sentence[:, 0])  # (B·S, H)
        present = real.view(b, s)  # (B, S), sentences left-aligned
        h_s = self._sentences(vectors.view(b, s, -1), present)  # eq. 8-9: (B, S, H)
        u_s = self.sentence_context.to(h_s.dtype).expand(b, 1, -1)  # (B, 1, H)
        doc, beta = attend(u_s, h_s, h_s, self.sentence_score, attn_mask=present.unsqueeze(1))  # eq. 10
        assert beta is not None  # attend returns the weights unless need_weights=False
        word_weights = alpha.new_zeros(b * s, length).index_copy(0, index, alpha[:, 0]).view(b, s, length)
        return Output(pred=self.head(self.dropout(doc[:, 0])), attention=[word_weights, beta[:, 0]])  # eq. 11

    def _sentences(self, vectors: Tensor, present: Tensor) -> Tensor:
        """The sentence encoder's states (B, S, H) over the left-aligned sentence vectors (B, S, H)."""
        lengths = present.sum(1).clamp_min(1).cpu()
        packed = pack_padded_sequence(vectors, lengths, batch_first=True, enforce_sorted=False)
        out, _ = recurrent(self.sentence_encoder, packed)
        states, _ = pad_packed_sequence(out, batch_first=True, total_length=vectors.shape[1])
        return states
