"""`LinearAttention`: hand-computed outputs, forward = recurrent (the S/z recursion), causality, state size, errors."""

from __future__ import annotations

import pytest
import torch

from attnmem.blocks.linear_attention import LinearAttention


def identity_weights(layer: torch.nn.Module) -> None:
    with torch.no_grad():
        for name, p in layer.named_parameters():
            p.copy_(torch.eye(p.shape[0], dtype=p.dtype) if name.endswith("weight") else torch.zeros_like(p))


X = torch.tensor([[[1.0, 0.0], [1.0, 1.0]]], dtype=torch.float64)  # >= 0: φ(x) = elu(x) + 1 = x + 1


def test_normalised_elu_by_hand():
    layer = LinearAttention(2, eps=0.0).double()
    identity_weights(layer)  # q = k = v = x
    # φ(x0) = (2, 1), φ(x1) = (2, 2); y1 = (φq1·φk0 v0 + φq1·φk1 v1) / (φq1·φk0 + φq1·φk1) = (6 v0 + 8 v1) / 14
    want = torch.tensor([[[1.0, 0.0], [1.0, 8 / 14]]], dtype=torch.float64)
    torch.testing.assert_close(layer(X), want)
    torch.testing.assert_close(layer.recurrent(X), want)


def test_unnormalised_identity_by_hand():
    layer = LinearAttention(2, feature_map="identity", normalize=False).double()
    identity_weights(layer)
    # y0 = (q0·k0) v0 = (1, 0); y1 = (q1·k0) v0 + (q1·k1) v1 = (1, 0) + 2 (1, 1)
    want = torch.tensor([[[1.0, 0.0], [3.0, 2.0]]], dtype=torch.float64)
    torch.testing.assert_close(layer(X), want)
    torch.testing.assert_close(layer.recurrent(X), want)


@pytest.mark.parametrize("options", [{}, {"heads": 4}, {"normalize": False}, {"feature_map": "identity",
                                                                          "normalize": False, "heads": 2}])
def test_forward_equals_recurrent(options):
    torch.manual_seed(0)
    layer = LinearAttention(8, **options).double()
    for t in (1, 5, 9):
        x = torch.randn(2, t, 8, dtype=torch.float64)
        torch.testing.assert_close(layer(x), layer.recurrent(x), atol=1e-5, rtol=0)


def test_causal():
    torch.manual_seed(0)
    layer = LinearAttention(8, heads=2).double()
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    changed = x.clone()
    changed[:, 3:] = torch.randn(2, 3, 8, dtype=torch.float64)
    torch.testing.assert_close(layer(changed)[:, :3], layer(x)[:, :3])
    assert not torch.allclose(layer(changed)[:, 3:], layer(x)[:, 3:])


def test_state_size_and_errors():
    assert LinearAttention(8, heads=2).state_size == 2 * (4 * 4 + 4)
    assert LinearAttention(8, heads=2, normalize=False).state_size == 2 * 4 * 4
    with pytest.raises(ValueError, match=r"^LinearAttention: feature_map must be one of \['elu', 'identity'\], "
                                         r"got 'relu'$"):
        LinearAttention(8, feature_map="relu")
    with pytest.raises(ValueError, match=r"^LinearAttention: normalize=True needs a positive feature map"):
        LinearAttention(8, feature_map="identity")
    with pytest.raises(ValueError, match=r"^LinearAttention: heads must be >= 1 and divide d_model \(8\), got 0$"):
        LinearAttention(8, heads=0)
