"""Hand-written BPTT: every gradient equals autograd's of the same forward, in float64, to 1e-6."""

from __future__ import annotations

import pytest
import torch

from attnmem.models.bptt_rnn import BPTTRNN, rnn_forward

NAMES = ("w_xh", "w_hh", "b", "w_hy", "c")


def _autograd_and_hand(seed: int, *, use_last: bool) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    torch.manual_seed(seed)
    net = BPTTRNN(input_size=3, output_size=2, hidden_size=5).double()
    inputs = torch.randn(4, 7, 3, dtype=torch.float64, requires_grad=True)  # (B, T, I)
    h0 = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    weight_y, weight_h = torch.randn(4, 7, 2, dtype=torch.float64), torch.randn(4, 5, dtype=torch.float64)

    def loss(logits: torch.Tensor, last: torch.Tensor) -> torch.Tensor:  # a loss on every output and the last state
        return (weight_y * logits).sum() + (logits**2).sum() + ((weight_h * last).sum() if use_last else 0)

    params = [getattr(net, n) for n in NAMES]
    hs, logits = rnn_forward(inputs, h0, *params)  # plain torch ops: autograd's gradients
    expected = torch.autograd.grad(loss(logits, hs[:, -1]), [*params, inputs, h0])
    out, last = net.run_chunk(inputs, h0)  # through BPTT.backward
    got = torch.autograd.grad(loss(out.pred, last), [*params, inputs, h0])
    return list(expected), list(got)


@pytest.mark.parametrize("use_last", [False, True])
def test_hand_gradients_equal_autograd_for_every_parameter_input_and_initial_state(use_last):
    for seed in range(3):
        expected, got = _autograd_and_hand(seed, use_last=use_last)
        for name, e, g in zip((*NAMES, "inputs", "h0"), expected, got, strict=True):
            assert g.shape == e.shape, name
            torch.testing.assert_close(g, e, rtol=0, atol=1e-6, msg=name)


def test_gradcheck_of_the_hand_backward():
    torch.manual_seed(0)
    net = BPTTRNN(input_size=2, output_size=2, hidden_size=3).double()
    inputs = torch.randn(2, 4, 2, dtype=torch.float64, requires_grad=True)
    h0 = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, h: net.run_chunk(x, h)[0].pred, (inputs, h0))


def test_forward_is_the_elman_recursion_by_hand():
    net = BPTTRNN(input_size=1, output_size=1, hidden_size=1)
    with torch.no_grad():
        for name, value in zip(NAMES, (0.5, -1.0, 0.1, 2.0, -0.3), strict=True):
            getattr(net, name).fill_(value)
    out = net({"inputs": torch.tensor([[[1.0], [2.0]]])}).pred
    h1 = torch.tanh(torch.tensor(0.5 + 0.1))
    h2 = torch.tanh(0.5 * 2 - h1 + 0.1)
    torch.testing.assert_close(out.flatten(), torch.stack([2 * h1 - 0.3, 2 * h2 - 0.3]))
