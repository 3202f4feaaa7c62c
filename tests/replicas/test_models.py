"""Which models' replicas run batched and how (`attnmem.replicas.models`): the dispatch on the net's class,
MemN2N's draws and folding checked exactly against each replica's own forward, and `Replicas` deciding once."""

from __future__ import annotations

import copy

import pytest
import torch
from hydra.utils import instantiate
from torch import nn

from attnmem.attention.scores import Dot
from attnmem.core.dims import QADims
from attnmem.models.mixer_backbone import MIXERS
from attnmem.models.mixer_lm import MixerLM
from attnmem.models.transformer import Transformer
from attnmem.replicas.batch import Batched, serving
from attnmem.replicas.models import MemN2NReplicas, TensorVmapped, Vmapped, batched_path
from attnmem.replicas.module import Replicas
from attnmem.replicas.streams import Streams
from attnmem.tasks.qa import QATask
from attnmem.tasks.qa_nets import MemN2NQA
from attnmem.tasks.sequence_nets import DNCSequence, NTMSequence

torch.set_num_threads(1)
QA = {"vocab_size": 12, "num_answers": 5, "memory_size": 6, "sentence_len": 3, "embed_dim": 4, "random_noise": 0.1}
SEQUENCE = {"input_size": 3, "output_size": 2}
SGD = {"_target_": "torch.optim.SGD", "_partial_": True, "lr": 0.1}


