"""DNC: each memory equation by hand on a memory of 4 × 3, whole steps, stability, bad sizes, a learning check."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F

from attnmem.attention import Additive, Bilinear, Cosine, Dot, ScaledDot
from attnmem.blocks.dnc_memory import (
    DNCMemory,
    allocation,
    directional_weights,
    link_step,
    link_update,
    precedence_update,
    read_weights,
    retention,
    sharpen,
    usage_update,
    write_memory,
)
from attnmem.data.algorithmic import Copy, make_batch
from attnmem.models.dnc import DNC
from attnmem.models.dnc_qa import DNCReader

torch.set_num_threads(1)


def t(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


def make_dnc(**kw) -> DNC:
    args = {"input_size": 5, "output_size": 4, "score": functools.partial(Cosine), "controller_size": 16,
            "memory_locations": 8, "memory_width": 6} | kw
    return DNC(**args)


def test_retention_and_usage():
    # ψ = (1 - 1·[1,0,0,0]) ∘ (1 - 0.5·[0,1,0,0]) = [0, .5, 1, 1]; u = (u + w - u∘w) ∘ ψ
    psi = retention(t([[1.0, 0.5]]), t([[[1, 0, 0, 0], [0, 1, 0, 0]]]))
    torch.testing.assert_close(psi, t([[0.0, 0.5, 1.0, 1.0]]))
    usage = usage_update(t([[0.5, 0.5, 0.5, 0.0]]), t([[0.0, 0.0, 1.0, 0.0]]), psi)
    torch.testing.assert_close(usage, t([[0.0, 0.25, 1.0, 0.0]]))


def test_allocation_by_ascending_usage_with_ties_lowest_index_first():
    # order 1, 3 (tied at .2: index 1 first), 0, 2: a = (1 - u[φ_j]) Π_{i<j} u[φ_i]
    got = allocation(t([[0.4, 0.2, 0.9, 0.2]]))
    torch.testing.assert_close(got, t([[0.6 * 0.2 * 0.2, 0.8, 0.1 * 0.2 * 0.2 * 0.4, 0.8 * 0.2]]))
    torch.testing.assert_close(allocation(torch.zeros(1, 4)), t([[1.0, 0.0, 0.0, 0.0]]))  # empty: location 0
    torch.testing.assert_close(allocation(t([[1.0, 1.0, 0.0, 1.0]])), t([[0.0, 0.0, 1.0, 0.0]]))


def test_write_erases_then_adds_on_a_4x3_memory():
    memory = t([[1, 2, 3], [4, 5, 6], [0, 0, 0], [1, 1, 1]])[None]
    got = write_memory(memory, t([[0.5, 0.0, 1.0, 0.0]]), t([[1.0, 0.0, 0.5]]), t([[2.0, 2.0, 2.0]]))
    # row 0: [1, 2, 3] ∘ (1 - .5 [1, 0, .5]) + .5·2 = [.5, 2, 2.25] + 1; row 2: 0 + 2; others unchanged
    torch.testing.assert_close(got, t([[1.5, 3, 3.25], [4, 5, 6], [2, 2, 2], [1, 1, 1]])[None])


def test_link_matrix_and_precedence():
    link = torch.zeros(1, 4, 4)
    link[0, 3, 2] = 1.0  # location 3 was written after location 2
    w, p = t([[0.5, 0.5, 0.0, 0.0]]), t([[0.0, 0.0, 1.0, 0.0]])
    got = link_update(link, w, p)
    expected = torch.zeros(1, 4, 4)
    expected[0, 0, 2] = expected[0, 1, 2] = 0.5  # (1 - .5 - 0)·0 + .5·p[2]
    expected[0, 3, 2] = 1.0  # (1 - 0 - 0)·1 + 0
    torch.testing.assert_close(got, expected)  # L[0, 1] = L[1, 0] = .5·0 + 0: and the diagonal stays 0
    torch.testing.assert_close(precedence_update(p, w), t([[0.5, 0.5, 0.0, 0.0]]))  # (1 - Σw) p + w


def test_successive_writes_link_forward_and_backward():
    link, p = torch.zeros(1, 4, 4), torch.zeros(1, 4)
    for location in range(3):
        w = F.one_hot(torch.tensor([location]), 4).float()
        link, p = link_update(link, w, p), precedence_update(p, w)
    forward, backward = directional_weights(link, t([[[1, 0, 0, 0], [0, 0, 1, 0]]]))
    torch.testing.assert_close(forward, t([[[0, 1, 0, 0], [0, 0, 0, 0]]]))  # after 0 came 1; after 2 nothing
    torch.testing.assert_close(backward, t([[[0, 0, 0, 0], [0, 1, 0, 0]]]))  # before 2 came 1


def test_read_modes_mix_backward_content_forward():
    b, c, f = t([[[1, 0, 0, 0]]]), t([[[0, 0.5, 0.5, 0]]]), t([[[0, 0, 0, 1]]])
    got = read_weights(b, c, f, t([[[0.2, 0.5, 0.3]]]))
    torch.testing.assert_close(got, t([[[0.2, 0.25, 0.25, 0.3]]]))


def test_link_sharpness_raises_the_weights_to_a_power():
    got = sharpen(t([[[0.6, 0.2, 0.2, 0.0]]]), t([[[2.0]]]))
    torch.testing.assert_close(got, t([[[0.36, 0.04, 0.04, 0.0]]]) / 0.44, atol=1e-5, rtol=0)


def _interface(memory: DNCMemory, **parts: torch.Tensor) -> torch.Tensor:
    """An interface vector of zeros but for the named parts, in the memory's layout."""
    names = ["read_keys", "read_beta", "write_key", "write_beta", "erase", "vector", "free", "alloc_gate",
             "write_gate", "modes"]
    chunks = [parts.get(name, torch.zeros(1, size)) for name, size in zip(names, memory.sizes, strict=True)]
    return torch.cat(chunks, -1)


