"""An RNN encoder-decoder with attention over the encoder states: Bahdanau et al. 2015 and Luong et al. 2015."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.attention import attend
from attnmem.blocks.checks import check_sizes
from attnmem.blocks.output import Output
from attnmem.blocks.rnn import Encoder, RNNOptions, check_rnn_options, layer_state, stacked, step_state
from attnmem.core.float32 import recurrent

__all__ = ["AttnRNN"]

STYLES = ("bahdanau", "luong")
MODES = ("global", "local_m", "local_p", "hard")


def _check_attention_options(style: str, mode: str, window: int) -> None:
    """ValueError naming `style`, `mode` or `window` when it does not fit."""
    if style not in STYLES:
        raise ValueError(f"AttnRNN: style must be one of {STYLES}, got {style!r}")
    if mode not in MODES:
        raise ValueError(f"AttnRNN: mode must be one of {MODES}, got {mode!r}")
    least = 1 if mode == "local_p" else 0
    if window < least:
        raise ValueError(f"AttnRNN: window (D) must be >= {least} for mode={mode}, got {window}")


class AttnRNN(nn.Module):
    """Encoder-decoder with attention; the score comes from the `attention` group (`score(query_dim, key_dim)`).

    Encoder: a (bidirectional) RNN over the source, states h̄_s of `hidden_size`. Decoder, by `style`:
    - `bahdanau` (Bahdanau et al. 2015, "Neural Machine Translation by Jointly Learning to Align and
      Translate", eqs. 4-6 and A.2.2): the previous decoder state s_{i-1} is the query; the context c_i
      enters the recurrence with the previous target token, s_i = f(s_{i-1}, y_{i-1}, c_i); the output
      reads t_i = tanh(W_o [s_i; c_i; E y_{i-1}]) (a tanh readout in place of the paper's maxout).
    - `luong` (Luong et al. 2015, "Effective Approaches to Attention-based NMT", §3): the current state
      h_t is the query; h̃_t = tanh(W_c [c_t; h_t]) (eq. 5) gives p(y_t) = softmax(W_s h̃_t) (eq. 6) and is
      fed to the next step's input (input feeding, §3.3). Luong's dot / general / concat scores are
      `attention=dot|bilinear|additive`.
    Which source positions the query may attend (`mode`, Luong §3.2):
    - `global`: all of them.
    - `local_m`: the window [p_t − D, p_t + D] around p_t = t (monotonic alignment), clamped to the source's
      last position so that longer targets still attend; D is `window`.
    - `local_p`: p_t = (S − 1) · sigmoid(v_pᵀ tanh(W_p q)) (eq. 9, 0-based over a source of S tokens), the
      window around it, and the window's softmax weights times exp(−(s − p_t)² / 2σ²) with σ = D/2 (eq. 10).
    - `hard`: the one-hot argmax of the global weights. Training uses the straight-through estimator
      (forward: the one-hot; backward: the gradient of the soft weights), not REINFORCE: deterministic
      and low-variance; at inference the argmax alone.
    The decoder starts from the encoder's final state. `Output.attention` is `[alignment (B, Lt-1, Ls)]`,
    the weights each target step put on each source token (one-hot rows in `hard` mode).
    """

    families: ClassVar[tuple[str, ...]] = ("seq2seq",)

    def __init__(
        self,
        *,
        src_vocab_size: int,
        tgt_vocab_size: int,
        score: Callable[..., nn.Module],
        pad_id: int = 0,
        style: str = "luong",
        mode: str = "global",
        window: int = 5,
        cell: str = "lstm",
        embed_dim: int = 64,
        hidden_size: int = 128,
        num_layers: int = 1,
        bidirectional: bool = True,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        check_sizes("AttnRNN", {"src_vocab_size": src_vocab_size, "tgt_vocab_size": tgt_vocab_size})
        options = RNNOptions(cell=cell, embed_dim=embed_dim, hidden_size=hidden_size, num_layers=num_layers,
                             bidirectional=bidirectional, dropout=dropout)
        check_rnn_options("AttnRNN", **options)
        _check_attention_options(style, mode, window)
        self.style, self.mode, self.window = style, mode, window
        self.encoder = Encoder(vocab_size=src_vocab_size, pad_id=pad_id, **options)
        self.embed = nn.Embedding(tgt_vocab_size, embed_dim, padding_idx=pad_id)
        # the extra input: the context c_i (bahdanau) or the previous attentional state h̃_{t-1} (luong)
        self.decoder = stacked(cell, embed_dim + hidden_size, hidden_size, num_layers, dropout)
        self.score = score(query_dim=hidden_size, key_dim=hidden_size)
        if mode == "local_p":
            self.position = nn.Sequential(nn.Linear(hidden_size, hidden_size), nn.Tanh(), nn.Linear(hidden_size, 1))
        readout = 2 * hidden_size + (embed_dim if style == "bahdanau" else 0)
        self.readout = nn.Linear(readout, hidden_size)  # W_o (bahdanau) or W_c (luong)
        self.out = nn.Linear(hidden_size, tgt_vocab_size)

    def forward(self, batch: dict[str, Tensor]) -> Output:
        state = self.encode(batch["src"])
        tokens = batch["tgt"][:, :-1].long()  # teacher forcing: bos, y1 .. y_{n}
        hidden, weights = [], []
        for t in range(tokens.shape[1]):
            step_hidden, state, step_weights = self._step(state, tokens[:, t])
            hidden.append(step_hidden)
            weights.append(step_weights)
        logits = self.out(torch.stack(hidden, 1))  # (B, Lt-1, V): one projection for all steps
        return Output(pred=logits, attention=[torch.stack(weights, 1)])  # alignment (B, Lt-1, Ls)

    def encode(self, src: Tensor) -> dict[str, Tensor]:
        """The decoding state: encoder states and mask, the decoder's state, the fed vector and the step."""
        states, final, mask = self.encoder(src)
        batch = src.shape[0]
        return {
            "keys": states,
            "mask": mask,
            **step_state(final),
            "feed": states.new_zeros(batch, states.shape[-1]),
            "step": torch.zeros(batch, device=src.device),
        }

    def decode_step(self, state: dict[str, Tensor], tokens: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """Next-token logits (B, V) after feeding `tokens (B,)`, and the new state."""
        hidden, state, _ = self._step(state, tokens)
        return self.out(hidden), state

    def _step(self, state: dict[str, Tensor], tokens: Tensor) -> tuple[Tensor, dict[str, Tensor], Tensor]:
        embedded = self.embed(tokens.long())  # (B, E)
        if self.style == "bahdanau":
            context, weights = self.align(state["h"][:, -1], state)  # query: s_{i-1}, the top layer
            out, final = recurrent(self.decoder, torch.cat([embedded, context], -1).unsqueeze(1), layer_state(state))
            top = out[:, 0]  # s_i (B, H)
            hidden = torch.tanh(self.readout(torch.cat([top, context, embedded], -1)))  # t_i
        else:
            out, final = recurrent(
                self.decoder, torch.cat([embedded, state["feed"]], -1).unsqueeze(1), layer_state(state)
            )
            context, weights = self.align(out[:, 0], state)  # query: h_t
            hidden = torch.tanh(self.readout(torch.cat([context, out[:, 0]], -1)))  # h̃_t (eq. 5)
        new = {**state, **step_state(final), "feed": hidden, "step": state["step"] + 1}
        return hidden, new, weights

    def align(self, query: Tensor, state: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        """Context (B, H) and weights (B, Ls) of `query (B, H)` over the encoder states, by `mode`."""
        keys, mask = state["keys"], state["mask"]  # (B, Ls, H), (B, Ls)
        positions = torch.arange(keys.shape[1], device=keys.device, dtype=keys.dtype)  # (Ls,)
        if self.mode in ("local_m", "local_p"):
            last = mask.sum(1).to(keys.dtype) - 1  # (B,) the last source position
            if self.mode == "local_m":
                center = torch.minimum(state["step"].to(keys.dtype), last)
            else:
                center = last * torch.sigmoid(self.position(query)).squeeze(-1)  # eq. 9
            distance = positions - center.unsqueeze(1)  # (B, Ls)
            mask = mask & (distance.abs() <= self.window)
        context, weights = attend(query.unsqueeze(1), keys, keys, self.score, attn_mask=mask.unsqueeze(1))
        assert weights is not None  # attend returns the weights unless need_weights=False
        weights = weights.squeeze(1)  # (B, Ls)
        if self.mode == "local_p":
            sigma = self.window / 2
            weights = weights * torch.exp(-(distance**2) / (2 * sigma**2))  # eq. 10
        elif self.mode == "hard":
            one_hot = F.one_hot(weights.argmax(-1), keys.shape[1]).to(weights.dtype)
            weights = one_hot + weights - weights.detach() if self.training else one_hot  # straight-through
        else:
            return context.squeeze(1), weights
        return (weights.unsqueeze(1) @ keys).squeeze(1), weights
