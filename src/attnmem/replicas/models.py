"""Which models' replicas run as one batched computation, and how: the per-model adapters of `replicas=R`.

`batched_path(net)` (a `functools.singledispatch` on the net's class) gives the `Vmapped` path of the classes
registered here, or None: any other model's replicas loop, each its own forward. A model file knows nothing of
replicas; what batching a model's replicas needs lives here:

- the NTM, the DNC and the Transformers (without dropout, whose masks would come from one stream) run their
  replicas in one `vmap` of `functional_call` over the stacked parameters (`batch.Batched`; the NTM's fused loop
  and the DNC's link step take `vmap` through their own rules, as any `torch.func` ensemble would);
- the `recall` family's `MixerLM` (without dropout, every mixer one that takes `vmap`) the same way, through
  `TensorVmapped`: its net maps `batch["inputs"]` to logits, a tensor, which the family module gets back as such;
- MemN2N (`MemN2NReplicas`) pads its replicas' stories to one number of slots, draws RN's numbers per replica
  beforehand (under each replica's stream, as its own forward would), and, where every weight is a lookup table,
  folds the replicas into one batch of all their rows over their tables stacked as one (`FoldedMemN2N`).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from typing import Any, ClassVar, cast

import torch
from torch import Tensor, nn
from torch.func import functional_call

from attnmem.blocks.base_conv import BaseConv
from attnmem.blocks.delta_rule import DeltaRule
from attnmem.blocks.hopfield_mixer import HopfieldMixer
from attnmem.blocks.linear_attention import LinearAttention
from attnmem.blocks.output import Output
from attnmem.blocks.selective_ssm import SelectiveSSM
from attnmem.blocks.sliding_window import SlidingWindow
from attnmem.models.memn2n import MemN2N
from attnmem.models.mixer_backbone import CausalAttention
from attnmem.models.mixer_lm import MixerLM
from attnmem.models.recurrent_mixers import DNCMixer, NTMMixer
from attnmem.models.transformer import Transformer
from attnmem.models.transformer_sequence import TransformerSequence
from attnmem.tasks.qa_nets import MemN2NQA
from attnmem.tasks.sequence_nets import DNCSequence, NTMSequence

__all__ = ["FoldedMemN2N", "MemN2NReplicas", "TensorVmapped", "Vmapped", "batched_path"]

DROPOUT = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout)


class Vmapped:
    """R replicas of `net` in one `vmap` of `functional_call` over their stacked parameters.

    `base` is the module `functional_call` runs: a copy of the net on the meta device (it holds no data, so what a
    call leaves in it harms no replica: `functional_call` under `vmap` leaves batched tensors in tied modules).
    """

    pads: ClassVar[dict[str, float]] = {}  # batch keys padded along dim 1 so replicas' batches stack, and the value
    draws_numbers: ClassVar[bool] = False  # whether `draws` gives the training forward's random numbers
    folds: bool = False  # whether the replicas run folded into one batch (`fold`, `folded_base`)
    on_cpu: ClassVar[bool] = True  # whether batching pays on a CPU too (else only on an accelerator)

    def __init__(self, net: nn.Module) -> None:
        self.base = _meta_copy(net)

    def call(self, base: nn.Module, tensors: tuple[dict[str, Tensor], ...], batch: dict[str, Tensor]) -> Output:
        """One replica's `Output`: `base` under `tensors` (its parameters and buffers) on its batch."""
        return cast(Output, functional_call(base, tensors, (batch,)))

    def served(self, out: Output) -> Any:
        """What the family module's `net(...)` gets back for a replica's share `out` of the batched forward."""
        return out

    def draws(self, net: nn.Module, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """The random numbers `net`'s training forward would draw for `batch`, as batch keys (none here)."""
        return {}

    def fold(self, batches: Sequence[dict[str, Tensor]]) -> dict[str, Tensor]:
        """The replicas' batches as one batch of all their rows (only where `folds`)."""
        raise NotImplementedError(f"{type(self).__name__} does not fold replicas")

    @property
    def folded_base(self) -> nn.Module:
        """The module that runs a folded batch over the replicas' parameters stacked as one (only where `folds`)."""
        raise NotImplementedError(f"{type(self).__name__} does not fold replicas")


def _meta_copy(net: nn.Module) -> nn.Module:
    """A copy of `net` on the meta device whose tied parameters are still one: `Module.to("meta")` gives each name
    of a shared parameter (a tied head and embedding) its own tensor, and `functional_call` ties only what is tied
    in the module it runs."""
    base = copy.deepcopy(net).to("meta")
    first: dict[int, str] = {}  # a parameter's id -> its first name in `net`
    for name, parameter in net.named_parameters(remove_duplicate=False):
        if id(parameter) in first:  # a later name of a tied parameter: the copy's first name's tensor again
            owner, _, attribute = name.rpartition(".")
            setattr(base.get_submodule(owner), attribute, base.get_parameter(first[id(parameter)]))
        first.setdefault(id(parameter), name)
    return base


@functools.singledispatch
def batched_path(net: nn.Module) -> Vmapped | None:
    """How `net`'s replicas run batched; None: a loop over them (every model not registered here)."""
    return None


@batched_path.register(NTMSequence)
@batched_path.register(DNCSequence)
def _vmapped(net: nn.Module) -> Vmapped:
    return Vmapped(net)


def _dropping(net: nn.Module) -> bool:
    """Whether `net` drops anything (each replica's masks would come from one stream under `vmap`)."""
    return any(isinstance(m, DROPOUT) and m.p > 0 for m in net.modules())


@batched_path.register(Transformer)
@batched_path.register(TransformerSequence)
def _vmapped_without_dropout(net: nn.Module) -> Vmapped | None:
    return None if _dropping(net) else Vmapped(net)


class TensorVmapped(Vmapped):
    """Replicas of a net that maps one batch key's tensor to a tensor (the `recall` family's `net(batch["inputs"])
    -> logits`): `base` runs on that key, its tensor an `Output`'s pred (no attention maps), which `served` gives
    back to the family module."""

    key: ClassVar[str] = "inputs"
    # measured on a 2-core CPU (docs/architecture.md, "Replicas"): 3 replicas of MixerLM in one vmap are 10-30%
    # slower than the loop (attention) or level (S6): there the replicas loop
    on_cpu: ClassVar[bool] = False

    def call(self, base: nn.Module, tensors: tuple[dict[str, Tensor], ...], batch: dict[str, Tensor]) -> Output:
        """One replica's `Output`: `base`'s tensor on the batch's `key` as its pred."""
        return Output(pred=functional_call(base, tensors, (batch[self.key],)), attention=[])

    def served(self, out: Output) -> Tensor:
        """The pred: what the net itself returns."""
        return out.pred


# the mixers whose forwards take `vmap` (each checked in tests/replicas/test_models.py); `nn.LSTM` has no
# batching rule (the LSTM mixer loops)
VMAPPED_MIXERS = (CausalAttention, SlidingWindow, LinearAttention, DeltaRule, SelectiveSSM, BaseConv, HopfieldMixer,
                  NTMMixer, DNCMixer)


@batched_path.register
def _mixer_lm(net: MixerLM) -> Vmapped | None:
    batches = not _dropping(net) and all(isinstance(m, VMAPPED_MIXERS) for m in net.mixers)
    return TensorVmapped(net) if batches else None


class _Drawn(nn.Module):
    """MemN2NQA's forward with RN's numbers read from the batch (drawn beforehand) rather than drawn."""

    memn2n: MemN2N

    def __init__(self, memn2n: MemN2N) -> None:
        super().__init__()
        self.memn2n = memn2n  # the attribute of MemN2NQA: the same parameter names

    def forward(self, batch: dict[str, Tensor]) -> Output:
        drawn: dict[str, Tensor] = {k: batch[k] for k in ("rn_blank", "rn_keys") if k in batch}
        return self.memn2n.answer(batch["story"], batch["query"], drawn)


class _Folded(_Drawn):
    """`_Drawn` over folded replicas: the batch's `replica (R·B,)` names each row's replica."""

    memn2n: FoldedMemN2N

    def forward(self, batch: dict[str, Tensor]) -> Output:
        self.memn2n.rows = batch["replica"]
        return super().forward(batch)


class FoldedMemN2N(MemN2N):
    """MemN2N over R replicas' tables stacked as one ((R·V, d) each) and a batch of all their rows, `rows (R·B,)`
    naming each row's replica: each row reads its replica's nil word, time rows and answer rows."""

    rows: Tensor

    @classmethod
    def like(cls, model: MemN2N) -> FoldedMemN2N:
        """A copy of `model` on the meta device with this class's methods (the same modules, buffers and options)."""
        folded = copy.deepcopy(model).to("meta")
        folded.__class__ = cls
        return folded  # type: ignore[return-value]  # (mypy cannot follow the class assignment)

    def _nil_rows(self, query: Tensor) -> Tensor | None:
        return None if self.pad is not None else self.rows * _table(self.A[0]).num_embeddings  # (R·B,) row 0 of each's

    def _time_index(self, slot_mask: Tensor, drawn: dict[str, Tensor]) -> Tensor:
        return super()._time_index(slot_mask, drawn) + self.memory_size * self.rows.unsqueeze(-1)  # (R·B, S)

    def _tied_answers(self, u: Tensor) -> Tensor:
        answers = _table(self.C[-1])
        table = answers.weight.unflatten(0, (-1, answers.num_embeddings))[:, self.output_words]  # (R, A, d)
        if self.vocabulary_softmax and self.time_weight is not None:  # each replica's time words after its words
            assert self.T_C is not None  # time words come with temporal encoding's tables
            times = _table(self.T_C[-1]).weight.unflatten(0, (table.shape[0], -1))  # (R, S, d)
            table = torch.cat([table, times], dim=1)  # (R, V + S, d)
        return torch.bmm(u.unflatten(0, (table.shape[0], -1)), table.transpose(1, 2)).flatten(0, 1)  # (R·B, A)


def _table(module: nn.Module) -> nn.Embedding:
    """One of MemN2N's embedding tables (its ModuleLists hold `nn.Embedding`s)."""
    assert isinstance(module, nn.Embedding)
    return module


class MemN2NReplicas(Vmapped):
    """MemN2N's replicas: their stories padded to one number of slots, RN's numbers drawn per replica, and, where
    every weight is a lookup table (no H, no W, no score with weights), folded into one batch."""

    # more empty slots, and RN keys past every slot `noisy_recency` picks from
    pads: ClassVar[dict[str, float]] = {"story": 0, "rn_keys": 1.0}
    draws_numbers: ClassVar[bool] = True
    base: _Drawn

    def __init__(self, net: MemN2NQA) -> None:
        model = net.memn2n
        self.base = _Drawn(copy.deepcopy(model).to("meta"))
        self.folds = model.H is None and model.W is None and not any(True for s in model.scores for _ in s.parameters())
        self._folded = _Folded(FoldedMemN2N.like(model)) if self.folds else None

    def draws(self, net: nn.Module, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """RN's numbers for `batch` while training (`MemN2N.draws`), as batch keys."""
        assert isinstance(net, MemN2NQA)
        return net.memn2n.draws(batch["story"])

    def fold(self, batches: Sequence[dict[str, Tensor]]) -> dict[str, Tensor]:
        """R replicas' batches as one batch of all their rows, for one forward over their tables stacked replica by
        replica ((R·V, d) each): a word id moves to replica r's rows, the pad word to row 0 (zero in every
        replica; with `nil_gradient` to replica r's row 0, which takes gradient), `replica (R·B,)` names each
        row's."""
        model = self.base.memn2n
        folded = {k: torch.cat([b[k] for b in batches]) for k, v in batches[0].items() if isinstance(v, Tensor)}
        replica = torch.arange(len(batches), device=batches[0]["story"].device)  # (R,)
        for key in ("story", "query"):
            words = torch.stack([b[key] for b in batches])  # (R, B, ...)
            shift = _table(model.A[0]).num_embeddings * replica.view(-1, *[1] * (words.dim() - 1))  # (R, 1, ...)
            moved = words + shift if model.pad is None else torch.where(words > 0, words + shift, 0)
            folded[key] = moved.flatten(0, 1)  # (R·B, ...)
        folded["replica"] = replica.repeat_interleave(batches[0]["story"].shape[0])  # (R·B,)
        return folded

    @property
    def folded_base(self) -> nn.Module:
        """`FoldedMemN2N` under the adapter's attribute name."""
        assert self._folded is not None, "MemN2NReplicas.folded_base: this model's replicas do not fold"
        return self._folded


@batched_path.register
def _memn2n(net: MemN2NQA) -> Vmapped:
    return MemN2NReplicas(net)
