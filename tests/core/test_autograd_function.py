"""core/autograd.Function: `apply` without torch's per-call signature binding, the same values and gradients, and
torch's own path (the class's vmap rule) under torch.func transforms."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import torch

from attnmem.core.autograd import Function


class _Scale(Function):
    """y = a x, with a hand-written backward and a vmap rule that counts its calls."""

    vmapped = 0

    @staticmethod
    def forward(x: torch.Tensor, a: float) -> torch.Tensor:
        return x * a

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
        ctx.a = inputs[1]

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad * ctx.a, None

    @staticmethod
    def vmap(info: Any, in_dims: tuple, x: torch.Tensor, a: float) -> tuple[torch.Tensor, int]:
        _Scale.vmapped += 1
        return _Scale.apply(x.movedim(in_dims[0], 0), a), 0


def test_apply_binds_no_signature_and_gives_torchs_values_and_gradients(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("inspect.signature called")

    x = torch.randn(4, requires_grad=True)
    with pytest.raises(AssertionError, match="inspect.signature"):  # torch's own apply binds the arguments
        monkeypatch.setattr(inspect, "signature", refuse)
        torch.autograd.Function.apply.__func__(_Scale, x, 3.0)
    y = _Scale.apply(x, 3.0)
    monkeypatch.undo()
    y.sum().backward()
    torch.testing.assert_close(y, 3 * x.detach(), rtol=0, atol=0)
    torch.testing.assert_close(x.grad, torch.full((4,), 3.0), rtol=0, atol=0)


def test_under_vmap_the_class_rule_runs() -> None:
    _Scale.vmapped = 0
    x = torch.randn(5, 4)
    torch.testing.assert_close(torch.vmap(lambda row: _Scale.apply(row, 2.0))(x), 2 * x)
    assert _Scale.vmapped == 1
