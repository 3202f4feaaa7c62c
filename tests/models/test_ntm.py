"""NTM: each addressing step by hand, erase/add on a 3 × 2 memory, shapes, batching, bad sizes, a learning check."""

from __future__ import annotations

import functools
import math
import time

import pytest
import torch
import torch.nn.functional as F

from attnmem.attention import Additive, Bilinear, Cosine, Dot, ScaledDot
from attnmem.data.algorithmic import Copy, make_batch
from attnmem.models.ntm import NTM, content_weights, interpolate, read, sharpen, shift, write

torch.set_num_threads(1)

SCORES = [Cosine, Dot, ScaledDot, Bilinear, Additive]


def t(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


def make_ntm(**kw) -> NTM:
    args = {"input_size": 5, "output_size": 4, "score": functools.partial(Cosine), "controller_size": 16,
            "memory_locations": 8, "memory_width": 6} | kw
    return NTM(**args)


def test_content_weights_cosine_times_beta():
    memory = t([[1.0, 0.0], [0.0, 3.0], [-2.0, 0.0]])[None]  # (1, 3, 2)
    key = t([[5.0, 0.0]])[None]  # (1, 1, 2): cosine is scale-free
    similarity = Cosine(query_dim=2, key_dim=2).similarity(key, memory)
    torch.testing.assert_close(similarity, t([[1.0, 0.0, -1.0]])[None])
    weights = content_weights(similarity, torch.tensor(2.0).view(1, 1, 1))
    total = math.exp(2) + 1 + math.exp(-2)
    torch.testing.assert_close(weights, t([[math.exp(2) / total, 1 / total, math.exp(-2) / total]])[None])
    torch.testing.assert_close(weights, t([[0.866813, 0.117310, 0.015876]])[None], atol=1e-6, rtol=0)


def test_interpolation_gate():
    got = interpolate(t([[0.5, 0.5, 0.0]]), t([[0.0, 0.0, 1.0]]), torch.tensor([[0.25]]))
    torch.testing.assert_close(got, t([[0.125, 0.125, 0.75]]))


@pytest.mark.parametrize(
    ("weights", "shift_weights", "expected"),
    [
        ([1, 0, 0, 0], [0, 0, 1], [0, 1, 0, 0]),  # +1 moves the focus down one row
        ([0, 0, 0, 1], [0, 0, 1], [1, 0, 0, 0]),  # +1 wraps around the end
        ([1, 0, 0, 0], [1, 0, 0], [0, 0, 0, 1]),  # -1 wraps around the start
        ([0.6, 0.4, 0, 0], [0.2, 0.5, 0.3], [0.38, 0.38, 0.12, 0.12]),  # w̃(i) = .2 w(i+1) + .5 w(i) + .3 w(i-1)
    ],
)
def test_circular_shift(weights, shift_weights, expected):
    got = shift(t(weights)[None, None], t(shift_weights)[None, None], torch.tensor([-1, 0, 1]))
    torch.testing.assert_close(got, t(expected)[None, None])


def test_sharpening_normalises():
    got = sharpen(t([[0.5, 0.25, 0.25]])[None], torch.tensor(2.0).view(1, 1, 1))
    torch.testing.assert_close(got, t([[2 / 3, 1 / 6, 1 / 6]])[None])  # (.25, .0625, .0625) / .375


def test_erase_then_add_on_a_3x2_memory():
    memory = t([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])[None]  # (1, 3, 2)
    weights = t([[1.0, 0.5, 0.0]])[None]  # (1, W=1, 3)
    got = write(memory, weights, t([[1.0, 0.5]])[None], t([[10.0, 20.0]])[None])
    # erase: row 0 × (0, .5), row 1 × (.5, .75), row 2 kept; add: w aᵀ = (10, 20), (5, 10), (0, 0)
    torch.testing.assert_close(got, t([[10.0, 21.0], [6.5, 13.0], [5.0, 6.0]])[None])
    torch.testing.assert_close(read(memory, t([[0.5, 0.5, 0.0]])[None]), t([[2.0, 3.0]])[None])


def test_two_write_heads_multiply_their_erases_and_sum_their_adds():
    memory = t([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])[None]
    weights = t([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])[None]  # (1, 2, 3)
    got = write(memory, weights, t([[0.5, 0.5], [0.5, 0.5]])[None], t([[1.0, 0.0], [0.0, 1.0]])[None])
    torch.testing.assert_close(got, t([[1.25, 1.5], [3.0, 4.0], [5.0, 6.0]])[None])


@pytest.mark.parametrize("score", SCORES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("controller", ["lstm", "feedforward"])
def test_shapes_weightings_and_grads(score, controller):
    torch.manual_seed(0)
    model = make_ntm(score=functools.partial(score), controller=controller, read_heads=2, write_heads=1)
    y, state, weights = model(torch.rand(3, 7, 5), return_attention=True)
    assert y.shape == (3, 7, 4) and weights.shape == (3, 7, 3, 8) and state.memory.shape == (3, 8, 6)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 7, 3))
    torch.testing.assert_close(state.weightings, weights[:, -1])
    y.sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("memory_init", ["constant", "learned", "random"])
