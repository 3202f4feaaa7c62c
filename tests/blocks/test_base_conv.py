"""`BaseConv` (Zoology): hand-computed values, forward (FFT) == recurrent (direct sum), causality."""

from __future__ import annotations

import pytest
import torch

from attnmem.blocks.base_conv import BaseConv


@pytest.mark.parametrize("form", ["forward", "recurrent"])
def test_by_hand(form: str) -> None:
    # D = 1: y_t = (2 u_t + 1) ((h ∗ u)_t + 0.5), h = (1, -1, 3)
    layer = BaseConv(1, l_max=3).double()
    with torch.no_grad():
        layer.projection.weight.fill_(2.0)
        layer.projection.bias.fill_(1.0)
        layer.filter.copy_(torch.tensor([[1.0, -1.0, 3.0]]))
        layer.bias.fill_(0.5)
    u = torch.tensor([1.0, 2.0, 0.0, -1.0], dtype=torch.float64)
    conv = torch.tensor([1.0, 2.0 - 1.0, 0.0 - 2.0 + 3.0, -1.0 - 0.0 + 6.0], dtype=torch.float64)
    y = getattr(layer, form)(u.view(1, 4, 1)).flatten()
    assert torch.allclose(y, (2 * u + 1) * (conv + 0.5))


@pytest.mark.parametrize("l_max", [3, 20])  # shorter and longer than the sequence
def test_forward_equals_recurrent(l_max: int) -> None:
    torch.manual_seed(0)
    layer = BaseConv(5, l_max=l_max).double()
    x = torch.randn(2, 9, 5, dtype=torch.float64)
    assert torch.allclose(layer(x), layer.recurrent(x), atol=1e-5)


def test_causal_and_state_size() -> None:
    torch.manual_seed(1)
    layer = BaseConv(4, l_max=16).double()
    x = torch.randn(1, 8, 4, dtype=torch.float64)
    changed = x.clone()
    changed[:, 5:] = torch.randn(1, 3, 4, dtype=torch.float64)
    assert torch.allclose(layer(x)[:, :5], layer(changed)[:, :5], atol=1e-12)
    assert layer.state_size == 16 * 4
    with pytest.raises(ValueError, match="l_max must be >= 1, got 0"):
        BaseConv(4, l_max=0)
