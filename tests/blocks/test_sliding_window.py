"""`SlidingWindow`: a hand-computed window, forward = recurrent, causality, state size, errors."""

from __future__ import annotations

import math

import pytest
import torch

from attnmem.blocks.sliding_window import SlidingWindow


def identity_weights(layer: torch.nn.Module) -> None:
    with torch.no_grad():
        for name, p in layer.named_parameters():
            p.copy_(torch.eye(p.shape[0], dtype=p.dtype) if name.endswith("weight") else torch.zeros_like(p))


def test_a_window_of_two_by_hand():
    layer = SlidingWindow(2, window=2).double()
    identity_weights(layer)  # q = k = v = x, output = context
    x = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]], dtype=torch.float64)
    s = 1 / math.sqrt(2)  # the scale 1/√Dh
    w1 = math.exp(s) / (1 + math.exp(s))  # t = 1: scores (0, s) over x0, x1
    w2 = math.exp(2 * s) / (math.exp(s) + math.exp(2 * s))  # t = 2: x0 left the window; scores (s, 2s) over x1, x2
    want = torch.tensor([[[1.0, 0.0], [1 - w1, w1], [w2, 1.0]]], dtype=torch.float64)
    torch.testing.assert_close(layer(x), want)
    torch.testing.assert_close(layer.recurrent(x), want)
    wide = SlidingWindow(2, window=3).double()
    identity_weights(wide)
    assert not torch.allclose(wide(x)[0, 2], want[0, 2])  # with x0 in the window, t = 2 reads it


@pytest.mark.parametrize("window, heads", [(1, 1), (3, 2), (16, 4)])
def test_forward_equals_recurrent(window, heads):
    torch.manual_seed(0)
    layer = SlidingWindow(8, window=window, heads=heads).double()
    for t in (1, 4, 7, 10):  # 10: several blocks of min(window, T) queries, the last one short
        x = torch.randn(2, t, 8, dtype=torch.float64)
        torch.testing.assert_close(layer(x), layer.recurrent(x), atol=1e-5, rtol=0)


def test_causal():
    torch.manual_seed(0)
    layer = SlidingWindow(8, window=3, heads=2).double()
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    changed = x.clone()
    changed[:, 3:] = torch.randn(2, 3, 8, dtype=torch.float64)
    torch.testing.assert_close(layer(changed)[:, :3], layer(x)[:, :3])
    assert not torch.allclose(layer(changed)[:, 3:], layer(x)[:, 3:])


def test_state_size_and_errors():
    assert SlidingWindow(8, window=5, heads=2).state_size == 5 * 2 * 8
    with pytest.raises(ValueError, match=r"^SlidingWindow: window must be >= 1, got 0$"):
        SlidingWindow(8, window=0)
    with pytest.raises(ValueError, match=r"^SlidingWindow: heads must be >= 1 and divide d_model \(8\), got 3$"):
        SlidingWindow(8, heads=3)
