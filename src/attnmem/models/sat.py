"""Show, Attend and Tell: a CNN's grid of annotation vectors, an LSTM decoder attending over it (Xu et al. 2015)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.attention import attend
from attnmem.blocks.checks import check_sizes
from attnmem.blocks.output import Output

__all__ = ["SAT"]

ATTENTION_TYPES = ("soft", "hard")


def _encoder(channels: int, conv_channels: Sequence[int]) -> nn.Sequential:
    """3 x 3 convolutions with ReLUs, a 2 x 2 max-pool after each but the last: the image to a feature grid."""
    layers: list[nn.Module] = []
    for k, width in enumerate(conv_channels):
        layers += [nn.Conv2d(channels, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU()]
        if k < len(conv_channels) - 1:
            layers.append(nn.MaxPool2d(2, ceil_mode=True))
        channels = width
    return nn.Sequential(*layers)


class SAT(nn.Module):
    """Xu et al. 2015, "Show, Attend and Tell: Neural Image Caption Generation with Visual Attention".

    Encoder (§3.1.1): a small CNN (`conv_channels`) maps the image to an h x w grid of annotation vectors
    a = {a_1 .. a_L}, L = h·w; with `coords` each a_i also carries its cell's row and column in [0, 1] (so that
    a caption read left to right can find the next object). Decoder (§3.1.2): an LSTM started from
    h_0 = tanh(f_init,h(mean a_i)), c_0 = tanh(f_init,c(mean a_i)); at step t
    - e_ti = f_att(a_i, h_{t-1}) (eq. 4): the `attention` group's score of the query h_{t-1} against the key W_a a_i;
      α_t = softmax(e_t) (eq. 5);
    - the context ẑ_t = φ({a_i}, {α_i}) (eq. 6), by `attention_type`:
      `soft` (§4.2): ẑ_t = Σ_i α_ti a_i (eq. 13), deterministic; `hard` (§4.1): a location s_t ~ Multinoulli(α_t)
      (eq. 8) and ẑ_t = a_{s_t}, sampled while training (the family module adds REINFORCE, eqs. 9-12) and the
      arg-max location at evaluation;
    - with `selector`, the gate β_t = σ(f_β(h_{t-1})) scales the context: ẑ_t ← β_t ẑ_t (§4.2.1);
    - the LSTM reads [E y_{t-1}; ẑ_t] (eqs. 1-3) and the deep output gives
      p(y_t) ∝ exp(L_o(E y_{t-1} + L_h h_t + L_z ẑ_t)) (eq. 7), with dropout on h_t.
    `Output.attention` is `[alpha (B, T, h, w)]`; hard attention adds `chosen (B, T, h, w)`, the one-hot of the
    location each step read, from which the family module takes log p(s_t | a) and the entropy of α_t.
    """

    families: ClassVar[tuple[str, ...]] = ("caption",)

    def __init__(
        self,
        *,
        vocab_size: int,
        channels: int,
        score: Callable[..., nn.Module],
        pad_id: int = 0,
        attention_type: str = "soft",
        conv_channels: Sequence[int] = (16, 32, 32),
        coords: bool = True,
        embed_dim: int = 32,
        hidden_size: int = 64,
        selector: bool = True,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        check_sizes("SAT", {"vocab_size": vocab_size, "channels": channels, "embed_dim": embed_dim,
                            "hidden_size": hidden_size})
        if attention_type not in ATTENTION_TYPES:
            raise ValueError(f"SAT: attention_type must be one of {ATTENTION_TYPES}, got {attention_type!r}")
        if not conv_channels or min(conv_channels) < 1:
            raise ValueError(f"SAT: conv_channels must be a non-empty list of widths >= 1, got {list(conv_channels)}")
        if not 0 <= dropout < 1:
            raise ValueError(f"SAT: dropout must be in [0, 1), got {dropout}")
        self.attention_type, self.coords = attention_type, coords
        self.encoder = _encoder(channels, conv_channels)
        annotation = conv_channels[-1] + (2 if coords else 0)  # D
        self.init_h, self.init_c = nn.Linear(annotation, hidden_size), nn.Linear(annotation, hidden_size)
        self.key = nn.Linear(annotation, hidden_size, bias=False)  # W_a: a_i into the query's width
        self.score = score(query_dim=hidden_size, key_dim=hidden_size)  # f_att
        self.beta = nn.Linear(hidden_size, 1) if selector else None  # f_β
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_id)  # E
        self.lstm = nn.LSTMCell(embed_dim + annotation, hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.out_h, self.out_z = nn.Linear(hidden_size, embed_dim), nn.Linear(annotation, embed_dim)  # L_h, L_z
        self.out = nn.Linear(embed_dim, vocab_size)  # L_o

    def annotations(self, image: Tensor) -> Tensor:
        """The annotation grid a (B, h, w, D) of `image (B, C, H, W)`."""
        grid = self.encoder(image).permute(0, 2, 3, 1)  # (B, h, w, D')
        if not self.coords:
            return grid
        batch, rows, cols, _ = grid.shape
        r = torch.linspace(0, 1, rows, device=grid.device).view(1, rows, 1, 1).expand(batch, rows, cols, 1)
        c = torch.linspace(0, 1, cols, device=grid.device).view(1, 1, cols, 1).expand(batch, rows, cols, 1)
        return torch.cat([grid, r.to(grid.dtype), c.to(grid.dtype)], -1)  # (B, h, w, D)

    def forward(self, batch: dict[str, Tensor]) -> Output:
        image = batch["image"]
        grid = self.annotations(image)  # (B, h, w, D)
        state = self._start(grid.flatten(1, 2))
        tokens = batch["tgt"][:, :-1].long()  # teacher forcing: bos, y1 .. yn
        logits, alphas, chosen = [], [], []
        for t in range(tokens.shape[1]):
            step_logits, state, alpha, location = self._step(state, tokens[:, t])
            logits.append(step_logits)
            alphas.append(alpha)
            chosen.append(location)
        shape = (image.shape[0], tokens.shape[1], *grid.shape[1:3])  # (B, T, h, w)
        attention = [torch.stack(alphas, 1).view(shape)]
        if self.attention_type == "hard":
            attention.append(torch.stack(chosen, 1).view(shape))
        return Output(pred=torch.stack(logits, 1), attention=attention)  # (B, T, V)

    def encode(self, src: Tensor) -> dict[str, Tensor]:
        """The decoding state of images `src (B, C, H, W)`: annotations, their keys, h_0 and c_0."""
        return self._start(self.annotations(src).flatten(1, 2))

    def decode_step(self, state: dict[str, Tensor], tokens: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """Next-word logits (B, V) after feeding `tokens (B,)`, and the new state."""
        logits, state, _, _ = self._step(state, tokens)
        return logits, state

    def _start(self, annotations: Tensor) -> dict[str, Tensor]:
        mean = annotations.mean(1)  # (B, D)
        return {"annotations": annotations, "keys": self.key(annotations),  # (B, L, D), (B, L, H)
                "h": torch.tanh(self.init_h(mean)), "c": torch.tanh(self.init_c(mean))}

    def _step(self, state: dict[str, Tensor], tokens: Tensor) -> tuple[Tensor, dict[str, Tensor], Tensor, Tensor]:
        annotations, h = state["annotations"], state["h"]  # (B, L, D), (B, H)
        embedded = self.embed(tokens.long())  # E y_{t-1} (B, E)
        context, alpha = attend(h.unsqueeze(1), state["keys"], annotations, self.score)  # eqs. 4, 5, 13
        assert alpha is not None  # attend returns the weights unless need_weights=False
        alpha = alpha.squeeze(1)  # (B, L)
        if self.attention_type == "hard":  # eq. 8: sample while training, the arg-max location at evaluation
            where = torch.multinomial(alpha.detach().float(), 1) if self.training else alpha.argmax(-1, keepdim=True)
            location = F.one_hot(where.squeeze(1), alpha.shape[1]).to(annotations.dtype)  # (B, L)
            z = (location.unsqueeze(1) @ annotations).squeeze(1)  # a_{s_t} (B, D)
        else:
            location, z = alpha, context.squeeze(1)  # (B, L), (B, D)
        if self.beta is not None:
            z = torch.sigmoid(self.beta(h)) * z  # β_t ẑ_t (§4.2.1)
        h, c = self.lstm(torch.cat([embedded, z], -1), (h, state["c"]))  # eqs. 1-3
        logits = self.out(embedded + self.out_h(self.dropout(h)) + self.out_z(z))  # eq. 7
        return logits, {**state, "h": h, "c": c}, alpha, location
