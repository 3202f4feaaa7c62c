"""Classical and modern Hopfield nets: Hebbian weights by hand, energy descent, sync cycles, retrieval."""

from __future__ import annotations

import math

import pytest
import torch

from attnmem.attention import Additive, Bilinear, Cosine, Dot
from attnmem.blocks.hopfield import HopfieldLayer, HopfieldPooling, Tempered
from attnmem.data.patterns import make_probes, random_patterns
from attnmem.models.hopfield import Hopfield, async_sweep, energy, hebbian, sync_step
from attnmem.models.modern_hopfield import ModernHopfield


def test_hebbian_weights_by_hand():
    patterns = torch.tensor([[1.0, -1.0, 1.0], [1.0, 1.0, -1.0]])
    # w_01 = (1·-1 + 1·1)/3 = 0, w_02 = (1·1 + 1·-1)/3 = 0, w_12 = (-1·1 + 1·-1)/3 = -2/3; w_ii = 0
    expected = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, -2 / 3], [0.0, -2 / 3, 0.0]])
    torch.testing.assert_close(hebbian(patterns), expected)
    net = Hopfield(size=3)
    net.store(patterns)
    torch.testing.assert_close(net.weights, expected)
    assert torch.equal(net.weights, net.weights.T)


def test_energy_by_hand():
    weights = torch.tensor([[0.0, 0.5], [0.5, 0.0]])
    bias = torch.tensor([0.25, -1.0])
    states = torch.tensor([[1.0, -1.0], [1.0, 1.0]])
    # E = -½ sᵀWs - bᵀs: [-½(2·0.5·-1) - (0.25 + 1), -½(2·0.5) - (0.25 - 1)] = [-0.75, 0.25]
    torch.testing.assert_close(energy(weights, bias, states), torch.tensor([-0.75, 0.25]))


def test_field_zero_gives_plus_one():
    weights = torch.zeros(2, 2)
    states = torch.tensor([[-1.0, -1.0]])
    assert async_sweep(weights, torch.zeros(2), states, torch.arange(2)).item()
    assert torch.equal(states, torch.ones(1, 2))
    assert torch.equal(sync_step(weights, torch.zeros(2), -torch.ones(1, 2)), torch.ones(1, 2))


def test_energy_never_rises_at_any_async_unit_update():
    generator = torch.Generator().manual_seed(0)
    for trial in range(40):  # many random networks: random symmetric weights with w_ii = 0 and a bias
        n = 12 + trial % 5
        weights = torch.randn(n, n, generator=generator)
        weights = (weights + weights.T).fill_diagonal_(0.0)
        bias = torch.randn(n, generator=generator)
        states = torch.randint(0, 2, (16, n), generator=generator).float() * 2 - 1
        before = energy(weights, bias, states)
        for _ in range(3):
            for unit in torch.randperm(n, generator=generator):
                async_sweep(weights, bias, states, unit.view(1))  # one unit of every probe
                after = energy(weights, bias, states)
                assert (after <= before + 1e-5).all(), (trial, int(unit))
                before = after


def test_async_reaches_a_fixed_point_and_reports_monotone_energy():
    torch.manual_seed(0)
    patterns = random_patterns(30, 100, generator=torch.Generator().manual_seed(1))  # α = 0.3: spurious states
    net = Hopfield(size=100, update="async", max_steps=200)
    net.store(patterns)
    out = net.retrieve(patterns)
    assert (out.energy.diff(dim=-1) <= 1e-4).all()
    assert torch.equal(sync_step(net.weights, net.bias, out.pred), out.pred)  # no unit wants to change
    assert out.steps.max() < out.energy.shape[1]


def test_sync_ends_at_a_fixed_point_or_a_two_cycle():
    generator = torch.Generator().manual_seed(2)
    patterns = random_patterns(40, 64, generator=generator)
    net = Hopfield(size=64, update="sync", max_steps=500)
    net.store(patterns)
    probes = random_patterns(50, 64, generator=generator)
    out = net.retrieve(probes)
    assert out.steps.max() < 500
    after_one = sync_step(net.weights, net.bias, out.pred)
    after_two = sync_step(net.weights, net.bias, after_one)
    assert torch.equal(after_two, out.pred)  # period 1 or 2
    assert (after_one != out.pred).any(), "expected some probe in a 2-cycle at this load"


def test_sync_two_cycle_by_hand():
    # two units that each want the other's opposite sign... w_01 = -1 flips both at once, forever
    net = Hopfield(size=2, update="sync", max_steps=10)
    net.weights.copy_(torch.tensor([[0.0, -1.0], [-1.0, 0.0]]))
    net.stored.fill_(True)
    out = net.retrieve(torch.tensor([[1.0, 1.0]]))
    assert out.energy.shape[1] == 3  # detected after two steps, not run to max_steps
    assert out.steps.item() == 1


