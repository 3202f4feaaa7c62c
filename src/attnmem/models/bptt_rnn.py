"""A vanilla (Elman) RNN whose gradients are the BPTT equations written out by hand, not autograd's."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from attnmem.blocks.checks import check_sizes
from attnmem.blocks.output import Output
from attnmem.core.float32 import in_float32
from attnmem.models.contract import CarriesState

__all__ = ["BPTT", "BPTTRNN", "rnn_forward"]


def rnn_forward(
    inputs: Tensor, h0: Tensor, w_xh: Tensor, w_hh: Tensor, b: Tensor, w_hy: Tensor, c: Tensor
) -> tuple[Tensor, Tensor]:
    """The forward recursion: states `h (B, T, H)` (eq. 1) and logits `y (B, T, O)` (eq. 2) of `inputs (B, T, I)`."""
    x_proj = (inputs @ w_xh.T + b).unbind(1)  # (B, H) per step: W_xh x_t + b for every step at once
    h, states = h0, []
    for x_t in x_proj:
        h = torch.tanh(x_t + h @ w_hh.T)  # (B, H), eq. 1
        states.append(h)
    hs = torch.stack(states, 1)  # (B, T, H)
    return hs, hs @ w_hy.T + c  # eq. 2


class BPTT(torch.autograd.Function):
    """`(logits (B, T, O), h_T (B, H))` of the RNN, its backward pass the BPTT recursion (Werbos 1990).

    With a_t = W_xh x_t + W_hh h_{t-1} + b, h_t = tanh(a_t) (eq. 1) and y_t = W_hy h_t + c (eq. 2),
    and g_t = ∂L/∂y_t, the gradient reaching h_t from above and from the future (eq. 3) and the
    gradient of the pre-activation (eq. 4) are, from t = T down to 1,

        ∂L/∂h_t = W_hyᵀ g_t + W_hhᵀ δ_{t+1}      (δ_{T+1} = 0; plus ∂L/∂h_T when h_T is used further)
        δ_t = ∂L/∂h_t ⊙ (1 - h_t²)

    and the parameter and input gradients sum over time (eq. 5):

        ∂L/∂W_hy = Σ_t g_t h_tᵀ    ∂L/∂c = Σ_t g_t     ∂L/∂W_xh = Σ_t δ_t x_tᵀ   ∂L/∂b = Σ_t δ_t
        ∂L/∂W_hh = Σ_t δ_t h_{t-1}ᵀ                  ∂L/∂x_t = W_xhᵀ δ_t       ∂L/∂h_0 = W_hhᵀ δ_1

    (Werbos 1990, "Backpropagation through time: what it does and how to do it", Proc. IEEE 78(10);
    Goodfellow, Bengio & Courville 2016, "Deep Learning", §10.2.2, eqs. 10.18-10.28.) Batched: the
    row-vector form of the same equations, summed over the batch.
    """

    @staticmethod
    def forward(
        ctx: Any, inputs: Tensor, h0: Tensor, w_xh: Tensor, w_hh: Tensor, b: Tensor, w_hy: Tensor, c: Tensor
    ) -> tuple[Tensor, Tensor]:
        hs, logits = rnn_forward(inputs, h0, w_xh, w_hh, b, w_hy, c)
        ctx.save_for_backward(inputs, h0, hs, w_xh, w_hh, w_hy)
        return logits, hs[:, -1]

    @staticmethod
    def backward(ctx: Any, grad_logits: Tensor, grad_last: Tensor) -> tuple[Tensor, ...]:
        inputs, h0, hs, w_xh, w_hh, w_hy = ctx.saved_tensors
        previous = torch.cat([h0.unsqueeze(1), hs[:, :-1]], 1)  # (B, T, H): h_{t-1}
        from_above = grad_logits @ w_hy  # (B, T, H): W_hyᵀ g_t for every step
        deltas = torch.empty_like(hs)  # (B, T, H): δ_t
        grad_h = grad_last  # ∂L/∂h_T from beyond the sequence (zeros when h_T is unused: autograd materialises them)
        for t in reversed(range(hs.shape[1])):
            grad_h = grad_h + from_above[:, t]  # eq. 3
            deltas[:, t] = grad_h * (1 - hs[:, t] ** 2)  # eq. 4
            grad_h = deltas[:, t] @ w_hh  # W_hhᵀ δ_t: ∂L/∂h_{t-1} through the recurrence
        flat = deltas.flatten(0, 1)  # (B·T, H)
        grad_w_xh = flat.T @ inputs.flatten(0, 1)  # eq. 5
        grad_w_hh = flat.T @ previous.flatten(0, 1)
        grad_w_hy = grad_logits.flatten(0, 1).T @ hs.flatten(0, 1)
        return (deltas @ w_xh, grad_h, grad_w_xh, grad_w_hh, flat.sum(0), grad_w_hy, grad_logits.sum((0, 1)))


class BPTTRNN(nn.Module, CarriesState):
    """Elman RNN (Elman 1990, "Finding structure in time") trained by hand-written BPTT (`BPTT`, Werbos 1990).

    h_t = tanh(W_xh x_t + W_hh h_{t-1} + b) (eq. 1), y_t = W_hy h_t + c (eq. 2), h_0 = 0; the
    gradients come from `BPTT.backward`, the recursion written out (tests/models/test_bptt_rnn.py
    checks them against autograd's). `inputs (B, T, input_size)` -> logits `(B, T, output_size)`.
    `initial_state` and `run_chunk` run a sequence in pieces, for truncated BPTT (`task.tbptt_steps`).
    """

    families: ClassVar[tuple[str, ...]] = ("sequence",)
    w_xh: Tensor  # parameters, registered by name
    w_hh: Tensor
    b: Tensor
    w_hy: Tensor
    c: Tensor

    def __init__(self, *, input_size: int, output_size: int, hidden_size: int = 64) -> None:
        super().__init__()
        check_sizes("BPTTRNN", {"input_size": input_size, "output_size": output_size, "hidden_size": hidden_size})
        self.hidden_size = hidden_size
        bound = 1 / math.sqrt(hidden_size)  # nn.RNN's initialisation
        shapes = {
            "w_xh": (hidden_size, input_size),
            "w_hh": (hidden_size, hidden_size),
            "b": (hidden_size,),
            "w_hy": (output_size, hidden_size),
            "c": (output_size,),
        }
        for name, shape in shapes.items():
            self.register_parameter(name, nn.Parameter(torch.empty(shape).uniform_(-bound, bound)))

    def initial_state(self, batch_size: int) -> Tensor:
        """h_0 = 0: (B, H)."""
        return self.w_hh.new_zeros(batch_size, self.hidden_size)

    @in_float32  # the state recurs every step
    def run_chunk(self, inputs: Tensor, state: Tensor) -> tuple[Output, Tensor]:
        """Logits of `inputs (B, T, I)` from the state `state (B, H)`, and the state after the last step."""
        logits, last = BPTT.apply(inputs, state, self.w_xh, self.w_hh, self.b, self.w_hy, self.c)
        return Output(pred=logits), last

    def forward(self, batch: dict[str, Tensor]) -> Output:
        inputs = batch["inputs"]  # (B, T, I)
        return self.run_chunk(inputs, self.initial_state(len(inputs)))[0]
