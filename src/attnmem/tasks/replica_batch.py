"""R replicas' forward passes as one batched computation: `vmap` of `functional_call` over stacked parameters.

The parameters are stacked with `torch.stack` on every call, so gradients flow back to each replica's own
module (`torch.func.stack_module_state` detaches). Buffers every replica holds alike (MemN2N's position
encoding and linear-start flag) are passed once; those that differ (the NTM's random initial memory) are
stacked too. A model whose training forward draws random numbers gets them through `draws(batch)`, called
per replica under its own stream, so each replica draws what its single run would.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call

from attnmem.blocks.output import Output


def stackable(batches: Sequence[dict[str, Tensor]]) -> bool:
    """Whether the batches have the same keys and every tensor the same shape and dtype, so they stack."""
    first = batches[0]
    return all(
        b.keys() == first.keys()
        and all(not isinstance(v, Tensor) or (v.shape == first[k].shape and v.dtype == first[k].dtype)
                for k, v in b.items())
        for b in batches[1:]
    )


class Batched:
    """The forward of R replicas of one model in one `vmap` of `functional_call` over their stacked parameters.

    It calls a copy of the model on the meta device (it holds no data, so what a call leaves in it harms no
    replica: torch's `functional_call` under `vmap` leaves batched tensors in tied modules). Each replica's
    parameters and embeddings are looked up once (a parameter keeps its identity when a module moves).
    """

    def __init__(self, net: nn.Module) -> None:
        self.base = copy.deepcopy(net).to("meta")
        self.params: dict[int, dict[str, nn.Parameter]] = {}
        self.embeddings: dict[int, list[nn.Embedding]] = {}

    def __call__(self, nets: Sequence[nn.Module], batches: Sequence[dict[str, Tensor]]) -> list[Output]:
        """Each net's `Output` on its batch."""
        self.base.train(nets[0].training)
        named = [self.params.setdefault(id(net), dict(net.named_parameters())) for net in nets]
        params = {name: torch.stack([p[name] for p in named]) for name in named[0]}  # (R, ...) each
        buffers = [dict(net.named_buffers()) for net in nets]
        shared = {n: b for n, b in buffers[0].items() if all(torch.equal(b, other[n]) for other in buffers[1:])}
        varied = {n: torch.stack([other[n] for other in buffers]) for n in buffers[0] if n not in shared}
        stacked = {k: torch.stack([b[k] for b in batches]) if isinstance(v, Tensor) else v
                   for k, v in batches[0].items()}

        def one(p: dict[str, Tensor], v: dict[str, Tensor], batch: dict[str, Tensor]) -> tuple[Tensor, ...]:
            out = functional_call(self.base, (p, v, shared), (batch,))
            return out.pred, tuple(out.attention)

        in_dims = {k: 0 if isinstance(v, Tensor) else None for k, v in stacked.items()}
        preds, attention = torch.vmap(one, in_dims=(0, 0, in_dims), randomness="error")(params, varied, stacked)
        return [Output(pred=preds[r], attention=[a[r] for a in attention]) for r in range(len(nets))]

    def pad_gradients(self, nets: Sequence[nn.Module]) -> None:
        """Zero the gradient of every embedding's `padding_idx` row, as `nn.Embedding` promises: torch's vmap
        rule for embeddings ignores `padding_idx` in every replica but the first."""
        for net in nets:
            found = self.embeddings.setdefault(id(net), [m for m in net.modules() if isinstance(m, nn.Embedding)
                                                         and m.padding_idx is not None])
            for module in found:
                if module.weight.grad is not None:
                    module.weight.grad[module.padding_idx] = 0


def with_draws(net: nn.Module, batch: dict[str, Tensor]) -> dict[str, Tensor]:
    """The batch plus the random numbers `net` draws in its training forward (`net.draws(batch)`), if it has any."""
    draws: Callable[[dict[str, Tensor]], dict[str, Tensor]] | None = getattr(net, "draws", None)
    return batch | draws(batch) if draws is not None and net.training else batch


class _Served(nn.Module):
    """Stands in for a family module's `net` for one step: returns the output already computed for its batch."""

    def __init__(self, out: Output) -> None:
        super().__init__()
        self.out = out

    def forward(self, batch: Any) -> Output:
        return self.out


@contextmanager
def serving(module: nn.Module, out: Output) -> Any:
    """Inside the block, `module.net(batch)` returns `out` (its share of a batched forward) without computing."""
    net = module.net
    module.net = _Served(out)
    try:
        yield
    finally:
        module.net = net
