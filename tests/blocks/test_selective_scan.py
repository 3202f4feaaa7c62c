"""`selective_scan`, S6's scan: gradcheck in float64, `vmap` (the replicas) against a loop in values and gradients,
the LTI shapes against the convolution; with the steps in one chunk and in chunks of one step."""

from __future__ import annotations

import pytest
import torch

from attnmem.blocks.selective_scan import selective_scan
from attnmem.blocks.selective_ssm import SelectiveSSM


@pytest.mark.parametrize("chunk_numbers", [None, 10], ids=["one chunk", "a step a chunk"], indirect=True)
def test_selective_scan_passes_gradcheck_and_vmaps(chunk_numbers: int | None) -> None:
    torch.manual_seed(3)
    b_, t, d, n = 2, 4, 3, 2
    delta = torch.rand(b_, t, d, dtype=torch.float64, requires_grad=True)
    a = -torch.rand(d, n, dtype=torch.float64).add(0.5).requires_grad_()
    u = torch.randn(b_, t, d, dtype=torch.float64, requires_grad=True)
    bc = [torch.randn(b_, t, 1, n, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    assert torch.autograd.gradcheck(selective_scan, (delta, a, u, *bc))
    stacked = -torch.rand(3, d, n, dtype=torch.float64, requires_grad=True)  # three replicas' A, one vmap
    vmapped = torch.func.vmap(selective_scan, in_dims=(None, 0, None, None, None))(delta, stacked, u, *bc)
    looped = torch.stack([selective_scan(delta, ai, u, *bc) for ai in stacked])
    assert torch.allclose(vmapped, looped)
    # every input batched, as the replicas' batched path gives them: values and gradients equal to a loop's
    batched = [torch.randn(3, *x.shape, dtype=torch.float64) for x in (delta, a, u, *bc)]
    batched[0], batched[1] = batched[0].abs().requires_grad_(), -batched[1].abs().requires_grad_()
    for x in batched[2:]:
        x.requires_grad_()
    weights = torch.randn(3, b_, t, d, dtype=torch.float64)
    grads = []
    for ys in (torch.func.vmap(selective_scan)(*batched), torch.stack([selective_scan(*r) for r in zip(*batched)])):
        grads.append(torch.autograd.grad((ys * weights).sum(), batched))
    for by_vmap, by_loop in zip(*grads, strict=True):
        assert torch.allclose(by_vmap, by_loop, atol=1e-12)


@pytest.mark.parametrize("chunk_numbers", [None, 20], ids=["one chunk", "a step a chunk"], indirect=True)
def test_selective_scan_with_lti_parameters_equals_the_convolution(chunk_numbers: int | None) -> None:
    # selective_scan still takes the LTI shapes (B, C one per channel); the layer's LTI forward is the convolution
    torch.manual_seed(4)
    layer = SelectiveSSM(3, d_state=2, selective=False, dt_max=0.5).double()
    x = torch.randn(2, 6, 3, dtype=torch.float64, requires_grad=True)
    delta, b, c = layer._parameters_of(x)
    a = -layer.A_log.exp()
    assert torch.allclose(selective_scan(delta, a, x, b, c) + layer.D * x, layer(x), atol=1e-10)
    leaves = tuple(t.detach().contiguous().requires_grad_() for t in (delta, a, x, b, c))  # gradcheck: no stride 0
    assert torch.autograd.gradcheck(selective_scan, leaves)