def qa_batch(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    story = torch.randint(1, 12, (3, 4, 3), generator=g)
    story[0, 2:] = 0  # two empty slots
    return {"story": story, "query": torch.randint(1, 12, (3, 3), generator=g), "answer": torch.tensor([0, 1, 2])}


class Clipped(nn.Module):
    """A net without a batched path that counts its `after_clipping` calls."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(2))
        self.calls = 0

    def after_clipping(self) -> None:
        self.calls += 1


def qa_task(net: nn.Module) -> QATask:
    dims = QADims(vocab_size=12, num_answers=5, memory_size=6, sentence_len=3, query_len=3,
                  answer_words=[7, 8, 9, 10, 11], tasks=[])
    return QATask(net, optimizer=instantiate(SGD), dims=dims)


def test_the_models_registered_batch_and_every_other_loops():
    assert type(batched_path(NTMSequence(**SEQUENCE))) is Vmapped
    assert type(batched_path(DNCSequence(**SEQUENCE))) is Vmapped
    assert type(batched_path(MemN2NQA(**QA))) is MemN2NReplicas
    assert batched_path(Clipped()) is None and batched_path(nn.Linear(2, 2)) is None
    options = {"src_vocab_size": 8, "tgt_vocab_size": 8, "pad_id": 0, "score": Dot, "d_model": 8, "heads": 2,
               "d_ff": 8, "layers": 1}
    assert batched_path(Transformer(**options, dropout=0.1)) is None  # each replica's masks: its own stream's
    assert type(batched_path(Transformer(**options, dropout=0.0))) is Vmapped


MEMORY = {"controller_size": 4, "memory_locations": 3, "memory_width": 2}
OPTIONS = {"ntm": MEMORY, "dnc": MEMORY, "base_conv": {"l_max": 6}, "selective_ssm": {"d_state": 2},
           "lti_ssm": {"d_state": 2}, "hopfield": {"memory": 2}}


def mixer_lm(mixer: str, **options) -> MixerLM:
    single = mixer in ("lstm", "ntm", "dnc")  # the recurrent models: one layer, no positions
    return MixerLM(vocab_size=7, mixer=mixer, mixer_options=OPTIONS.get(mixer, {}), d_model=4, max_len=6,
                   layers=1 if single else 2, positions="none" if single else "learned", **options)


def test_mixer_lms_batch_unless_they_drop_or_hold_an_lstm():
    for mixer in MIXERS.keys() - {"lstm"}:
        assert type(batched_path(mixer_lm(mixer))) is TensorVmapped, mixer
    assert batched_path(mixer_lm("lstm")) is None  # `nn.LSTM` has no vmap batching rule: a loop
    assert batched_path(mixer_lm("attention", dropout=0.1)) is None  # each replica's masks: its own stream's
    assert batched_path(mixer_lm("selective_ssm", mlp=True, dropout=0.1)) is None


BATCHED = [(m, False) for m in sorted(MIXERS.keys() - {"lstm"})] + [("attention", True)]  # (mixer, tie_embeddings)


@pytest.mark.parametrize(("mixer", "tie"), BATCHED)
def test_mixer_lm_replicas_batched_give_each_replicas_own_logits_and_gradients(mixer, tie):
    torch.manual_seed(0)
    nets = [mixer_lm(mixer, tie_embeddings=tie) for _ in range(2)]  # tied: the head's weight is the token table
    batches = [{"inputs": torch.randint(0, 7, (2, 6)), "targets": torch.zeros(2, 6, dtype=torch.long)}
               for _ in range(2)]
    path = batched_path(nets[0])
    outs = Batched(path)(nets, batches)
    sum(o.pred.square().mean() for o in outs).backward()
    batched = [p.grad.clone() for net in nets for p in net.parameters()]
    for net in nets:
        net.zero_grad()
    own = [net(batch["inputs"]) for net, batch in zip(nets, batches)]
    sum(o.square().mean() for o in own).backward()
    for out, logits in zip(outs, own):
        assert out.attention == [] and path.served(out) is out.pred
        torch.testing.assert_close(out.pred, logits, rtol=0, atol=1e-5)
    for got, expected in zip(batched, (p.grad for net in nets for p in net.parameters())):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-6)


def test_serving_hands_the_family_module_what_its_net_returns():
    module, logits = nn.Module(), torch.zeros(2, 3, 7)
    module.net = mixer_lm("attention")
    with serving(module, logits):
        assert module.net(torch.zeros(2, 3, dtype=torch.long)) is logits
    assert type(module.net) is MixerLM


def test_memn2n_replicas_draw_rn_numbers_while_training_only():
    net, batch = MemN2NQA(**QA), qa_batch(0)
    path = batched_path(net)
    assert path.pads == {"story": 0, "rn_keys": 1.0} and path.draws_numbers
    assert path.draws(net.eval(), batch) == {}
    assert path.draws(net.train(), batch)["rn_keys"].shape == (3, 4 + 1)  # RN: ceil(4·0.1) extra keys


@pytest.mark.parametrize("nil_gradient", [False, True])
@pytest.mark.parametrize("temporal", [False, True])
def test_memn2n_replicas_folded_give_each_replicas_own_answer_exactly(nil_gradient, temporal):
    # W^T = C^K (answer_words): every weight a table, so the replicas fold into one batch of all their rows
    torch.manual_seed(0)
    options = QA | {"answer_words": [7, 8, 9, 10, 11], "nil_gradient": nil_gradient, "temporal": temporal}
    nets = [MemN2NQA(**options).eval() for _ in range(3)]
    batches = [qa_batch(r) for r in range(3)]
    path = batched_path(nets[0])
    assert path.folds
    folded = path.fold(batches)
    assert folded["story"].shape == (9, 4, 3) and torch.equal(folded["replica"], torch.arange(3).repeat_interleave(3))
    shift = 12 if nil_gradient else torch.where(batches[1]["story"] > 0, 12, 0)
    assert torch.equal(folded["story"][3:6], batches[1]["story"] + shift)  # replica 1's words: its rows
    batched = Batched(path)
    outs = batched(nets, batches)
    assert batched.folded
    for net, batch, out in zip(nets, batches, outs):
        own = net(batch)
        torch.testing.assert_close(out.pred, own.pred, rtol=0, atol=1e-6)
        torch.testing.assert_close(torch.stack(out.attention), torch.stack(own.attention), rtol=0, atol=1e-6)


def test_memn2n_replicas_with_a_weight_matrix_take_vmap_with_the_same_answers():
    torch.manual_seed(0)
    nets = [MemN2NQA(**QA).eval() for _ in range(2)]  # W is its own matrix: no folding
    batches = [qa_batch(r) for r in range(2)]
    batched = Batched(batched_path(nets[0]))
    outs = batched(nets, batches)
    assert not batched.folded
    for net, batch, out in zip(nets, batches, outs):
        torch.testing.assert_close(out.pred, net(batch).pred, rtol=0, atol=1e-6)


def test_replicas_decide_the_path_once_and_call_each_replicas_after_clipping():
    module = Replicas([qa_task(MemN2NQA(**QA)), qa_task(MemN2NQA(**QA))], streams=Streams([0, 1]),
                      monitor="val/acc", mode="max", select=("val/acc", "max"))
    assert module.batched and module.model_draws and module.replica_pads == {"story": 0, "rn_keys": 1.0}
    assert "one batched vmap" in module.describe() and "seeds 0..1" in module.describe()
    nets = [Clipped(), Clipped()]
    module = Replicas([qa_task(n) for n in nets], streams=Streams([0, 1]), monitor="val/acc", mode="max",
                      select=("val/acc", "max"))
    assert not module.batched and not module.model_draws and module.replica_pads == {}
    for net in nets:
        net.weight.grad = torch.full((2,), 30.0)
    module.configure_gradient_clipping(None, 1.0, "norm")
    assert [n.calls for n in nets] == [1, 1]
    torch.testing.assert_close(nets[0].weight.grad.norm(), torch.tensor(1.0))  # clipped, then after_clipping
    assert module.family_modules() == list(module.members) and module.curves_prefix().startswith("replicas/")


def test_a_folded_copy_leaves_the_model_alone():
    net = MemN2NQA(**QA | {"answer_words": [7, 8, 9, 10, 11]})
    before = copy.deepcopy(net.state_dict())
    path = batched_path(net)
    assert type(path.folded_base.memn2n).__name__ == "FoldedMemN2N" and type(net.memn2n).__name__ == "MemN2N"
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
