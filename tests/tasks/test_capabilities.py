"""The family modules use a model's optional capabilities through the Protocols of
models/contract.py: a stand-in net that declares one is used, one that lacks it is not (or is refused)."""

from __future__ import annotations

import pytest
import torch
from hydra.utils import instantiate
from torch import Tensor, nn

from attnmem.core.dims import EmbeddingsDims, PatternsDims, QADims
from attnmem.core.errors import UserError
from attnmem.models.contract import AfterClipping, CarriesState, RecallsPairs, StoresPatterns, WordVectors
from attnmem.tasks import tbptt
from attnmem.tasks.embeddings import OBJECTIVES, EmbeddingsTask
from attnmem.tasks.patterns import PatternsTask
from attnmem.tasks.qa import QATask

torch.set_num_threads(1)
SGD = {"_target_": "torch.optim.SGD", "_partial_": True, "lr": 0.1}


class Plain(nn.Module):
    """A net with no optional capability."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(2))


class Clipped(Plain, AfterClipping):
    """Counts its `after_clipping` calls."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def after_clipping(self) -> None:
        self.calls += 1


class Auto(Plain, StoresPatterns):
    def store(self, patterns: Tensor) -> None:
        pass


class Pairs(Plain, RecallsPairs):
    recalls = "pairs"

    def store(self, patterns: Tensor, pairs: Tensor) -> None:
        pass


class Vectors(Plain, WordVectors):
    objective = "ranking"

    def vectors(self) -> Tensor:
        return self.weight[None]


class Recurrent(Plain, CarriesState):
    def initial_state(self, batch_size: int) -> Tensor:
        return torch.zeros(batch_size)

    def run_chunk(self, inputs: Tensor, state: Tensor) -> tuple[object, Tensor]:
        return None, state


def qa_task(net: nn.Module, **options: bool) -> QATask:
    dims = QADims(vocab_size=2, num_answers=2, memory_size=1, sentence_len=1, query_len=1, answer_words=[0, 1],
                  tasks=[])
    return QATask(net, optimizer=instantiate(SGD), dims=dims, **options)


def test_the_qa_family_calls_after_clipping_only_where_the_net_has_it():
    net = Clipped()
    net.weight.grad = torch.ones(2)
    qa_task(net, clip_per_weight=True).configure_gradient_clipping(None, 10.0, "norm")
    plain = Plain()
    plain.weight.grad = torch.ones(2)
    qa_task(plain, clip_per_weight=True).configure_gradient_clipping(None, 10.0, "norm")  # nothing to call
    assert net.calls == 1


@pytest.mark.parametrize(("net", "recalls"), [(Auto(), "patterns"), (Pairs(), "pairs")])
def test_the_patterns_family_recalls_the_key_the_net_declares(net, recalls):
    task = PatternsTask(net, optimizer=instantiate(SGD), dims=PatternsDims(size=2, num_patterns=1))
    assert task.recalls == recalls


def test_the_patterns_family_refuses_a_net_that_stores_nothing():
    with pytest.raises(TypeError, match="Plain has none"):
        PatternsTask(Plain(), optimizer=instantiate(SGD), dims=PatternsDims(size=2, num_patterns=1))


def test_the_embeddings_family_takes_the_loss_the_net_names_and_refuses_one_without_vectors():
    dims = EmbeddingsDims(vocab_size=1, window=1, itos=["a"])
    assert EmbeddingsTask(Vectors(), optimizer=instantiate(SGD), dims=dims).loss_fn is OBJECTIVES["ranking"]
    with pytest.raises(TypeError, match="needs `objective`"):
        EmbeddingsTask(Plain(), optimizer=instantiate(SGD), dims=dims)


def test_truncated_bptt_takes_a_net_that_carries_its_state_and_refuses_one_that_does_not():
    tbptt.check(2, Recurrent())
    with pytest.raises(UserError, match="Plain is not recurrent"):
        tbptt.check(2, Plain())

