"""R replicas' forward passes as one batched computation: `vmap` of `functional_call` over stacked parameters.

The parameters are stacked with `torch.stack` on every call, so gradients flow back to each replica's own
module (`torch.func.stack_module_state` detaches). Buffers every replica holds alike (MemN2N's position
encoding and linear-start flag) are passed once; those that differ (the NTM's random initial memory) are
stacked too. What a model needs beyond that is its path's (`replicas.models`): the batch keys that pad, the
random numbers drawn per replica under its own stream (so each replica draws what its single run would), and,
for a model whose weights are all lookup tables (MemN2N), one batch of all replicas' rows, its ids moved into each
replica's rows of the tables stacked as one: one plain forward then serves every replica, without `vmap`'s
batching rules (whose embedding backward skips the pad word of the first replica only).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call

from attnmem.blocks.output import Output
from attnmem.models.contract import LogitsAt
from attnmem.replicas.models import Vmapped


def stackable(batches: Sequence[dict[str, Tensor]]) -> bool:
    """Whether the batches have the same keys and every tensor the same shape and dtype, so they stack."""
    first = batches[0]
    return all(
        b.keys() == first.keys()
        and all(not isinstance(v, Tensor) or (v.shape == first[k].shape and v.dtype == first[k].dtype)
                for k, v in b.items())
        for b in batches[1:]
    )


def aligned(batches: Sequence[dict[str, Tensor]], pads: dict[str, float]) -> list[dict[str, Tensor]]:
    """The batches with each key of `pads` padded along dim 1 to the longest of them, with that key's value (a model
    naming them in `replica_pads` reads the padding as nothing: MemN2N's empty memory slots)."""
    longest = {key: max(b[key].shape[1] for b in batches) for key in pads if key in batches[0]}
    out = []
    for batch in batches:
        batch = dict(batch)
        for key, length in longest.items():
            extra = length - batch[key].shape[1]
            if extra:  # F.pad's widths run from the last dim: (0, 0) for each dim after dim 1
                batch[key] = F.pad(batch[key], (0, 0) * (batch[key].dim() - 2) + (0, extra), value=pads[key])
        out.append(batch)
    return out


class Batched:
    """The forward of R replicas of one model in one `vmap` of `functional_call` over their stacked parameters, or
    in one plain call on all their rows where its path folds them (`Vmapped.folds`).

    Each replica's parameters and embeddings are looked up once (a parameter keeps its identity when a module
    moves).
    """

    def __init__(self, path: Vmapped) -> None:
        self.path = path
        self.params: dict[int, dict[str, nn.Parameter]] = {}
        self.buffer_names: dict[int, list[str]] = {}  # names only: a buffer is a new tensor when a module moves
        self.embeddings: dict[int, list[nn.Embedding]] = {}
        self.folded = False  # whether the last forward was folded (`fold`), whose pad rows need no zeroing here

    def __call__(self, nets: Sequence[nn.Module], batches: Sequence[dict[str, Tensor]]) -> list[Output]:
        """Each net's `Output` on its batch."""
        for net in nets:  # looked up once per net (`setdefault` would walk the modules on every call)
            if id(net) not in self.params:
                self.params[id(net)] = dict(net.named_parameters())
                self.buffer_names[id(net)] = [n for n, _ in net.named_buffers()]
        named = [self.params[id(net)] for net in nets]
        params = {name: torch.stack([p[name] for p in named]) for name in named[0]}  # (R, ...) each
        names = [self.buffer_names[id(net)] for net in nets]
        buffers = [{n: net.get_buffer(n) for n in named_buffers} for net, named_buffers in zip(nets, names)]
        shared = {n: b for n, b in buffers[0].items() if all(torch.equal(b, other[n]) for other in buffers[1:])}
        varied = {n: torch.stack([other[n] for other in buffers]) for n in buffers[0] if n not in shared}
        self.folded = self.path.folds and not varied
        base = self.path.folded_base if self.folded else self.path.base
        base.train(nets[0].training)
        if self.folded:  # one forward over all replicas' rows, each
            flat = {n: p.flatten(0, 1) for n, p in params.items()}  # parameter one table of R x its rows
            out = functional_call(base, (flat, shared), (self.path.fold(batches),))
            return _unstack(out.pred.unflatten(0, (len(nets), -1)), [a.unflatten(0, (len(nets), -1))
                                                                      for a in out.attention])
        stacked = {k: torch.stack([b[k] for b in batches]) if isinstance(v, Tensor) else v
                   for k, v in batches[0].items()}

        def one(p: dict[str, Tensor], v: dict[str, Tensor],
                batch: dict[str, Tensor]) -> tuple[Tensor, tuple[Tensor, ...]]:
            out = self.path.call(base, (p, v, shared), batch)
            return out.pred, tuple(out.attention)

        in_dims = {k: 0 if isinstance(v, Tensor) else None for k, v in stacked.items()}
        preds, attention = torch.vmap(one, in_dims=(0, 0, in_dims), randomness="error")(params, varied, stacked)
        return _unstack(preds, list(attention))

    def pad_gradients(self, nets: Sequence[nn.Module]) -> None:
        """Zero the gradient of every embedding's `padding_idx` row, as `nn.Embedding` promises: torch's vmap
        rule for embeddings ignores `padding_idx` in every replica but the first. A folded forward reads every pad
        word from row 0, which `padding_idx` skips (MemN2N's `nil_gradient`: from each replica's own row 0, whose
        gradient the net's `after_clipping` zeroes): nothing to zero."""
        if self.folded:
            return
        for net in nets:
            if id(net) not in self.embeddings:
                self.embeddings[id(net)] = [m for m in net.modules()
                                            if isinstance(m, nn.Embedding) and m.padding_idx is not None]
            for module in self.embeddings[id(net)]:
                if module.weight.grad is not None:
                    module.weight.grad[module.padding_idx] = 0


def _unstack(preds: Tensor, attention: list[Tensor]) -> list[Output]:
    """Replica r's `Output` from predictions (R, B, ...) and attention maps (R, B, ...); split by `unbind`, whose
    backward stacks the replicas' gradients once (indexing's would write each into zeros of the whole)."""
    maps = [a.unbind() for a in attention]
    return [Output(pred=pred, attention=[m[r] for m in maps]) for r, pred in enumerate(preds.unbind())]


class _Served(nn.Module, LogitsAt):
    """Stands in for a family module's `net` for one step: returns what was already computed for its batch (the
    whole of it: a `LogitsAt` caller gets the rows it marks)."""

    def __init__(self, served: Any) -> None:
        super().__init__()
        self.served = served

    def forward(self, *args: Any) -> Any:
        return self.served

    def logits_at(self, tokens: Tensor, where: Tensor) -> Tensor:
        """The served logits (B, T, V) at the positions `where (B, T)` marks: (K, V)."""
        return cast(Tensor, self.served[where])


@contextmanager
def serving(module: nn.Module, served: Any) -> Any:
    """Inside the block, `module.net(...)` returns `served` without computing: its share of a batched forward, as
    its path gives it back (`Vmapped.served`: the `Output`, or the pred of a net that returns a tensor)."""
    net = module.net
    module.net = _Served(served)
    try:
        yield
    finally:
        module.net = net
