"""Bidirectional Attention Flow (Seo, Kembhavi, Farhadi & Hajishirzi 2017, arXiv:1611.01603)."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.attention import attend
from attnmem.blocks.bilstm import BiLSTM
from attnmem.blocks.checks import check_sizes
from attnmem.blocks.embedding import embedding
from attnmem.blocks.output import Output
from attnmem.models.contract import NamedAttention

__all__ = ["BiDAF", "CharCNN", "Highway"]


class CharCNN(nn.Module):
    """Character embedding layer (§2, 1): characters embedded, a 1-D convolution, max-pooled over the word."""

    def __init__(self, char_vocab_size: int, char_dim: int, channels: int, width: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(char_vocab_size, char_dim, padding_idx=0)
        # padding width // 2: any word length gives at least one output position
        self.conv = nn.Conv1d(char_dim, channels, width, padding=width // 2)

    def forward(self, chars: Tensor) -> Tensor:
        """`chars (B, T, W)` character ids -> one vector per word (B, T, channels)."""
        b, t, w = chars.shape
        embedded = self.embedding(chars.reshape(b * t, w)).transpose(1, 2)  # (B·T, c, W)
        return F.relu(self.conv(embedded)).amax(-1).view(b, t, -1)  # (B, T, channels)


class Highway(nn.Module):
    """Highway network (Srivastava et al. 2015): y = g ∘ relu(W_H x) + (1 − g) ∘ x, g = σ(W_T x), per layer."""

    def __init__(self, width: int, layers: int) -> None:
        super().__init__()
        self.transforms = nn.ModuleList(nn.Linear(width, width) for _ in range(layers))
        self.gates = nn.ModuleList(nn.Linear(width, width) for _ in range(layers))

    def forward(self, x: Tensor) -> Tensor:
        for transform, gate in zip(self.transforms, self.gates):
            g = torch.sigmoid(gate(x))
            x = g * F.relu(transform(x)) + (1 - g) * x  # (B, T, d)
        return x


class BiDAF(nn.Module, NamedAttention):
    """BiDAF for span QA (Seo et al. 2017, §2): six layers, the attention flow reading one similarity both ways.

    1-2. Character CNN and word embeddings, concatenated and passed through a highway network (§2, 1-2).
    3. A bi-LSTM shared by context and question: H (B, T, 2d), U (B, J, 2d) (§2, 3).
    4. Attention flow (§2, 4): S_tj = α(H_t, U_j) = `score(H, U)` (eq. 1; `trilinear`, wᵀ[h; u; h∘u], is the
       paper's); context-to-query a_t = softmax_j(S_t:), Ũ_t = Σ_j a_tj U_j; query-to-context
       b = softmax_t(max_j S_tj), h̃ = Σ_t b_t H_t tiled over t (eq. 2); G_t = [H_t; Ũ_t; H_t∘Ũ_t; H_t∘h̃] (eq. 3).
    5. Modelling layer: `modeling_layers` bi-LSTMs over G give M (B, T, 2d) (§2, 5).
    6. Output (eq. 4-5): p¹ = softmax(w_p1ᵀ[G; M]), M² = bi-LSTM(M), p² = softmax(w_p2ᵀ[G; M²]).
    d is `hidden_size`. Decoding (end ≥ start) is the span family's, as the DCN's.

    `pred (B, 1, 2, Lc)`: start and end logits (one "iteration"). `attention`: the C2Q weights a transposed to
    (B, Lq, Lc), question words as rows like the DCN's Aᵠ, then the Q2C weights b (B, 1, Lc).
    """

    families: ClassVar[tuple[str, ...]] = ("span",)
    attention_name: ClassVar[str] = "C2Q attention"  # what the span family's plots call attention[0]

    def __init__(
        self,
        *,
        vocab_size: int,
        char_vocab_size: int,
        score: Callable[..., nn.Module],
        embeddings: Tensor | None = None,
        embed_dim: int = 100,
        freeze_embeddings: bool = True,
        char_dim: int = 8,
        char_channels: int = 100,
        char_width: int = 5,
        highway_layers: int = 2,
        hidden_size: int = 100,
        modeling_layers: int = 2,
        dropout: float = 0.2,
    ) -> None:
        super().__init__()
        if char_vocab_size < 1:
            raise ValueError(
                f"BiDAF reads character ids: char_vocab_size must be >= 1, got {char_vocab_size} (in a run: "
                "data.word_len must be >= 1; model=bidaf's defaults pick conf/inputs/chars.yaml, word_len 16)"
            )
        sizes = {"vocab_size": vocab_size, "embed_dim": embed_dim, "char_dim": char_dim}
        sizes |= {"char_channels": char_channels, "char_width": char_width, "highway_layers": highway_layers}
        check_sizes("BiDAF", sizes | {"hidden_size": hidden_size, "modeling_layers": modeling_layers}, prefix="model.")
        if not 0 <= dropout < 1:
            raise ValueError(f"BiDAF: dropout must be in [0, 1), got {dropout} (model.dropout in a run)")
        d = hidden_size
        self.word_embedding = embedding(vocab_size, embed_dim, embeddings, freeze_embeddings)
        self.char_cnn = CharCNN(char_vocab_size, char_dim, char_channels, char_width)
        width = self.word_embedding.embedding_dim + char_channels
        self.highway = Highway(width, highway_layers)
        self.contextual = BiLSTM(width, d)
        self.similarity = score(query_dim=2 * d, key_dim=2 * d)  # α of eq. 1
        self.modeling = nn.ModuleList(BiLSTM(8 * d if k == 0 else 2 * d, d) for k in range(modeling_layers))
        self.end_lstm = BiLSTM(2 * d, d)  # M² (eq. 5)
        self.start_proj, self.end_proj = nn.Linear(10 * d, 1), nn.Linear(10 * d, 1)  # w_p1, w_p2
        self.dropout = nn.Dropout(dropout)

    def _encode(self, words: Tensor, chars: Tensor, lengths: Tensor) -> Tensor:
        """Layers 1-3 for one side: words (B, T) and their characters (B, T, W) -> (B, T, 2d)."""
        x = torch.cat([self.word_embedding(words), self.char_cnn(chars)], dim=-1)  # (B, T, e + channels)
        return self.contextual(self.dropout(self.highway(self.dropout(x))), lengths)  # (B, T, 2d)

    def attention_flow(
        self, h: Tensor, u: Tensor, context_mask: Tensor, question_mask: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """G (B, T, 8d) (eq. 3), the C2Q weights a (B, T, J) and the Q2C weights b (B, 1, T) from H and U."""
        similarity = self.similarity(h, u)  # S (eq. 1): (B, T, J), computed once, read both ways
        u_tilde, a = attend(h, u, u, lambda *_: similarity, attn_mask=question_mask.unsqueeze(1))  # Ũ: (B, T, 2d)
        # an empty question leaves no maximum: its context words then score 0
        best = similarity.masked_fill(~question_mask.unsqueeze(1), float("-inf")).amax(-1).nan_to_num(neginf=0.0)
        keep = context_mask.unsqueeze(1)  # (B, 1, T)
        h_tilde, b = attend(h[:, :1], h, h, lambda *_: best.unsqueeze(1), attn_mask=keep)  # (B, 1, 2d)
        assert a is not None and b is not None  # attend returns the weights unless need_weights=False
        g = torch.cat([h, u_tilde, h * u_tilde, h * h_tilde], dim=-1)  # h̃ tiled over t by broadcasting: (B, T, 8d)
        return g, a, b

    def forward(self, batch: dict[str, Tensor]) -> Output:
        context, question = batch["context"], batch["question"]  # (B, T), (B, J)
        context_mask, question_mask = context.ne(0), question.ne(0)
        context_len = context_mask.sum(-1)  # (B,)
        h = self._encode(context, batch["context_chars"], context_len)  # H: (B, T, 2d)
        u = self._encode(question, batch["question_chars"], question_mask.sum(-1))  # U: (B, J, 2d)
        g, a, b = self.attention_flow(h, u, context_mask, question_mask)
        m = g
        for layer in self.modeling:
            m = layer(self.dropout(m), context_len)  # M: (B, T, 2d)
        m2 = self.end_lstm(self.dropout(m), context_len)  # M²: (B, T, 2d)
        start = self.start_proj(self.dropout(torch.cat([g, m], dim=-1))).squeeze(-1)  # eq. 4: (B, T)
        end = self.end_proj(self.dropout(torch.cat([g, m2], dim=-1))).squeeze(-1)  # eq. 5: (B, T)
        logits = torch.stack([start, end], dim=1).masked_fill(~context_mask.unsqueeze(1), float("-inf"))
        return Output(pred=logits.unsqueeze(1), attention=[a.transpose(1, 2), b])  # (B, 1, 2, T)
