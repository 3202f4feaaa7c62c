"""The training adapters (tasks/sequence_nets.py, tasks/qa_nets.py): the dict batch in, the tensor model's result
as an `Output`; a bare tensor refused in one line; the model's constructor; weights saved before the model moved."""

from __future__ import annotations

import inspect

import pytest
import torch

from attnmem.models.dnc import DNC
from attnmem.models.memn2n import MemN2N
from attnmem.models.ntm import NTM
from attnmem.runtime import option_types
from attnmem.tasks.adapters import with_old_keys_nested
from attnmem.tasks.qa_nets import MemN2NQA
from attnmem.tasks.sequence_nets import DNCSequence, NTMSequence

torch.set_num_threads(1)

SEQUENCE = {"input_size": 5, "output_size": 4, "controller_size": 8, "memory_locations": 6, "memory_width": 4}
QA = {"vocab_size": 12, "num_answers": 5, "memory_size": 6, "sentence_len": 3, "embed_dim": 4}


def qa_batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    story = torch.randint(1, 12, (3, 4, 3), generator=g)
    story[0, 2:] = 0  # two empty slots
    return {"story": story, "query": torch.randint(1, 12, (3, 3), generator=g), "answer": torch.tensor([0, 1, 2])}


@pytest.mark.parametrize(("adapter", "model", "key", "call"), [
    (NTMSequence, NTM, "inputs", "NTM(x)"), (DNCSequence, DNC, "inputs", "DNC(x)"),
    (MemN2NQA, MemN2N, "story", "MemN2N(story, query)"),
])  # fmt: skip
def test_a_bare_tensor_is_refused_in_one_line_and_the_constructor_is_the_models(adapter, model, key, call):
    net = adapter(**(QA if adapter is MemN2NQA else SEQUENCE))
    with pytest.raises(TypeError) as error:
        net(torch.rand(2, 3, 5))
    assert str(error.value) == (f"{adapter.__name__} takes the training dict batch {{'{key}': ...}}; call {call} for "
                                "tensors")
    assert inspect.signature(adapter) == inspect.signature(model, eval_str=True)
    assert adapter.tensor_model is model and adapter.families == (("qa",) if model is MemN2N else ("sequence",))
    # the option types of a run are checked against the model's hints through the adapter
    option = "memory_size" if model is MemN2N else "memory_locations"
    with pytest.raises(Exception, match=rf"expected an integer \({adapter.__name__} takes {option} as such\)"):
        option_types.check(_config(adapter, **{option: "abc"}))


def _config(adapter: type, **options: object):
    from omegaconf import OmegaConf

    return OmegaConf.create({"_target_": f"{adapter.__module__}.{adapter.__qualname__}", **options})


def test_the_sequence_adapters_give_the_tensor_models_results():
    torch.manual_seed(0)
    ntm, dnc, x = NTMSequence(**SEQUENCE), DNCSequence(**SEQUENCE), torch.rand(2, 6, 5)
    out = ntm({"inputs": x})
    y, _, weights = ntm.ntm(x, return_attention=True)
    assert torch.equal(out.pred, y) and torch.equal(torch.stack(out.attention, 1), weights)
    chunk, state = ntm.run_chunk(x[:, :2], ntm.initial_state(2))
    assert torch.equal(chunk.pred, y[:, :2]) and state.memory.shape == (2, 6, 4)
    out = dnc({"inputs": x})
    y, weights = dnc.dnc(x, return_attention=True)
    assert torch.equal(out.pred, y) and torch.equal(torch.stack(out.attention, 1), weights)
    assert dnc.memory_trace({"inputs": x})["usage"].shape == (2, 6, 6)


def test_memn2n_qa_gives_the_models_results_and_forwards_what_training_calls():
    torch.manual_seed(0)
    net, batch = MemN2NQA(**QA, answer_words=[7, 8, 9, 10, 11]).eval(), qa_batch()  # W^T = C^K: all tables
    pred, attention = net.memn2n(batch["story"], batch["query"], return_attention=True)
    out = net(batch)
    assert torch.equal(out.pred, pred) and torch.equal(torch.stack(out.attention, 1), attention)
    net.linear_start = True
    assert net.memn2n.linear_start and net.linear_start
    assert len(net.weight_matrices()) == len(net.memn2n.weight_matrices())


@pytest.mark.parametrize(("adapter", "name", "options"), [
    (NTMSequence, "ntm", SEQUENCE), (DNCSequence, "dnc", SEQUENCE), (MemN2NQA, "memn2n", QA),
])  # fmt: skip
def test_weights_saved_before_the_model_moved_under_its_adapter_load(adapter, name, options):
    torch.manual_seed(0)
    model = adapter.tensor_model(**options)
    old = model.state_dict()  # the keys a checkpoint of 0.2 keeps: `A.0.weight`, not `memn2n.A.0.weight`
    net = adapter(**options)
    assert set(net.state_dict()) == {f"{name}.{k}" for k in old}
    net.load_state_dict(old)
    assert all(torch.equal(net.state_dict()[f"{name}.{k}"], v) for k, v in old.items())
    net.load_state_dict(net.state_dict())  # the new keys load as they are
    family = torch.nn.Module()
    family.net = net  # as a family module holds it: `net.A.0.weight` compared as `net.memn2n.A.0.weight`
    nested = with_old_keys_nested({f"net.{k}": v for k, v in old.items()}, family)
    assert set(nested) == set(family.state_dict())


def test_the_sequence_adapters_name_their_read_heads_which_the_plots_label():
    ntm, dnc = NTMSequence(**SEQUENCE, read_heads=2, write_heads=1), DNCSequence(**SEQUENCE, read_heads=3)
    assert (ntm.read_heads, dnc.read_heads) == (2, 3)
    assert len(ntm({"inputs": torch.rand(1, 2, 5)}).attention[0][0]) == 2 + 1  # (B, R + W, N): read heads first
