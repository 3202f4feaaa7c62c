"""Transformer encoder-decoder (Vaswani et al. 2017) for the `seq2seq` family, and its decoder stack."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, cast

import torch
from torch import Tensor, nn

from attnmem.attention import MultiHead
from attnmem.blocks.output import Output
from attnmem.blocks.transformer import Encoder, Positions, Residual, causal_mask, check_options, feed_forward

__all__ = ["Decoder", "DecoderLayer", "Transformer"]


class DecoderLayer(nn.Module):
    """Masked self-attention, attention over the encoder's output, the feed-forward net (§3.1)."""

    def __init__(
        self, *, d_model: int, heads: int, d_ff: int, score: Callable[..., nn.Module], dropout: float, norm_first: bool
    ) -> None:
        super().__init__()
        self.self_attn, self.cross_attn = MultiHead(d_model, heads, score), MultiHead(d_model, heads, score)
        self.feed_forward = feed_forward(d_model, d_ff, dropout)
        self.residuals = nn.ModuleList(Residual(d_model, dropout, norm_first) for _ in range(3))

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        *,
        self_mask: Tensor | None,
        memory_mask: Tensor | None,
        need_weights: bool,
        context: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """`x (B, Lt, D)` over `memory (B, Ls, D)` -> (B, Lt, D) and cross-attention weights (B, H, Lt, Ls).

        `context (B, t, D)`: the layer's inputs the self-attention reads (default `x`); in incremental
        decoding, every position so far, of which `x` is the last.
        """
        self_res, cross_res, ff_res = cast("Iterable[Residual]", self.residuals)  # a ModuleList of three Residuals
        h = self_res.inner(x)
        read = h if context is None else self_res.inner(context)
        x = self_res.outer(x, self.self_attn(h, read, read, attn_mask=self_mask, need_weights=False)[0])
        attended, weights = self.cross_attn(
            cross_res.inner(x), memory, memory, attn_mask=memory_mask, need_weights=need_weights
        )
        x = cross_res.outer(x, attended)
        return ff_res.outer(x, self.feed_forward(ff_res.inner(x))), weights


class Decoder(nn.Module):
    """A stack of decoder layers; pre-LN stacks end in a LayerNorm."""

    def __init__(self, *, layers: int, norm_first: bool, **layer_options: Any) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(norm_first=norm_first, **layer_options) for _ in range(layers))
        self.norm = nn.LayerNorm(layer_options["d_model"]) if norm_first else nn.Identity()

    def forward(
        self, x: Tensor, memory: Tensor, *, memory_mask: Tensor | None, need_weights: bool
    ) -> tuple[Tensor, list[Tensor]]:
        """`x (B, Lt, D)` -> (B, Lt, D) and each layer's cross-attention weights (B, H, Lt, Ls) when wanted."""
        causal = causal_mask(x.shape[1], x.device)  # (1, Lt, Lt)
        all_weights = []
        for layer in self.layers:
            x, weights = layer(x, memory, self_mask=causal, memory_mask=memory_mask, need_weights=need_weights)
            all_weights += [weights] if weights is not None else []
        return self.norm(x), all_weights

    def step(
        self, x: Tensor, memory: Tensor, *, memory_mask: Tensor | None, past: list[Tensor]
    ) -> tuple[Tensor, list[Tensor]]:
        """One new position `x (B, 1, D)`, given each layer's inputs at the earlier ones `past[l] (B, t, D)`.

        Exact because self-attention is causal: earlier positions never change. Returns the output
        (B, 1, D) and each layer's inputs with the new position appended.
        """
        inputs = []
        for layer, earlier in zip(self.layers, past):
            inputs.append(torch.cat([earlier, x], dim=1))  # (B, t + 1, D)
            x, _ = layer(x, memory, self_mask=None, memory_mask=memory_mask, need_weights=False, context=inputs[-1])
        return self.norm(x), inputs


