"""`DeltaRule`: hand-computed updates, the chunkwise WY form = the recursion (values and gradients), causality,
state size, errors."""

from __future__ import annotations

import math

import pytest
import torch

from attnmem.blocks.delta_rule import DeltaRule


def identity_weights(layer: torch.nn.Module) -> None:
    with torch.no_grad():
        for name, p in layer.named_parameters():
            square = name.endswith("weight") and p.shape[0] == p.shape[1]
            p.copy_(torch.eye(p.shape[0], dtype=p.dtype) if square else torch.zeros_like(p))  # w_β = 0: β = ½


@pytest.mark.parametrize("chunk_size", [1, 2, 64])
def test_three_steps_by_hand(chunk_size):
    layer = DeltaRule(2, chunk_size=chunk_size).double()
    identity_weights(layer)  # q = k = x / |x|, v = x, β = σ(0) = ½
    x = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]], dtype=torch.float64)
    # S1 = ½ v0 k0ᵀ = diag(½, 0); S2 = diag(½, ½): y0 = (½, 0), y1 = (0, ½);
    # t = 2: k2 = q2 = (1, 1)/√2, S1 k2 = ½ k2, S3 = S2 + ½ (v2 − ½ k2) k2ᵀ, y2 = S3 q2 = (½ + 1/(4√2)) (1, 1)
    y2 = 0.5 + 0.25 / math.sqrt(2)
    want = torch.tensor([[[0.5, 0.0], [0.0, 0.5], [y2, y2]]], dtype=torch.float64)
    torch.testing.assert_close(layer(x), want)
    torch.testing.assert_close(layer.recurrent(x), want)


@pytest.mark.parametrize("heads, chunk_size", [(1, 1), (2, 4), (4, 3), (1, 64)])
def test_chunkwise_equals_recurrent(heads, chunk_size):
    torch.manual_seed(0)
    layer = DeltaRule(8, heads=heads, chunk_size=chunk_size).double()
    for t in (1, 4, 7, 13):
        x = torch.randn(2, t, 8, dtype=torch.float64)
        torch.testing.assert_close(layer(x), layer.recurrent(x), atol=1e-5, rtol=0)


def test_chunkwise_gradients_equal_recurrent():
    torch.manual_seed(0)
    layer = DeltaRule(8, heads=2, chunk_size=3).double()
    x = torch.randn(2, 7, 8, dtype=torch.float64, requires_grad=True)
    grads = []
    for run in (layer, layer.recurrent):
        layer.zero_grad()
        (run(x) ** 2).sum().backward()
        grads.append([x.grad.clone(), *(p.grad.clone() for p in layer.parameters())])
        x.grad = None
    for chunked, stepwise in zip(*grads):
        torch.testing.assert_close(chunked, stepwise, atol=1e-8, rtol=1e-6)


def test_causal():
    torch.manual_seed(0)
    layer = DeltaRule(8, heads=2, chunk_size=4).double()
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    changed = x.clone()
    changed[:, 3:] = torch.randn(2, 3, 8, dtype=torch.float64)
    torch.testing.assert_close(layer(changed)[:, :3], layer(x)[:, :3])
    assert not torch.allclose(layer(changed)[:, 3:], layer(x)[:, 3:])


def test_state_size_and_errors():
    assert DeltaRule(8, heads=2).state_size == 2 * 4 * 4
    with pytest.raises(ValueError, match=r"^DeltaRule: chunk_size must be >= 1, got 0$"):
        DeltaRule(8, chunk_size=0)
    with pytest.raises(ValueError, match=r"^DeltaRule: heads must be >= 1 and divide d_model \(8\), got 3$"):
        DeltaRule(8, heads=3)
