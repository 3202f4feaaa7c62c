"""The dynamic pointing decoder of the Dynamic Coattention Network (Xiong et al. 2016, §2.3)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnmem.core.float32 import recurrent

__all__ = ["DynamicDecoder", "HighwayMaxout"]


class HighwayMaxout(nn.Module):
    """Highway maxout network scoring every document position as a start or an end (eq. 9-12).

    r = tanh(W⁽ᴰ⁾[h_i; u_s; u_e]);  m⁽¹⁾ = max(W⁽¹⁾[u_t; r] + b⁽¹⁾);  m⁽²⁾ = max(W⁽²⁾m⁽¹⁾ + b⁽²⁾);
    score_t = max(W⁽³⁾[m⁽¹⁾; m⁽²⁾] + b⁽³⁾), each max over `pool_size` maxout pieces. W⁽¹⁾ is split
    in its u_t and r parts so the document's part is computed once for all iterations.
    """

    def __init__(self, hidden_size: int, pool_size: int) -> None:
        super().__init__()
        size, pool = hidden_size, pool_size
        self.pool = pool
        self.reduce = nn.Linear(5 * size, size, bias=False)  # W^(D)
        self.first_document = nn.Linear(2 * size, pool * size)  # W^(1) on u_t, with b^(1)
        self.first_summary = nn.Linear(size, pool * size, bias=False)  # W^(1) on r
        self.second = nn.Linear(size, pool * size)  # W^(2)
        self.third = nn.Linear(2 * size, pool)  # W^(3)

    def precompute(self, document: Tensor) -> Tensor:
        """W⁽¹⁾u_t + b⁽¹⁾ for `document (B, m, 2l)`: (B, m, p·l), fixed across iterations."""
        return self.first_document(document)

    def forward(self, document_part: Tensor, hidden: Tensor, start_state: Tensor, end_state: Tensor) -> Tensor:
        """Scores (B, m) from the precomputed document part, h_i (B, l) and u_s, u_e (B, 2l)."""
        b, m, _ = document_part.shape
        r = torch.tanh(self.reduce(torch.cat([hidden, start_state, end_state], dim=-1)))  # (B, l)
        first = (document_part + self.first_summary(r).unsqueeze(1)).view(b, m, -1, self.pool).amax(-1)  # (B, m, l)
        second = self.second(first).view(b, m, -1, self.pool).amax(-1)  # (B, m, l)
        return self.third(torch.cat([first, second], dim=-1)).amax(-1)  # (B, m)


class DynamicDecoder(nn.Module):
    """Iterates start/end estimates: h_i = LSTM(h_{i-1}, [u_{s_{i-1}}; u_{e_{i-1}}]) (eq. 5), then
    α = HMN_start(u_t, h_i, u_{s_{i-1}}, u_{e_{i-1}}) and β = HMN_end(...) (eq. 6-8), s_i = argmax α, e_i = argmax β.

    Always runs `iterations` steps (the paper may stop early once the estimate stops changing) and
    returns the logits of every iteration, so the loss can be summed over them.
    """

    def __init__(self, hidden_size: int, pool_size: int, iterations: int) -> None:
        super().__init__()
        self.iterations = iterations
        self.cell = nn.LSTMCell(4 * hidden_size, hidden_size)
        self.start_hmn = HighwayMaxout(hidden_size, pool_size)
        self.end_hmn = HighwayMaxout(hidden_size, pool_size)

    def forward(self, document: Tensor, mask: Tensor) -> Tensor:
        """Start/end logits (B, iterations, 2, m) over `document (B, m, 2l)`; `mask (B, m)` True on real tokens."""
        b, m, _ = document.shape
        rows = torch.arange(b, device=document.device)
        start = torch.zeros(b, dtype=torch.long, device=document.device)  # s_0: the first token
        end = mask.sum(-1) - 1  # e_0: the last real token
        hidden = document.new_zeros(b, self.cell.hidden_size)
        state = (hidden, hidden)
        start_part, end_part = self.start_hmn.precompute(document), self.end_hmn.precompute(document)
        logits = []
        for _ in range(self.iterations):
            start_state, end_state = document[rows, start], document[rows, end]  # (B, 2l) each
            state = recurrent(self.cell, torch.cat([start_state, end_state], dim=-1), state)
            alpha = self.start_hmn(start_part, state[0], start_state, end_state).masked_fill(~mask, float("-inf"))
            beta = self.end_hmn(end_part, state[0], start_state, end_state).masked_fill(~mask, float("-inf"))
            logits.append(torch.stack([alpha, beta], dim=1))  # (B, 2, m)
            start, end = alpha.argmax(-1), beta.argmax(-1)
        return torch.stack(logits, dim=1)  # (B, iterations, 2, m)
