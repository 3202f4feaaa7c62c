"""Recurrent layers in float32 inside autocast: oneDNN's CPU LSTM has no bf16 primitive here."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["recurrent"]


def recurrent(layer: nn.Module, inputs: Tensor, state: Any = None) -> Any:
    """Call an RNN/LSTM/GRU layer or cell in float32 with autocast off; plain call outside autocast."""
    device = inputs.device.type
    if not torch.is_autocast_enabled(device):
        return layer(inputs) if state is None else layer(inputs, state)
    with torch.autocast(device, enabled=False):
        state = None if state is None else _float(state)
        return layer(inputs.float()) if state is None else layer(inputs.float(), state)


def _float(state: Any) -> Any:
    if isinstance(state, Tensor):
        return state.float()
    return type(state)(_float(s) for s in state)
