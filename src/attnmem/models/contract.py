"""The optional capabilities of a model, each a `typing.Protocol` the training stack checks with `isinstance`.

A family module, the replicas package or a callback asks a model (the family module's `net`) for a capability only
through these Protocols, never by probing attribute names (`docs/architecture.md`, "A typed model contract"). A model
that has one declares it by subclassing its Protocol (`class MemN2NQA(nn.Module, AfterClipping, ...)`); a run-time
check sees the members, so a model that merely has them passes too. `isinstance` on these Protocols inspects attributes
on each call: code that runs every step decides once, when it is built. How a model's replicas run batched
(`replicas=R`) is the replicas package's business (`attnmem.replicas.models`), not the model's.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, runtime_checkable

from torch import Tensor, nn

from attnmem.blocks.output import Output

__all__ = [
    "AdaptsModel", "AfterClipping", "CarriesState", "LinearStartable", "LogitsAt", "MemoryTrace", "NamedAttention",
    "ReadHeads", "RecallsPairs", "StateSized", "StoresPatterns", "WeightMatrices", "WordVectors",
]


@runtime_checkable
class AfterClipping(Protocol):
    """Asked by the `qa` family module and the replicas package (per replica) once the gradients are clipped, before the
    step: `after_clipping()` adjusts them (MemN2N: the pad word's gradient zeroed). MemN2N, MemN2NQA."""

    def after_clipping(self) -> None:
        """Adjust the clipped gradients in place."""


@runtime_checkable
class WeightMatrices(Protocol):
    """Asked by per-weight clipping (`attnmem.tasks.clipping`, `task.clip_per_weight`): `weight_matrices()` the
    groups of parameters measured as one matrix; every other parameter stands alone. MemN2N, MemN2NQA."""

    def weight_matrices(self) -> list[list[nn.Parameter]]:
        """The groups of parameters clipped together."""


@runtime_checkable
class LinearStartable(Protocol):
    """Asked by the `LinearStart` callback (`callbacks.linear_start`), which sets `linear_start` at each training
    epoch's start: while true, memory addressing skips the softmax (Sukhbaatar et al. 2015, §4.2). MemN2N,
    MemN2NQA."""

    linear_start: bool


@runtime_checkable
class CarriesState(Protocol):
    """Asked by truncated BPTT (`attnmem.tasks.tbptt`, `task.tbptt_steps`): the state before the first step and a
    piece `inputs (B, T, I)` of a sequence run from `state`, with the state after it. BPTTRNN, RNNSequence, NTM,
    NTMSequence."""

    def initial_state(self, batch_size: int) -> Any:
        """The recurrent state before the first step."""

    def run_chunk(self, inputs: Tensor, state: Any) -> tuple[Output, Any]:
        """The Output of a piece of a sequence from `state`, and the state after it."""


@runtime_checkable
class MemoryTrace(Protocol):
    """Asked by the `sequence` family's plots: `memory_trace(batch)` the memory's usage `(B, T, N)` after each
    step and the final link matrix `(B, N, N)`, as `usage` and `link`. DNCSequence."""

    def memory_trace(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """The memory's usage and link matrix on `batch["inputs"]`."""


@runtime_checkable
class ReadHeads(Protocol):
    """Asked by the `sequence` family's plots: the first `read_heads` of the attention maps are read heads, the
    rest write heads (none: every head a write head). NTM, DNC, NTMSequence, DNCSequence, TransformerSequence."""

    read_heads: int


@runtime_checkable
class NamedAttention(Protocol):
    """Asked by the `span` family's plots: `attention_name` names `attention[0]` in the plot and its file (none:
    "coattention"). BiDAF."""

    attention_name: ClassVar[str]


@runtime_checkable
class StoresPatterns(Protocol):
    """Asked by the `patterns` family module (this or `RecallsPairs` is required): `store(patterns)` writes the
    patterns `(B, P, D)` of the batch into the memory it recalls them from. Hopfield, ModernHopfield."""

    def store(self, patterns: Tensor) -> None:
        """Store the patterns."""


@runtime_checkable
class RecallsPairs(Protocol):
    """Asked by the `patterns` family module: a hetero-associative memory stores pairs (`store(patterns, pairs)`)
    and recalls the batch key `recalls` ("pairs") from a probe of a pattern. BAM, HeteroAssociative."""

    recalls: ClassVar[str]

    def store(self, patterns: Tensor, pairs: Tensor) -> None:
        """Store each pattern with its pair."""


@runtime_checkable
class WordVectors(Protocol):
    """Required by the `embeddings` family module: `objective` names its loss ("next_word", "ranking",
    "negative_sampling") and `vectors()` is the word vectors `(V, d)` it judges and exports. NNLM, CW, Word2Vec."""

    objective: ClassVar[str]

    def vectors(self) -> Tensor:
        """The word vectors, one row per word of the vocabulary."""


@runtime_checkable
class AdaptsModel(Protocol):
    """Asked when comparing a checkpoint's keys (`attnmem.tasks.adapters.with_old_keys_nested`): a training adapter
    holds one model of class `tensor_model` under one attribute. MemN2NQA, NTMSequence, DNCSequence."""

    tensor_model: ClassVar[type[nn.Module]]


@runtime_checkable
class StateSized(Protocol):
    """Asked by the `recall` family module, which logs it with the test metrics as `model/state_size` (the
    scoreboard's and the capacity frontier's x axis): `state_size` is how many numbers of recurrent state one
    sequence holds at inference (a KV cache of the longest sequence for attention). MixerLM, MixerSequence."""

    @property
    def state_size(self) -> int:
        """The numbers of state one sequence holds."""


@runtime_checkable
class LogitsAt(Protocol):
    """Asked by the `recall` family module, which scores a few positions of each sequence: `logits_at(tokens, where)`
    the logits at the positions `where (B, T)` marks only, `(K, V)` for its K true entries in row-major order (the
    rows of `net(tokens)[where]`), so the head and the loss skip the positions that are not scored. MixerLM; the
    replicas' stand-in for a batched forward (`replicas.batch._Served`)."""

    def logits_at(self, tokens: Tensor, where: Tensor) -> Tensor:
        """The logits at the marked positions."""