def test_allocated_writes_fill_free_locations_in_order_and_forward_reads_follow_them():
    memory = DNCMemory(score=functools.partial(Cosine), memory_locations=4, memory_width=3)
    state = memory.initial_state(1, torch.zeros(1))
    gates = {"alloc_gate": t([[50.0]]), "write_gate": t([[50.0]]), "erase": t([[50.0, 50.0, 50.0]]),
             "free": t([[-50.0]])}  # nothing freed
    vectors = t([[1, 0, 0], [0, 1, 0], [0, 0, 1]])
    for step in range(3):
        state = memory(_interface(memory, vector=vectors[step : step + 1], **gates), state)
        torch.testing.assert_close(state.write_weights, F.one_hot(torch.tensor([step]), 4).float())
    torch.testing.assert_close(state.memory[0, :3], vectors)
    torch.testing.assert_close(state.usage, t([[1.0, 1.0, 0.0, 0.0]]))  # u_t counts the writes up to t - 1
    # read mode "forward" from a read weighting on location 0 (set by hand) lands on location 1
    state = state._replace(read_weights=t([[[1, 0, 0, 0]]]))
    read_only = {"write_gate": t([[-50.0]]), "free": t([[-50.0]]), "modes": t([[-50.0, -50.0, 50.0]])}
    state = memory(_interface(memory, **read_only), state)
    torch.testing.assert_close(state.reads, t([[[0, 1, 0]]]))


@pytest.mark.parametrize("score", [Cosine, Dot, ScaledDot, Bilinear, Additive])
def test_shapes_and_grads_with_every_option(score):
    model = make_dnc(score=functools.partial(score), read_heads=2, masking=True, deallocation=True,
                     link_sharpness=True)
    y, weights = model(torch.rand(3, 7, 5), return_attention=True)
    assert y.shape == (3, 7, 4) and weights.shape == (3, 7, 3, 8)
    assert weights.min() >= 0 and weights.sum(-1).max() <= 1 + 1e-5  # gates and read modes: at most one
    y.sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_batch_items_do_not_mix():
    model, x = make_dnc(), torch.rand(4, 6, 5)
    torch.testing.assert_close(model(x)[1:2], model(x[1:2]))


def test_no_nan_over_a_long_sequence_in_float32_and_under_bf16_autocast():
    torch.manual_seed(0)
    model = make_dnc(deallocation=True, link_sharpness=True)
    for layer in (model.core.interface_proj, model.core.input_proj):
        torch.nn.init.normal_(layer.weight, std=3.0)  # saturated gates and huge strengths
    x = torch.rand(2, 300, 5)
    model(x).sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, weights = model(x, return_attention=True)
    assert torch.isfinite(y).all() and weights.dtype == torch.float32


def test_the_babi_reader_skips_padding():
    model = DNCReader(vocab_size=10, num_answers=3, score=functools.partial(Cosine), embed_dim=8,
                      controller_size=16, memory_locations=8, memory_width=6, read_heads=2)
    story = torch.tensor([[[1, 2, 0], [3, 0, 0]], [[1, 2, 3], [4, 5, 6]]])  # (B, S, L)
    query = torch.tensor([[7, 8], [7, 0]])
    both = model({"story": story, "query": query}).pred
    alone = model({"story": torch.tensor([[[1, 2], [3, 7]]]), "query": torch.tensor([[8, 0]])}).pred
    torch.testing.assert_close(both[:1], alone)  # the same words 1 2 3 7 8, padded differently


