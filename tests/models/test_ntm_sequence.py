"""The NTM's fused time loop (models/ntm_sequence.py): its hand-derived backward against finite differences, the
fused model against the step-by-step one (outputs, state and every gradient), and its vmap rule for replicas."""

from __future__ import annotations

import copy
import functools

import pytest
import torch
from torch.func import functional_call, stack_module_state

from attnmem.attention import Cosine, Dot
from attnmem.models.ntm import NTM
from attnmem.models.ntm_sequence import NTMLoop, Sizes

torch.set_num_threads(1)


def make_ntm(**kw) -> NTM:
    args = {"input_size": 5, "output_size": 4, "score": functools.partial(Cosine), "controller_size": 6,
            "memory_locations": 7, "memory_width": 4} | kw
    return NTM(**args).double()


@pytest.mark.parametrize(("lstm", "reads", "writes", "shift_range"),
                         [(True, 1, 1, 1), (False, 1, 1, 1), (True, 2, 2, 2), (False, 1, 3, 1)])
def test_the_backward_through_time_matches_finite_differences(lstm, reads, writes, shift_range):
    torch.manual_seed(0)
    b, steps, size, n, m = 2, 4, 3, 6, 3
    heads, gates = reads + writes, 4 * size if lstm else size
    out_size = heads * (m + 3 + 2 * shift_range + 1) + writes * 2 * m
    inputs = [torch.randn(b, steps, gates), torch.randn(b, size), torch.randn(b, size), torch.randn(b, reads, m),
              torch.softmax(torch.randn(b, heads, n), -1), torch.randn(b, n, m),
              torch.randn(gates, reads * m + (size if lstm else 0)) / 2, torch.randn(out_size, size) / 2,
              torch.randn(out_size)]
    inputs = [x.double().requires_grad_() for x in inputs]
    sizes = Sizes(reads, writes, shift_range, lstm, 1e-8)
    assert torch.autograd.gradcheck(lambda *x: NTMLoop.apply(*x, sizes)[:5], inputs, atol=1e-6, rtol=1e-4)


def _run(model: NTM, x: torch.Tensor) -> tuple:
    """Logits, weightings and final state of `model` on `x`, and the gradients of a loss on all of them."""
    model.zero_grad()
    out, state = model.run_chunk(x, model.initial_state(len(x)))
    loss = (out.pred.sin().sum() + sum((w * w.detach().roll(1, -1)).sum() for w in out.attention)
            + state.memory.cos().sum() + state.cell.sum() + state.weightings.pow(2).sum())
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return out.pred, torch.stack(out.attention), tuple(state), grads


@pytest.mark.parametrize(("controller", "reads", "writes", "memory_init"),
                         [("lstm", 1, 1, "constant"), ("feedforward", 1, 1, "random"), ("lstm", 2, 2, "learned")])
def test_the_fused_model_equals_the_step_by_step_model(controller, reads, writes, memory_init):
    torch.manual_seed(0)
    model = make_ntm(controller=controller, read_heads=reads, write_heads=writes, memory_init=memory_init)
    assert model.fused is not None
    stepwise = copy.deepcopy(model)
    stepwise.fused = None  # the readable loop of `NTM.step`, differentiated by autograd
    x = torch.rand(3, 6, 5, dtype=torch.float64)
    fused, reference = _run(model, x), _run(stepwise, x)
    assert torch.equal(model(x)[0], fused[0]) and torch.equal(stepwise(x)[0], reference[0])  # the tensor forward
    for got, expected in zip(fused[:3], reference[:3], strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-12)
    assert fused[3].keys() == reference[3].keys() and len(fused[3]) == len(list(model.parameters()))
    for name, grad in reference[3].items():
        torch.testing.assert_close(fused[3][name], grad, rtol=1e-8, atol=1e-11, msg=name)


def test_without_gradients_the_loop_keeps_nothing_and_gives_the_same_outputs():
    torch.manual_seed(0)
    model, x = make_ntm(), torch.rand(2, 5, 5, dtype=torch.float64)
    with torch.no_grad():
        plain, _ = model(x)
    torch.testing.assert_close(plain, model(x)[0].detach(), rtol=0, atol=0)


def test_other_scores_take_the_step_by_step_loop():
    assert make_ntm(score=functools.partial(Dot)).fused is None


@pytest.mark.parametrize(("controller", "memory_init"), [("lstm", "constant"), ("feedforward", "learned")])
def test_under_vmap_each_replica_gets_its_own_gradients(controller, memory_init):
    torch.manual_seed(0)
    models = [make_ntm(controller=controller, memory_init=memory_init) for _ in range(3)]
    x = torch.rand(3, 2, 5, 5, dtype=torch.float64)  # one batch per replica
    params, _ = stack_module_state(models)
    shared = dict(models[0].named_buffers())  # as replicas pass them: once, unbatched (the constant initial memory)
    preds = torch.vmap(lambda p, x: functional_call(models[0], (p, shared), (x,))[0])(params, x)
    preds.sin().sum().backward()
    for r, model in enumerate(models):
        model(x[r])[0].sin().sum().backward()
        for name, p in model.named_parameters():
            torch.testing.assert_close(params[name].grad[r], p.grad, rtol=1e-9, atol=1e-12, msg=name)