def test_classical_retrieves_below_capacity_from_noisy_probes():
    generator = torch.Generator().manual_seed(0)
    patterns = random_patterns(5, 200, generator=generator)  # α = 0.025
    targets = torch.arange(5).repeat(4)
    probes = make_probes(patterns, targets, noise=0.1, mask=0.1, generator=generator)
    net = Hopfield(size=200)
    out = net({"probes": probes, "targets": targets, "patterns": patterns})
    assert torch.equal(out.pred, patterns[targets])


def test_modern_recalls_1024_patterns_in_64_units_in_one_step():
    generator = torch.Generator().manual_seed(0)
    patterns = random_patterns(1024, 64, generator=generator)  # α = 16
    targets = torch.arange(1024)
    probes = make_probes(patterns, targets, noise=0.1, mask=0.0, generator=generator)
    net = ModernHopfield(size=64, num_patterns=1024, score=Dot, beta=8.0, update_steps=1)
    out = net({"probes": probes, "targets": targets, "patterns": patterns})
    recall = (torch.where(out.pred >= 0, 1.0, -1.0) == patterns).all(-1).float().mean()
    assert recall >= 0.99
    assert len(out.attention) == 1 and out.attention[0].shape == (1024, 1024)
    assert out.scores.shape == (1024, 1024)


def test_modern_update_and_energy_by_hand():
    patterns = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    net = ModernHopfield(size=2, num_patterns=2, score=Dot, beta=2.0, update_steps=1)
    net.store(patterns)
    probe = torch.tensor([[1.0, 0.5]])
    out = net.retrieve(probe)
    p = torch.softmax(torch.tensor([2.0, 1.0]), 0)  # β Xᵀξ = 2·[1, 0.5]
    torch.testing.assert_close(out.pred, p.view(1, 2))
    # E = -β⁻¹ lse(β Xᵀξ) + ½ ξᵀξ + β⁻¹ log K + ½ M²
    e0 = -math.log(math.exp(2) + math.exp(1)) / 2 + 0.5 * 1.25 + math.log(2) / 2 + 0.5
    assert out.energy[0, 0].item() == pytest.approx(e0, rel=1e-5)
    assert out.energy[0, 1] <= out.energy[0, 0]


def test_modern_stops_when_converged():
    patterns = random_patterns(4, 32, generator=torch.Generator().manual_seed(0))
    net = ModernHopfield(size=32, num_patterns=4, score=Dot, beta=8.0, update_steps=10)
    net.store(patterns)
    out = net.retrieve(patterns)
    assert out.energy.shape[1] == 2 and out.steps.max() == 0  # already at the fixed points
    with_cosine = ModernHopfield(size=32, num_patterns=4, score=lambda **d: Cosine(**d, beta=1.0), beta=8.0)
    with_cosine.store(patterns)
    assert torch.allclose(with_cosine.retrieve(patterns).pred.sign(), patterns)


def test_pooling_and_layer_shapes_mask_and_gradients():
    pool = HopfieldPooling(6, score=Dot, quantity=2, hidden_size=4, output_size=5, update_steps_max=1)
    stored = torch.randn(3, 7, 6)
    padding = torch.zeros(3, 7, dtype=torch.bool)
    padding[:, 5:] = True
    pooled, weights = pool(stored, padding, return_association=True)
    assert pooled.shape == (3, 2 * 5) and weights.shape == (3, 1, 2, 7)
    assert torch.equal(weights[..., 5:], torch.zeros(3, 1, 2, 2))
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 1, 2))
    layer = HopfieldLayer(6, quantity=9, score=Dot, output_size=3, lookup_weights_as_separated=True)
    out, weights = layer(stored, return_association=True)
    assert out.shape == (3, 7, 3) and weights.shape == (3, 1, 7, 9)
    (pooled.sum() + out.sum()).backward()
    assert pool.pooling_weights.grad is not None and layer.lookup_weights.grad is not None
    assert layer.target_weights.grad is not None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"size": 1}, "size"), ({"size": 8, "update": "both"}, "update"), ({"size": 8, "order": "x"}, "order"),
     ({"size": 8, "max_steps": 0}, "max_steps")],
)
def test_hopfield_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Hopfield(**kwargs)


def test_modern_bad_options():
    with pytest.raises(ValueError, match="beta"):
        ModernHopfield(size=4, num_patterns=2, score=Dot, beta=0.0)
    with pytest.raises(ValueError, match="update_steps"):
        ModernHopfield(size=4, num_patterns=2, score=Dot, update_steps=0)
    with pytest.raises(ValueError, match="num_patterns, size"):
        ModernHopfield(size=4, num_patterns=2, score=Dot).store(torch.ones(3, 4))


