"""The DNC's fused time loop (models/dnc_loop.py, dnc_loop_backward.py): the fused model against the step-by-step
`DNCCore` under autograd (outputs, weightings and every gradient, float64, each option on and off, batch 1 and 3),
its backward against finite differences, and its vmap rule for replicas."""

from __future__ import annotations

import copy
import functools

import pytest
import torch
from torch.func import functional_call, stack_module_state

from attnmem.attention import Cosine, Dot
from attnmem.models.dnc import DNC
from attnmem.models.dnc_loop import DNCLoop, Layout

torch.set_num_threads(1)


def make_dnc(**kw) -> DNC:
    args = {"input_size": 5, "output_size": 4, "score": functools.partial(Cosine), "controller_size": 6,
            "memory_locations": 7, "memory_width": 4} | kw
    return DNC(**args).double()


def _run(model: DNC, x: torch.Tensor) -> tuple:
    """Logits and weightings of `model` on `x`, and the gradients of a loss on both, of every parameter and x."""
    model.zero_grad()
    x = x.clone().requires_grad_()
    out = model.run(x)
    loss = out.pred.sin().sum() + sum((w * w.detach().roll(1, -1)).sum() for w in out.attention)
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()} | {"x": x.grad}
    return out.pred, torch.stack(out.attention), grads


@pytest.mark.parametrize(("options", "batch"), [
    ({}, 1),
    ({"masking": True}, 3),
    ({"deallocation": True}, 3),
    ({"link_sharpness": True}, 1),
    ({"read_heads": 2, "masking": True, "deallocation": True, "link_sharpness": True}, 3),
    ({"read_heads": 3, "interface_clip": 0.5}, 2),  # a tight clip: some interface entries pass no gradient
])
def test_the_fused_model_equals_the_step_by_step_model(options, batch):
    torch.manual_seed(0)
    model = make_dnc(**options)
    assert model.fused is not None
    stepwise = copy.deepcopy(model)
    stepwise.fused = None  # `DNCCore`'s steps, differentiated by autograd
    x = torch.rand(batch, 6, 5, dtype=torch.float64)
    fused, reference = _run(model, x), _run(stepwise, x)
    for got, expected in zip(fused[:2], reference[:2], strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-12)
    assert fused[2].keys() == reference[2].keys()
    for name, grad in reference[2].items():
        torch.testing.assert_close(fused[2][name], grad, rtol=1e-6, atol=1e-9, msg=name)


def test_the_backward_through_time_matches_finite_differences():
    torch.manual_seed(0)
    model = make_dnc(read_heads=2, masking=True, deallocation=True, link_sharpness=True)
    core, lay = model.core, model.fused
    inputs = [torch.randn(1, 3, 24), core.recurrent_proj.weight, core.interface_proj.weight,
              core.interface_proj.bias]  # the weights' gradients: against the step-by-step model above
    inputs = [x.detach().double().requires_grad_(i in (0, 3)) for i, x in enumerate(inputs)]
    assert torch.autograd.gradcheck(lambda *x: DNCLoop.apply(*x, lay, type("Box", (), {})()), inputs, atol=1e-6,
                                    rtol=1e-4)


def test_other_scores_run_the_step_by_step_loop():
    assert make_dnc(score=functools.partial(Dot)).fused is None
    assert isinstance(make_dnc().fused, Layout)


def test_under_vmap_each_replica_gets_its_own_gradients():
    torch.manual_seed(0)
    models = [make_dnc(masking=True, deallocation=True) for _ in range(3)]
    x = torch.rand(3, 2, 5, 5, dtype=torch.float64)  # one batch per replica
    params, _ = stack_module_state(models)
    preds = torch.vmap(lambda p, x: functional_call(models[0], p, (x,)))(params, x)
    preds.sin().sum().backward()
    for r, model in enumerate(models):
        model(x[r]).sin().sum().backward()
        for name, p in model.named_parameters():
            torch.testing.assert_close(params[name].grad[r], p.grad, rtol=1e-9, atol=1e-12, msg=name)


def test_without_gradients_the_loop_gives_the_same_outputs():
    model, x = make_dnc(link_sharpness=True), torch.rand(2, 5, 5, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(model(x), model(x.requires_grad_()).detach(), rtol=0, atol=0)


def test_a_second_backward_works_unless_another_call_took_the_link_buffer():
    model, x = make_dnc(), torch.rand(2, 4, 5, dtype=torch.float64)
    y = model(x).sum()
    y.backward(retain_graph=True)
    first = [p.grad.clone() for p in model.parameters()]
    y.backward(retain_graph=True)  # nothing ran between: the same buffer, the same gradients again
    for p, grad in zip(model.parameters(), first, strict=True):
        torch.testing.assert_close(p.grad, 2 * grad)
    model(x)  # takes the buffer back
    with pytest.raises(RuntimeError, match="second backward"):
        y.backward()


def test_strengths_past_softplus_threshold_match_the_step_by_step_model():
    # the fused loop takes oneplus as 1 + log(1 + e^ξ) (`torch.logaddexp`); softplus returns ξ itself past 20
    torch.manual_seed(0)
    model = make_dnc(interface_clip=40.0)
    with torch.no_grad():
        model.core.interface_proj.bias.add_(30.0)  # every ξ past the threshold (and the gates saturated)
    stepwise = copy.deepcopy(model)
    stepwise.fused = None
    x = torch.rand(2, 5, 5, dtype=torch.float64)
    fused, reference = _run(model, x), _run(stepwise, x)
    torch.testing.assert_close(fused[0], reference[0], rtol=1e-9, atol=1e-12)
    for name, grad in reference[2].items():
        torch.testing.assert_close(fused[2][name], grad, rtol=1e-6, atol=1e-9, msg=name)
