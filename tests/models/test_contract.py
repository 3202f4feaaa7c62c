"""The typed model contract (models/contract.py): each capability Protocol is satisfied by exactly the models that
declare it, and a model that has a capability's members declares it."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from attnmem.attention import Dot, Trilinear
from attnmem.models import contract
from attnmem.models.bam import BAM
from attnmem.models.bidaf import BiDAF
from attnmem.models.bptt_rnn import BPTTRNN
from attnmem.models.cw import CW
from attnmem.models.dnc import DNC
from attnmem.models.hetero_associative import HeteroAssociative
from attnmem.models.hopfield import Hopfield
from attnmem.models.memn2n import MemN2N
from attnmem.models.mixer_lm import MixerLM
from attnmem.models.mixer_sequence import MixerSequence
from attnmem.models.mlp import MLP
from attnmem.models.modern_hopfield import ModernHopfield
from attnmem.models.nnlm import NNLM
from attnmem.models.ntm import NTM
from attnmem.models.rnn_sequence import RNNSequence
from attnmem.models.transformer import Transformer
from attnmem.models.transformer_sequence import TransformerSequence
from attnmem.models.word2vec import Word2Vec
from attnmem.tasks.qa_nets import MemN2NQA
from attnmem.tasks.sequence_nets import DNCSequence, NTMSequence

torch.set_num_threads(1)

SEQUENCE = {"input_size": 3, "output_size": 3}
MEMN2N = {"vocab_size": 8, "num_answers": 3, "memory_size": 4, "sentence_len": 3}
MODELS = {
    "MemN2N": lambda: MemN2N(**MEMN2N), "MemN2NQA": lambda: MemN2NQA(**MEMN2N),
    "BiDAF": lambda: BiDAF(vocab_size=8, char_vocab_size=8, score=Trilinear),
    "Hopfield": lambda: Hopfield(size=4), "ModernHopfield": lambda: ModernHopfield(size=4, num_patterns=2, score=Dot),
    "BAM": lambda: BAM(size=4, partner_size=3), "HeteroAssociative": lambda: HeteroAssociative(size=4, partner_size=3),
    "NNLM": lambda: NNLM(vocab_size=8, window=2), "CW": lambda: CW(vocab_size=8, window=2),
    "Word2Vec": lambda: Word2Vec(vocab_size=8, window=2),
    "BPTTRNN": lambda: BPTTRNN(**SEQUENCE), "RNNSequence": lambda: RNNSequence(**SEQUENCE),
    "NTM": lambda: NTM(**SEQUENCE), "NTMSequence": lambda: NTMSequence(**SEQUENCE),
    "DNC": lambda: DNC(**SEQUENCE), "DNCSequence": lambda: DNCSequence(**SEQUENCE),
    "Transformer": lambda: Transformer(src_vocab_size=8, tgt_vocab_size=8, pad_id=0, score=Dot),
    "TransformerSequence": lambda: TransformerSequence(**SEQUENCE, score=Dot),
    "MixerLM": lambda: MixerLM(vocab_size=8, d_model=8, layers=1, max_len=16),
    "MixerSequence": lambda: MixerSequence(**SEQUENCE, d_model=8, layers=1, max_len=16),
    "MLP": lambda: MLP(num_features=3, num_classes=3),  # no optional capability
}
PROVIDERS = {  # the docstring of each Protocol names these
    contract.AfterClipping: {"MemN2N", "MemN2NQA"},
    contract.WeightMatrices: {"MemN2N", "MemN2NQA"},
    contract.LinearStartable: {"MemN2N", "MemN2NQA"},
    contract.CarriesState: {"BPTTRNN", "RNNSequence", "NTM", "NTMSequence"},
    contract.MemoryTrace: {"DNCSequence"},
    contract.ReadHeads: {"NTM", "DNC", "NTMSequence", "DNCSequence", "TransformerSequence"},
    contract.NamedAttention: {"BiDAF"},
    contract.StoresPatterns: {"Hopfield", "ModernHopfield"},
    contract.RecallsPairs: {"BAM", "HeteroAssociative"},
    contract.WordVectors: {"NNLM", "CW", "Word2Vec"},
    contract.AdaptsModel: {"MemN2NQA", "NTMSequence", "DNCSequence"},
    contract.StateSized: {"MixerLM", "MixerSequence"},
    contract.LogitsAt: {"MixerLM"},
}
# tensor models with a method of a capability's name but another signature: the run-time check sees only names
LOOKALIKES = {(contract.MemoryTrace, "DNC"), (contract.StoresPatterns, "BAM"),
              (contract.StoresPatterns, "HeteroAssociative")}


@pytest.fixture(scope="module")
def models() -> dict[str, nn.Module]:
    return {name: make() for name, make in MODELS.items()}


def test_every_capability_of_the_contract_is_checked_here():
    assert set(PROVIDERS) == {getattr(contract, name) for name in contract.__all__}


@pytest.mark.parametrize("capability", list(PROVIDERS), ids=lambda p: p.__name__)
def test_a_capability_is_satisfied_by_the_models_that_declare_it_and_no_other(models, capability):
    satisfied = {name for name, model in models.items() if isinstance(model, capability)}
    declared = {name for name, model in models.items() if capability in type(model).__mro__}
    assert declared == PROVIDERS[capability]
    assert satisfied - declared == {name for p, name in LOOKALIKES if p is capability}


def test_a_model_declaring_capabilities_is_still_a_plain_module(models):
    net = models["MemN2NQA"]
    twin = copy.deepcopy(net).to("meta")  # as the replicas' batched path copies it
    assert isinstance(twin, contract.AfterClipping) and isinstance(twin, nn.Module)
    twin.load_state_dict(net.state_dict(), assign=True)
    assert type(twin).__init__ is MemN2NQA.__init__  # the Protocol's metaclass leaves the constructor alone
