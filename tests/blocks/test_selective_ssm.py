"""`SelectiveSSM` (Mamba's S6 and its LTI variant): hand-computed values, forward == recurrent, causality."""

from __future__ import annotations

import math

import pytest
import torch

from attnmem.blocks.selective_ssm import SelectiveSSM

LN2 = math.log(2.0)


def _one_state(selective: bool) -> SelectiveSSM:
    """D = N = 1, A = -1, Δ = softplus(0) = ln 2 (so Ā = 1/2), no skip; B = C = 1 (LTI) or B_t = C_t = x_t (S6)."""
    layer = SelectiveSSM(1, d_state=1, selective=selective, dt_rank=1).double()
    with torch.no_grad():
        layer.A_log.zero_()
        layer.dt_bias.zero_()
        layer.D.zero_()
        if selective:
            layer.x_proj.weight.copy_(torch.tensor([[0.0], [1.0], [1.0]]))  # Δ's low rank 0, B_t = x_t, C_t = x_t
            layer.dt_proj.weight.zero_()
        else:
            layer.B.fill_(1.0)
            layer.C.fill_(1.0)
    return layer


@pytest.mark.parametrize("form", ["forward", "recurrent"])
def test_lti_by_hand(form: str) -> None:
    # h_t = h_{t-1}/2 + ln2 x_t, y_t = h_t
    y = getattr(_one_state(False), form)(torch.tensor([[[1.0], [0.0], [2.0]]], dtype=torch.float64))
    assert torch.allclose(y.flatten(), torch.tensor([LN2, LN2 / 2, LN2 / 4 + 2 * LN2], dtype=torch.float64))


def test_lti_kernel_by_hand() -> None:
    # K̄_k = C Ā^k B̄ = (1/2)^k ln2; the convolution with it is the LTI forward above
    kernel = _one_state(False).kernel(3)
    assert torch.allclose(kernel, torch.tensor([[LN2, LN2 / 2, LN2 / 4]], dtype=torch.float64))
    with pytest.raises(ValueError, match="only the LTI variant .selective=False. is a convolution"):
        _one_state(True).kernel(3)


@pytest.mark.parametrize("form", ["forward", "recurrent"])
def test_selective_by_hand(form: str) -> None:
    # h_t = h_{t-1}/2 + ln2 x_t·x_t, y_t = x_t h_t: x = (1, 2) gives ln2, 2 (ln2/2 + 4 ln2) = 9 ln2
    y = getattr(_one_state(True), form)(torch.tensor([[[1.0], [2.0]]], dtype=torch.float64))
    assert torch.allclose(y.flatten(), torch.tensor([LN2, 9 * LN2], dtype=torch.float64))


@pytest.mark.parametrize("chunk_size", [None, 4])
@pytest.mark.parametrize("selective", [True, False])
def test_forward_equals_recurrent(selective: bool, chunk_size: int | None) -> None:
    torch.manual_seed(0)
    layer = SelectiveSSM(6, d_state=4, selective=selective, chunk_size=chunk_size, dt_max=0.5).double()
    x = torch.randn(2, 11, 6, dtype=torch.float64)  # 11: not a multiple of the chunk
    assert torch.allclose(layer(x), layer.recurrent(x), atol=1e-5)


@pytest.mark.parametrize("chunk_numbers", [None, 1, 70], ids=["one chunk", "a step a chunk", "2 steps a chunk"],
                         indirect=True)
@pytest.mark.parametrize("selective", [True, False])
def test_fast_backward_equals_autograd_through_the_loop(selective: bool, chunk_numbers: int | None) -> None:
    # S6: the scan's hand-derived backward, its steps in chunks (7 steps of 2 x 5 x 3 = 30 numbers: 1, 2 or all 7 in
    # a chunk, the last one shorter); LTI: autograd through the FFT convolution
    torch.manual_seed(2)
    layer = SelectiveSSM(5, d_state=3, selective=selective, dt_max=0.5).double()
    x = torch.randn(2, 7, 5, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(2, 7, 5, dtype=torch.float64)
    grads = []
    for form in (layer, layer.recurrent):  # the fast form's backward; autograd through the step-by-step loop
        (form(x) * weights).sum().backward()
        grads.append([x.grad.clone(), *(p.grad.clone() for p in layer.parameters())])
        x.grad, _ = None, layer.zero_grad()
    for fused, stepped in zip(*grads, strict=True):
        assert torch.allclose(fused, stepped, atol=1e-10)


def test_causal() -> None:
    torch.manual_seed(1)
    layer = SelectiveSSM(4, d_state=3, chunk_size=3).double()
    x = torch.randn(1, 8, 4, dtype=torch.float64)
    changed = x.clone()
    changed[:, 5:] = torch.randn(1, 3, 4, dtype=torch.float64)
    assert torch.equal(layer(x)[:, :5], layer(changed)[:, :5])


def test_state_size_and_options() -> None:
    assert SelectiveSSM(8, d_state=16).state_size == 8 * 16
    with pytest.raises(ValueError, match="d_state must be >= 1, got 0"):
        SelectiveSSM(8, d_state=0)
    with pytest.raises(ValueError, match="dt_min <= dt_max"):
        SelectiveSSM(8, dt_min=0.5, dt_max=0.1)