@pytest.mark.parametrize(
    ("kw", "option"),
    [({"read_heads": 0}, "read_heads"), ({"memory_locations": 0}, "memory_locations"),
     ({"memory_width": 0}, "memory_width"), ({"controller_size": 0}, "controller_size"),
     ({"interface_clip": 0.0}, "interface_clip")],
)
def test_bad_sizes_name_the_option(kw, option):
    with pytest.raises(ValueError, match=f"DNC: {option}"):
        make_dnc(**kw)


def test_learns_a_tiny_copy():
    torch.manual_seed(0)
    task = Copy(width=4, min_length=1, max_length=3)
    model = make_dnc(controller_size=32)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(0)
    for _ in range(300):
        batch = make_batch(task, 16, g)
        loss = F.binary_cross_entropy_with_logits(model(batch["inputs"])[batch["mask"]], batch["targets"][batch["mask"]])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    batch = make_batch(task, 64, torch.Generator().manual_seed(1), group=False)
    with torch.no_grad():
        pred = model(batch["inputs"])
    errors = ((pred > 0) != (batch["targets"] > 0.5))[batch["mask"]].sum().item() / 64
    assert errors < 1.0, errors  # chance is ~4 bits per sequence (2 vectors of 4 bits on average)


def test_the_link_update_gradient_matches_finite_differences():
    torch.manual_seed(0)
    link = (torch.rand(2, 4, 4, dtype=torch.float64) * (1 - torch.eye(4, dtype=torch.float64))).requires_grad_()
    w, p = (torch.rand(2, 4, dtype=torch.float64).div(4).requires_grad_() for _ in range(2))
    assert torch.autograd.gradcheck(link_update, (link, w, p))  # its diagonal is zeroed in place


def test_the_fused_link_step_equals_the_equations_and_its_hand_written_backward_their_gradient():
    torch.manual_seed(0)
    link = (torch.rand(2, 5, 5, dtype=torch.float64) * (1 - torch.eye(5, dtype=torch.float64))).requires_grad_()
    w, p = (torch.rand(2, 5, dtype=torch.float64).div(5).requires_grad_() for _ in range(2))
    rw = torch.softmax(torch.randn(2, 3, 5, dtype=torch.float64), -1).requires_grad_()
    new, forward, backward = link_step(link, w, p, rw)
    expected = link_update(link, w, p)
    torch.testing.assert_close(new, expected)
    torch.testing.assert_close((forward, backward), directional_weights(expected, rw))
    assert torch.autograd.gradcheck(link_step, (link, w, p, rw))
    # the same gradients as autograd through the two equations, for a loss on all three outputs
    loss = lambda n, f, b: (n * n.detach().sin()).sum() + (f * 3).sum() + (b * b).sum()  # noqa: E731
    ours = torch.autograd.grad(loss(*link_step(link, w, p, rw)), (link, w, p, rw))
    theirs = torch.autograd.grad(loss(expected, *directional_weights(expected, rw)), (link, w, p, rw))
    torch.testing.assert_close(ours, theirs)


def test_the_score_by_name_or_class_cosine_by_default_and_a_bad_name_in_one_line():
    torch.manual_seed(0)
    default = DNC(input_size=5, output_size=4, controller_size=16, memory_locations=8, memory_width=6)
    torch.manual_seed(0)
    named = make_dnc(score="cosine")
    x = torch.rand(2, 3, 5)
    assert torch.equal(default(x), named(x)) and make_dnc(score=Dot)(x).shape == (2, 3, 4)
    with pytest.raises(ValueError, match=r"^DNC: unknown score 'cos': one of 'dot'.*$"):
        make_dnc(score="cos")
    with pytest.raises(ValueError, match=r"^DNC expects x of shape \(B, T, input_size=5\), got \(2, 5\)$"):
        default(torch.rand(2, 5))


def test_the_run_and_the_memory_trace_of_a_tensor():
    model, x = make_dnc(), torch.rand(2, 4, 5)
    out = model.run(x)
    assert torch.equal(out.pred, model(x)) and len(out.attention) == 4
    trace = model.memory_trace(x)
    assert trace["usage"].shape == (2, 4, 8) and trace["link"].shape == (2, 8, 8)
