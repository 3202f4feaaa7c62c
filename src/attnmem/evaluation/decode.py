"""Greedy and beam-search decoding of any seq2seq model with `encode(src)` and `decode_step(state, tokens)`.

A decoding state is a dict of tensors with the batch first, so beams are a reordering of its rows.
Both return `tokens (B, T)`: the generated tokens after bos, up to and including eos, then `pad_id`.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor


class Decodable(Protocol):
    """What decoding needs of a model (the seq2seq contract)."""

    def encode(self, src: Tensor) -> dict[str, Tensor]: ...

    def decode_step(self, state: dict[str, Tensor], tokens: Tensor) -> tuple[Tensor, dict[str, Tensor]]: ...


@torch.no_grad()
def greedy(model: Decodable, src: Tensor, *, max_len: int, bos_id: int, eos_id: int, pad_id: int = 0) -> Tensor:
    """The most probable next token at every step, for at most `max_len` tokens; stops when every row has eos."""
    state = model.encode(src)
    tokens = torch.full((src.shape[0],), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros_like(tokens, dtype=torch.bool)
    out = []
    for _ in range(max_len):
        logits, state = model.decode_step(state, tokens)  # (B, V)
        tokens = logits.argmax(-1).masked_fill(done, pad_id)
        out.append(tokens)
        done |= tokens == eos_id
        if done.all():
            break
    return torch.stack(out, 1)  # (B, T)


def gnmt_penalty(length: Tensor, alpha: float) -> Tensor:
    """GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^α (Wu et al. 2016, eq. 14); α = 0 gives 1, no penalty."""
    return ((5.0 + length.float()) / 6.0) ** alpha


@torch.no_grad()
def beam(
    model: Decodable,
    src: Tensor,
    beam_size: int,
    *,
    max_len: int,
    bos_id: int,
    eos_id: int,
    pad_id: int = 0,
    length_penalty: float = 0.0,
) -> Tensor:
    """Beam search: keep the `beam_size` best prefixes per source at every step; return the best one at the end.

    A hypothesis Y ranks by log P(Y | X) / lp(Y) with the GNMT penalty lp(Y) = ((5 + |Y|) / 6)^α (Wu et al.
    2016, eq. 14; α = `length_penalty`, 0: raw log-probability), |Y| counting the eos. The same ranking picks
    the survivors at every step and the final answer: finished hypotheses keep their length and score, stay
    in the beam and compete with the open ones until all are finished or `max_len` is reached.
    """
    if beam_size < 1:
        raise ValueError(f"decode.beam_size must be >= 1, got {beam_size}")
    batch, k = src.shape[0], beam_size
    state = {name: t.repeat_interleave(k, 0) for name, t in model.encode(src).items()}  # (B*k, ...)
    tokens = torch.full((batch * k,), bos_id, dtype=torch.long, device=src.device)
    scores = torch.full((batch, k), float("-inf"), device=src.device)  # summed log-probabilities
    scores[:, 0] = 0.0  # one live prefix at the start, so the first step does not pick k copies of one token
    done = torch.zeros(batch, k, dtype=torch.bool, device=src.device)
    lengths = torch.zeros(batch, k, dtype=torch.long, device=src.device)  # |Y|, eos included
    history = torch.empty(batch, k, 0, dtype=torch.long, device=src.device)
    for step in range(1, max_len + 1):
        logits, state = model.decode_step(state, tokens)
        logp = torch.log_softmax(logits.float(), -1).view(batch, k, -1)  # (B, k, V)
        # a finished hypothesis continues only with pad, at no cost and with its length unchanged
        finished = torch.full_like(logp[0, 0], float("-inf"))
        finished[pad_id] = 0.0
        logp = torch.where(done.unsqueeze(-1), finished, logp)
        vocab = logp.shape[-1]
        candidates = (scores.unsqueeze(-1) + logp).view(batch, -1)  # (B, k*V)
        grown = torch.where(done, lengths, step)  # (B, k): every continuation of a hypothesis has this length
        ranked = candidates / gnmt_penalty(grown, length_penalty).repeat_interleave(vocab, 1)  # (B, k*V)
        flat = ranked.topk(k, dim=-1).indices  # (B, k), best first
        parent, tokens = flat // vocab, flat % vocab  # (B, k)
        scores, lengths = candidates.gather(1, flat), grown.gather(1, parent)
        history = torch.cat([history.gather(1, parent.unsqueeze(-1).expand_as(history)), tokens.unsqueeze(-1)], -1)
        done = done.gather(1, parent) | (tokens == eos_id)
        rows = (parent + torch.arange(batch, device=src.device).unsqueeze(1) * k).flatten()  # into B*k
        state = {name: t.index_select(0, rows) for name, t in state.items()}
        tokens = tokens.flatten()
        if done.all():
            break
    return history[:, 0]  # (B, T): topk sorts, so the first hypothesis ranks best
