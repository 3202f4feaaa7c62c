"""A causal language model over any sequence mixer, for the `recall` family (Zoology's MQAR models).

    tokens → embedding (+ learned positions) → layers × [x + mixer(norm(x)), then, with `mlp`, x + MLP(norm(x))]
    → final norm → linear head → logits

The same backbone (`mixer_backbone.py`, shared with the sequence family's `MixerSequence`) holds softmax attention,
the state-space and convolution mixers and the attention-like ones (`blocks/`), so a recall benchmark compares the
mixers alone (Arora et al. 2024, "Zoology", §3-4: the MQAR models have no MLP). The classic recurrent models (the
LSTM, the NTM, the DNC: `recurrent_mixers.py`) are mixers too; with one layer and no positions the backbone around
one is embedding → the core → head.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, cast

import torch
from torch import Tensor, nn

from attnmem.blocks.checks import check_sizes
from attnmem.models.contract import LogitsAt
from attnmem.models.mixer_backbone import MixerBackbone

__all__ = ["MixerLM"]


class MixerLM(MixerBackbone, LogitsAt):
    """A causal language model over any sequence mixer: the recall family's backbone.

    Logits (B, T, vocab_size) for `tokens (B, T)`; step t sees tokens <= t. state_size = the sum of the
    mixers' `state_size`.

    Args:
        vocab_size: the number of token ids (from the data).
        mixer: a name (`MIXERS`: attention, selective_ssm, lti_ssm, base_conv, sliding_window,
            linear_attention, delta_rule, hopfield; the classic recurrent models lstm, ntm, dnc, each a whole
            sequence model with `layers=1, positions="none"`) or a factory building one layer from d_model.
        mixer_options: the mixer's keyword options (`d_state`, `l_max`, `heads`, `window`, ...).
        score: attention's score (the `attention` group in a run); other mixers ignore it.
        d_model: the width D.
        layers: the number of mixer layers.
        positions: `learned` (a trained table of max_len rows), `sinusoidal` (a fixed one) or `none` (the mixer
            orders steps itself).
        max_len: the longest sequence (with positions a longer one is a ValueError).
        seq_len: the data's longest sequence (training or test; `RecallDims.seq_len`), the length at which the
            state of a mixer that keeps every key and value (attention's KV cache) is counted; None: max_len.
        mlp: a feed-forward sub-block after every mixer (Zoology's MQAR models have none).
        short_conv: k > 0: a causal depthwise convolution of k taps on each mixer's input (the short convolution
            that Mamba's block, H3, Based and DeltaNet put before their mixer: it lets step t see x_{t-k+1..t},
            which a recurrent mixer needs to pair a key with the value after it); 0: none. Adds (k - 1) · D to
            each layer's state.
        d_ff: the MLP's hidden width; None: 4 · d_model.
        dropout: dropout on the embeddings and every sub-block's output.
        tie_embeddings: the head reads the token table, logits = norm(x) Eᵀ without bias (Press & Wolf 2017),
            and the table is drawn from N(0, 0.02²) (GPT-2's; Zoology's and Mamba's language models tie theirs
            and draw it so); False: an untied head with a bias, the table from N(0, 1) (PyTorch's).
    """

    families: ClassVar[tuple[str, ...]] = ("recall",)

    def __init__(
        self,
        *,
        vocab_size: int,
        mixer: str | Callable[[int], nn.Module] = "attention",
        mixer_options: Mapping[str, Any] | None = None,
        score: str | Callable[..., nn.Module] = "scaled_dot",
        d_model: int = 64,
        layers: int = 2,
        positions: str = "learned",
        max_len: int = 512,
        seq_len: int | None = None,
        mlp: bool = False,
        d_ff: int | None = None,
        dropout: float = 0.0,
        short_conv: int = 0,
        tie_embeddings: bool = False,
    ) -> None:
        check_sizes("MixerLM", {"vocab_size": vocab_size}, prefix="model.")
        super().__init__(
            lambda d: nn.Embedding(vocab_size, d),
            vocab_size,
            mixer=mixer,
            mixer_options=mixer_options,
            score=score,
            d_model=d_model,
            layers=layers,
            positions=positions,
            max_len=max_len,
            seq_len=seq_len,
            mlp=mlp,
            d_ff=d_ff,
            dropout=dropout,
            short_conv=short_conv,
        )
        if tie_embeddings:
            table = cast(nn.Embedding, self.embed).weight  # (V, D)
            nn.init.normal_(table, std=0.02)
            self.head = nn.Linear(d_model, vocab_size, bias=False)
            self.head.weight = table  # one parameter: the head's rows are the token vectors

    def forward(self, tokens: Tensor) -> Tensor:
        """Next-token logits at every step.

        Args:
            tokens: token ids.

        Shapes:
            - tokens: (B, T)
            - logits: (B, T, V)

        Returns:
            The logits, step t a function of tokens <= t.
        """
        return self.mix(self.embed(tokens))  # (B, T, V)

    def logits_at(self, tokens: Tensor, where: Tensor) -> Tensor:
        """Next-token logits at the marked steps only: `forward(tokens)[where]`, without the head elsewhere.

        Args:
            tokens: token ids.
            where: the steps to score (True).

        Shapes:
            - tokens, where: (B, T)
            - logits: (K, V) for the K true entries of `where`, in row-major order

        Returns:
            The logits at the marked steps.
        """
        if where.shape != tokens.shape or where.dtype != torch.bool:
            raise ValueError(
                f"MixerLM.logits_at: where must be a bool tensor of the tokens' shape {tuple(tokens.shape)}, "
                f"got {where.dtype} {tuple(where.shape)}"
            )
        return self.mix(self.embed(tokens), where)  # (K, V)
