"""`Function`: torch's `autograd.Function` without the signature binding its `apply` does on every call."""

from __future__ import annotations

from typing import Any

import torch

from attnmem.core import compat

__all__ = ["Function"]


class Function(torch.autograd.Function):
    """An `autograd.Function` (the `setup_context` style, which `vmap` needs) whose `apply`, outside torch.func
    transforms, skips binding its arguments to `forward`'s signature: torch does that with `inspect.signature` on
    every call (~15 µs, 4% of a MemN2N training step, per time step in the DNC) only to fill in default values.
    Pass every argument of `forward` positionally."""

    @classmethod
    def apply(cls, *args: Any) -> Any:
        """`forward(*args)`, recorded for `backward`."""
        return compat.apply_unbound(cls, args)  # under vmap and friends: torch's own path
