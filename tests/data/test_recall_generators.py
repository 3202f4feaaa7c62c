"""The recall sources checked against their definitions: MQAR (Zoology), selective copying and induction heads
(Mamba §4.1): layout, scored positions, seeding, and one-line errors naming the option and its range."""

from __future__ import annotations

import pytest
import torch

from attnmem.data.recall.checks import IGNORE
from attnmem.data.recall.induction_heads import InductionHeads
from attnmem.data.recall.mqar import MQAR
from attnmem.data.recall.selective_copy import SelectiveCopy


def test_mqar_pairs_queries_and_targets():
    task = MQAR(vocab_size=40, seq_len=32, num_kv_pairs=4, random_non_queries=False)
    inputs, targets = task.generate(50, seed=3)
    assert inputs.shape == targets.shape == (50, 32) and inputs.dtype == targets.dtype == torch.long
    keys, values = inputs[:, 0:8:2], inputs[:, 1:8:2]
    assert ((keys >= 1) & (keys < 20)).all() and ((values >= 20) & (values < 40)).all()  # disjoint halves
    for row in range(50):
        assert len(set(keys[row].tolist())) == 4 and len(set(values[row].tolist())) == 4  # distinct in a sequence
        pairs = dict(zip(keys[row].tolist(), values[row].tolist()))
        scored = (targets[row] != IGNORE).nonzero().flatten().tolist()
        assert len(scored) == 4 and all(p >= 8 and p % 2 == 0 for p in scored)  # even offsets after the pairs
        assert sorted(inputs[row, scored].tolist()) == sorted(pairs)  # every key queried once
        assert all(targets[row, p] == pairs[int(inputs[row, p])] for p in scored)  # its target is its value
        rest = [p for p in range(8, 32) if p not in scored]
        assert (inputs[row, rest] == 0).all()  # fillers
    assert (targets[:, :8] == IGNORE).all()


def test_mqar_zoology_layout_and_options():
    # Zoology's docstring example: vocab 12, 2 pairs, length 16, no random fillers
    inputs, targets = MQAR(vocab_size=12, seq_len=16, num_kv_pairs=2, random_non_queries=False).generate(1, 0)
    assert inputs[0, :4].tolist()[0::2] != [0, 0] and (targets[0] != IGNORE).sum() == 2
    few = MQAR(vocab_size=64, seq_len=32, num_kv_pairs=6, num_queries=2, random_non_queries=False)
    inputs, targets = few.generate(20, 0)
    assert ((targets != IGNORE).sum(1) == 2).all()
    noisy_inputs, noisy_targets = MQAR(vocab_size=64, seq_len=32, num_kv_pairs=6, num_queries=2).generate(20, 0)
    assert torch.equal(noisy_targets, targets)  # the noise comes after every other draw
    filled = inputs == 0
    assert torch.equal(noisy_inputs[~filled], inputs[~filled]) and (noisy_inputs[filled] != 0).float().mean() > 0.9


def test_mqar_power_law_and_uniform_positions():
    law = MQAR(vocab_size=64, seq_len=64, num_kv_pairs=2, power_a=0.01).slot_probabilities()
    i = torch.arange(1, 31, dtype=torch.float64)
    assert torch.allclose(law, i ** -0.99 / (i ** -0.99).sum())  # p(i) ∝ a·i^(a-1), a = 0.01
    uniform = MQAR(vocab_size=64, seq_len=64, num_kv_pairs=2, power_a=1.0).slot_probabilities()
    assert torch.allclose(uniform, torch.full((30,), 1 / 30, dtype=torch.float64))
    near = lambda a: (MQAR(vocab_size=64, seq_len=64, num_kv_pairs=2, power_a=a).generate(400, 0)[1] != IGNORE)[
        :, 4:20].float().mean()
    assert near(0.01) > near(1.0) + 0.005  # the power law puts more queries right after the pairs


def test_selective_copy_layout():
    task = SelectiveCopy(vocab_size=6, seq_len=20, num_tokens=4)
    inputs, targets = task.generate(30, seed=1)
    assert inputs.shape == targets.shape == (30, 20)
    context = 20 - 4 - 1
    assert (inputs[:, context] == task.marker).all() and (inputs[:, context + 1 :] == task.blank).all()
    assert (targets[:, : context + 1] == IGNORE).all() and (targets[:, context + 1 :] < 4).all()
    for row in range(30):
        data = [t for t in inputs[row, :context].tolist() if t != task.blank]
        assert data == targets[row, context + 1 :].tolist()  # the data tokens, in order
        assert task.marker not in inputs[row, :context].tolist()


def test_induction_heads_layout():
    task = InductionHeads(vocab_size=5, seq_len=12)
    inputs, targets = task.generate(40, seed=2)
    assert inputs.shape == targets.shape == (40, 12)
    assert (inputs[:, -1] == task.trigger).all() and (targets[:, :-1] == IGNORE).all()
    for row in range(40):
        first = inputs[row, :-1].tolist().index(task.trigger)
        assert inputs[row, :-1].tolist().count(task.trigger) == 1 and first <= 12 - 3
        assert targets[row, -1] == inputs[row, first + 1] != task.trigger


@pytest.mark.parametrize("task", [MQAR(vocab_size=64, seq_len=32, num_kv_pairs=4), SelectiveCopy(seq_len=24, num_tokens=4),
                                  InductionHeads(seq_len=16)])
def test_seeds_reproduce_and_differ(task):
    first, again, other = task.generate(16, 7), task.generate(16, 7), task.generate(16, 8)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[0], other[0])
    assert task.generate(0, 7)[0].shape == (0, task.seq_len)


@pytest.mark.parametrize(("build", "fragments"), [
    (lambda: MQAR(seq_len=32, num_kv_pairs=9).check(), ["data.source.num_kv_pairs=9", "[1, 8]", "seq_len=32"]),
    (lambda: MQAR(seq_len=32, num_kv_pairs=16, num_queries=2).check(), ["data.source.num_kv_pairs=16", "[1, 15]"]),
    (lambda: MQAR(vocab_size=16, num_kv_pairs=8).check(), ["data.source.vocab_size=16", ">= 18", "num_kv_pairs=8"]),
    (lambda: MQAR(num_kv_pairs=4, num_queries=5).check(), ["data.source.num_queries=5", "[1, 4]", "num_kv_pairs=4"]),
    (lambda: MQAR(seq_len=20, num_kv_pairs=8, num_queries=3).check(), ["data.source.num_queries=3", "[1, 2]"]),
    (lambda: MQAR(power_a=0).check(), ["data.source.power_a=0", "> 0"]),
    (lambda: MQAR(seq_len=2).check(), ["data.source.seq_len=2", ">= 4"]),
    (lambda: SelectiveCopy(seq_len=16, num_tokens=8).check(), ["data.source.num_tokens=8", "[1, 7]", "seq_len=16"]),
    (lambda: SelectiveCopy(vocab_size=3).check(), ["data.source.vocab_size=3", ">= 4"]),
    (lambda: InductionHeads(vocab_size=2).check(), ["data.source.vocab_size=2", ">= 3"]),
    (lambda: InductionHeads(seq_len=2).check(), ["data.source.seq_len=2", ">= 3"]),
])
def test_bad_options_are_one_line_naming_option_and_range(build, fragments):
    with pytest.raises(ValueError) as err:
        build()
    message = str(err.value)
    assert "\n" not in message and all(f in message for f in fragments), message


def test_generate_checks_first():
    with pytest.raises(ValueError, match="data.source.num_queries=5"):
        MQAR(num_kv_pairs=4, num_queries=5).generate(2, 0)