def test_batch_items_do_not_mix(memory_init):
    torch.manual_seed(0)
    model = make_ntm(memory_init=memory_init)
    x = torch.rand(4, 6, 5)
    together = model(x)[0]
    alone = torch.cat([model(x[i : i + 1])[0] for i in range(4)])
    torch.testing.assert_close(together, alone, atol=1e-5, rtol=1e-5)


def test_initial_weightings_are_one_hot_and_constant_memory_reads_uniform_content():
    model = make_ntm()
    state = model.initial_state(2)
    assert torch.equal(state.weightings, F.one_hot(torch.zeros(2, 2, dtype=torch.long), 8).float())
    assert torch.all(state.memory == 1e-6)


@pytest.mark.parametrize(
    ("kw", "option"),
    [({"shift_range": 4}, "shift_range"), ({"memory_locations": 0}, "memory_locations"),
     ({"read_heads": 0}, "read_heads"), ({"write_heads": 0}, "write_heads"), ({"controller": "gru"}, "controller"),
     ({"memory_init": "zeros"}, "memory_init")],
)
def test_bad_sizes_name_the_option(kw, option):
    with pytest.raises(ValueError, match=option):
        make_ntm(**kw)


def test_learns_a_tiny_copy_in_seconds():
    torch.manual_seed(0)
    task = Copy(width=4, min_length=1, max_length=3)
    model = make_ntm(input_size=5, output_size=4, controller_size=32, memory_locations=8, memory_width=6)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(0)
    start = time.perf_counter()
    for _ in range(400):
        batch = make_batch(task, 16, g)
        loss = F.binary_cross_entropy_with_logits(model(batch["inputs"])[0][batch["mask"]], batch["targets"][batch["mask"]])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    batch = make_batch(task, 64, torch.Generator().manual_seed(1), group=False)
    with torch.no_grad():
        pred = model(batch["inputs"])[0]
    errors = ((pred > 0) != (batch["targets"] > 0.5))[batch["mask"]].sum().item() / 64
    assert errors < 1.0, errors  # chance is ~4 bits per sequence (2 vectors of 4 bits on average)
    assert time.perf_counter() - start < 30


@pytest.mark.parametrize("score", ["cosine", "dot"])
def test_a_state_carried_between_calls_equals_one_long_run(score):
    torch.manual_seed(0)
    model = make_ntm(score=score).double()
    x = torch.rand(2, 9, 5, dtype=torch.float64)
    whole, last = model(x)
    first, state = model(x[:, :4])
    rest, state = model(x[:, 4:], state)
    # equal but for the last bits of the projections' matrix products, whose rounding depends on their row count
    torch.testing.assert_close(torch.cat([first, rest], 1), whole, rtol=0, atol=1e-14)
    for a, b in zip(state, last, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-14)


def test_the_score_by_name_class_or_factory_and_cosine_by_default():
    torch.manual_seed(0)
    assert make_ntm(score="cosine").fused is not None and make_ntm(score=Dot).fused is None
    default = NTM(input_size=5, output_size=4, controller_size=16, memory_locations=8, memory_width=6)
    assert default.fused is not None  # cosine: the fused loop
    assert make_ntm(score=functools.partial(Bilinear)).fused is None
    with pytest.raises(ValueError, match=r"^NTM: unknown score 'cos': one of 'dot'.*$"):
        make_ntm(score="cos")


@pytest.mark.parametrize("shape", [(8, 3), (2, 3, 4), (2, 3, 5, 1)])
def test_x_of_the_wrong_shape_is_one_line_naming_the_shape(shape):
    with pytest.raises(ValueError) as error:
        make_ntm()(torch.rand(shape))
    assert str(error.value) == f"NTM expects x of shape (B, T, input_size=5), got {shape}"
