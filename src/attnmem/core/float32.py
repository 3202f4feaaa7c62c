"""Float32 inside autocast: recurrent layers, and the numerically fragile parts of a model (`in_float32`).

Under mixed precision a recurrent state carried over many steps, a softmax sharpened by a large temperature
or power, or an energy summed over many units would lose too much in 16 bits; these run in float32.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any, TypeVar

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence

__all__ = ["in_float32", "recurrent"]

F = TypeVar("F", bound=Callable[..., Any])
AUTOCAST_DEVICES = ("cpu", "cuda", "mps")


def recurrent(layer: nn.Module, inputs: Tensor | PackedSequence, state: Any = None) -> Any:
    """Call an RNN/LSTM/GRU layer or cell in float32 with autocast off; plain call outside autocast.

    `inputs` may be a `PackedSequence` (its `.float()` casts the data)."""
    device = (inputs.data if isinstance(inputs, PackedSequence) else inputs).device.type
    if not torch.is_autocast_enabled(device):
        return layer(inputs) if state is None else layer(inputs, state)
    with torch.autocast(device, enabled=False):
        state = None if state is None else _float(state)
        return layer(inputs.float()) if state is None else layer(inputs.float(), state)


def _float(state: Any) -> Any:
    if isinstance(state, Tensor):
        return state.float()
    return type(state)(_float(s) for s in state)


def in_float32(fn: F) -> F:
    """Decorate `fn` to run with autocast off and its bfloat16/float16 tensor arguments in float32.

    Outside autocast it is a plain call (a model cast to bf16 entirely stays so).
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        devices = [d for d in AUTOCAST_DEVICES if torch.is_autocast_enabled(d)]
        if not devices:
            return fn(*args, **kwargs)
        with ExitStack() as stack:
            for device in devices:
                stack.enter_context(torch.autocast(device, enabled=False))
            return fn(*map(_upcast, args), **{k: _upcast(v) for k, v in kwargs.items()})

    return wrapper  # type: ignore[return-value]


def _upcast(value: Any) -> Any:
    if isinstance(value, Tensor) and value.dtype in (torch.bfloat16, torch.float16):
        return value.float()
    return value