def test_modern_retrieval_skips_energies_while_training_and_reuses_each_states_similarities():
    torch.manual_seed(0)
    net = ModernHopfield(size=16, num_patterns=4, score=Dot, beta=0.5, update_steps=3)
    patterns = torch.randn(4, 16).sign()
    net.store(patterns)
    probes = patterns * torch.where(torch.rand(4, 16) < 0.3, -1.0, 1.0)
    full, fast = net.retrieve(probes), net.retrieve(probes, energies=False)
    assert fast.energy is None and torch.equal(fast.pred, full.pred) and torch.equal(fast.steps, full.steps)
    assert full.energy.shape == (4, len(full.attention) + 1)
    assert torch.allclose(full.energy[:, 0], net.energy(probes)) and torch.allclose(full.energy[:, -1], net.energy(full.pred))
    batch = {"probes": probes, "patterns": patterns}
    assert net.train()(batch).energy is None and net.eval()(batch).energy is not None


@pytest.mark.parametrize("score_cls", [Dot, Bilinear, Cosine, Additive])
def test_tempered_is_beta_times_the_score_in_values_and_gradients(score_cls):
    torch.manual_seed(0)
    score = score_cls(query_dim=4, key_dim=4)
    tempered = Tempered(score, 3.0)
    assert tempered.scales_query == getattr(score_cls, "linear_in_query", False)  # Dot, Bilinear: β scales q
    query, keys = torch.randn(2, 3, 4, requires_grad=True), torch.randn(2, 5, 4)
    got, want = tempered(query, keys), 3.0 * score(query, keys)  # (2, 3, 5)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-5)
    inputs, upstream = [query, *score.parameters()], torch.randn_like(got)
    for g, w in zip(torch.autograd.grad(got, inputs, upstream), torch.autograd.grad(want, inputs, upstream)):
        torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-5)


def test_modern_one_step_is_the_bare_update_in_values_and_gradients():
    torch.manual_seed(0)
    patterns, probes = torch.randn(64, 16).sign(), torch.randn(8, 16)
    net = ModernHopfield(size=16, num_patterns=64, score=Bilinear, beta=8.0).train()
    out = net({"probes": probes, "patterns": patterns})
    weight = net.score.score.weight
    logits = 8.0 * probes @ weight @ patterns.T  # (B, K) β (qW) Xᵀ
    pred = torch.softmax(logits, -1) @ patterns  # (B, N)
    torch.testing.assert_close(out.scores, logits, rtol=0, atol=0)
    torch.testing.assert_close(out.attention[0], torch.softmax(logits, -1), rtol=0, atol=0)
    torch.testing.assert_close(out.pred, pred, rtol=0, atol=0)
    assert out.energy is None and out.steps.dtype == torch.long
    assert torch.equal(out.steps, ((pred - probes).norm(dim=-1) >= net.eps).long())
    (got,) = torch.autograd.grad(out.pred.square().sum() + out.scores.logsumexp(-1).sum(), weight)
    (want,) = torch.autograd.grad(pred.square().sum() + logits.logsumexp(-1).sum(), weight)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_modern_steps_count_the_updates_that_moved_each_probe():
    torch.manual_seed(0)
    patterns = torch.randn(6, 16).sign()
    probes = torch.cat([patterns[:2], torch.randn(3, 16)])  # two fixed points, three that move
    net = ModernHopfield(size=16, num_patterns=6, score=Dot, beta=2.0, update_steps=4)
    net.store(patterns)
    states, steps, weights = probes, torch.zeros(5, dtype=torch.long), []
    for _ in range(4):  # eq. 3 by hand, stopping once no probe moves
        weights.append(torch.softmax(2.0 * states @ patterns.T, -1))
        new = weights[-1] @ patterns
        moving = (new - states).norm(dim=-1) >= net.eps
        steps, states = steps + moving, new
        if not moving.any():
            break
    for out in (net.retrieve(probes), net.retrieve(probes, energies=False)):
        assert torch.equal(out.steps, steps) and len(out.attention) == len(weights)
        torch.testing.assert_close(out.pred, states, rtol=1e-6, atol=1e-6)
    assert steps.tolist()[:2] == [0, 0] and (steps[2:] > 0).all()


def test_modern_scores_and_states_stay_float32_under_autocast():
    torch.manual_seed(0)
    patterns, probes = torch.randn(32, 8).sign(), torch.randn(4, 8)
    net = ModernHopfield(size=8, num_patterns=32, score=Bilinear, beta=8.0, update_steps=2)
    net.store(patterns)
    plain = net.retrieve(probes)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = net.retrieve(probes)
    assert mixed.scores.dtype == mixed.pred.dtype == mixed.energy.dtype == torch.float32
    assert torch.equal(mixed.scores, plain.scores)  # β·score ran with autocast off
