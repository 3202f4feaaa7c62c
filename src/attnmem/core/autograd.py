"""`Function`: torch's `autograd.Function` without the signature binding its `apply` does on every call."""

from __future__ import annotations

from typing import Any

import torch
from torch._functorch.utils import unwrap_dead_wrappers

__all__ = ["Function"]


class Function(torch.autograd.Function):
    """An `autograd.Function` (the `setup_context` style, which `vmap` needs) whose `apply`, outside torch.func
    transforms, skips binding its arguments to `forward`'s signature: torch does that with `inspect.signature` on
    every call (~15 µs, 4% of a MemN2N training step, per time step in the DNC) only to fill in default values.
    Pass every argument of `forward` positionally."""

    @classmethod
    def apply(cls, *args: Any) -> Any:
        """`forward(*args)`, recorded for `backward`."""
        if torch._C._are_functorch_transforms_active():  # vmap and friends: torch's own path
            return super().apply(*args)
        return super(torch.autograd.Function, cls).apply(*unwrap_dead_wrappers(args))  # as torch's, less the binding