class Transformer(nn.Module):
    """Transformer encoder-decoder, Vaswani et al. 2017, "Attention Is All You Need" (NeurIPS).

    Token embeddings times √d_model (§3.4) plus positions (§3.5), `layers` encoder and decoder layers
    (§3.1) whose multi-head attention (§3.2.2) scores with `score` (the paper's is scaled dot-product,
    eq. 1, which takes the fused SDPA kernel), and a linear layer to target-vocabulary logits (the
    softmax is left to the loss). `norm_first` puts LayerNorm before each sub-layer (pre-LN, Xiong
    et al. 2020: trains without warm-up); false is the paper's post-LN. Padding keys of the source
    are masked, and target self-attention is causal (target padding only follows the end).

    In eval mode `forward` returns each decoder layer's cross-attention (B, H, Lt-1, Ls) in
    `Output.attention` for plots; training skips the weights (the fast path). Decoding:
    `encode(src)` gives a state of batch-first tensors, `decode_step(state, tokens)` runs the decoder
    on the new position only, reading the earlier positions' layer inputs kept in the state.
    """

    families: ClassVar[tuple[str, ...]] = ("seq2seq",)

    def __init__(
        self,
        *,
        src_vocab_size: int,
        tgt_vocab_size: int,
        pad_id: int,
        score: Callable[..., nn.Module],
        d_model: int = 128,
        heads: int = 4,
        layers: int = 2,
        d_ff: int = 512,
        dropout: float = 0.1,
        positions: str = "sinusoidal",
        max_len: int = 256,
        norm_first: bool = True,
    ) -> None:
        super().__init__()
        check_options(
            "Transformer",
            d_model=d_model,
            heads=heads,
            d_ff=d_ff,
            layers=layers,
            dropout=dropout,
            positions=positions,
            max_len=max_len,
        )
        self.pad_id, self.scale, self.layers = pad_id, math.sqrt(d_model), layers
        # N(0, 1/d) times √d: unit-variance inputs, as tensor2tensor initialises the scaled embeddings
        self.src_embed, self.tgt_embed = nn.Embedding(src_vocab_size, d_model), nn.Embedding(tgt_vocab_size, d_model)
        for embed in (self.src_embed, self.tgt_embed):
            nn.init.normal_(embed.weight, std=d_model**-0.5)
        self.src_positions = Positions(d_model, max_len, positions, dropout)
        self.tgt_positions = Positions(d_model, max_len, positions, dropout)
        options: dict[str, Any] = {  # the layers' options, of several types
            "layers": layers,
            "norm_first": norm_first,
            "d_model": d_model,
            "heads": heads,
            "d_ff": d_ff,
            "score": score,
            "dropout": dropout,
        }
        self.encoder, self.decoder = Encoder(**options), Decoder(**options)
        self.generator = nn.Linear(d_model, tgt_vocab_size)

    def encode(self, src: Tensor) -> dict[str, Tensor]:
        """The decoding state of `src (B, Ls)`: encoder output, source mask, and each decoder layer's
        inputs at the target positions fed so far (`layer{l}`, (B, 0, D) at the start)."""
        memory, memory_mask = self._encode(src)
        empty = memory.new_empty(len(src), 0, memory.shape[-1])  # (B, 0, D)
        return {"memory": memory, "memory_mask": memory_mask} | {f"layer{i}": empty for i in range(self.layers)}

    def decode_step(self, state: dict[str, Tensor], tokens: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """Feed `tokens (B,)` at the next position; return next-token logits (B, V) and the new state."""
        past = [state[f"layer{i}"] for i in range(self.layers)]
        x = self.tgt_positions(self.tgt_embed(tokens.unsqueeze(1)) * self.scale, start=past[0].shape[1])  # (B, 1, D)
        hidden, inputs = self.decoder.step(x, state["memory"], memory_mask=state["memory_mask"], past=past)
        return self.generator(hidden[:, -1]), state | {f"layer{i}": t for i, t in enumerate(inputs)}

    def forward(self, batch: dict[str, Tensor]) -> Output:
        need_weights = not self.training
        memory, memory_mask = self._encode(batch["src"])
        hidden, cross = self._decode(batch["tgt"][:, :-1], memory, memory_mask, need_weights=need_weights)
        return Output(pred=self.generator(hidden), attention=cross)  # (B, Lt-1, V)

    def _encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        memory_mask = (src != self.pad_id).unsqueeze(1)  # (B, 1, Ls): True = a real source token
        x = self.src_positions(self.src_embed(src) * self.scale)  # (B, Ls, D)
        memory, _ = self.encoder(x, mask=memory_mask, need_weights=False)
        return memory, memory_mask

    def _decode(
        self, tgt: Tensor, memory: Tensor, memory_mask: Tensor, *, need_weights: bool
    ) -> tuple[Tensor, list[Tensor]]:
        x = self.tgt_positions(self.tgt_embed(tgt) * self.scale)  # (B, Lt, D)
        return self.decoder(x, memory, memory_mask=memory_mask, need_weights=need_weights)
