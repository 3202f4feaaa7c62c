"""Hetero-associative memory and BAM (Kosko 1988): storage by hand, recall below capacity, an energy that never rises."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import FAST

from attnmem.core.errors import UserError
from attnmem.data.patterns import PatternsDataModule
from attnmem.models.bam import BAM, bam_energy, threshold
from attnmem.models.hetero_associative import HeteroAssociative
from attnmem.runtime import run

X = torch.tensor([[1.0, -1.0, 1.0, -1.0], [1.0, 1.0, -1.0, -1.0]])  # (K=2, N=4), orthogonal
Y = torch.tensor([[1.0, 1.0, -1.0], [-1.0, 1.0, 1.0]])  # (K=2, M=3)


def test_outer_product_storage_and_one_read_by_hand():
    net = HeteroAssociative(size=4, partner_size=3)
    net.store(X, Y)
    # W = y₁x₁ᵀ + y₂x₂ᵀ, entry (i, j) = Σₖ yₖᵢ xₖⱼ
    expected = torch.tensor([[0.0, -2.0, 2.0, 0.0], [2.0, 0.0, 0.0, -2.0], [0.0, 2.0, -2.0, 0.0]])
    torch.testing.assert_close(net.weights, expected)
    probe = torch.tensor([[1.0, -1.0, 1.0, 1.0]])  # x₁ with its last bit flipped: W x = (4, 0, -4)
    assert net.recall(probe).pred.tolist() == [[1.0, 1.0, -1.0]]  # y₁; the zero field reads +1
    assert net.recall(X).pred.tolist() == Y.tolist()


def test_threshold_keeps_the_previous_state_on_a_zero_field():
    field, previous = torch.tensor([2.0, -3.0, 0.0, 0.0]), torch.tensor([-1.0, 1.0, -1.0, 1.0])
    assert threshold(field, previous).tolist() == [1.0, -1.0, -1.0, 1.0]


def test_bam_energy_never_rises_at_any_half_step_and_the_run_reports_it():
    dm = PatternsDataModule(size=60, num_patterns=20, partner_size=40, noise=0.3, probes_per_pattern=10, seed=1)
    dm.setup()  # far above capacity, so probes wander for several steps
    batch = next(iter(dm.test_dataloader()))
    net = BAM(size=60, partner_size=40)
    out = net(batch)
    assert (out.energy.diff(dim=-1) <= 0).all() and out.steps.max() >= 2
    w, x = net.weights, batch["probes"]  # the same alternation by hand, the energy checked after every half step
    y = threshold(x @ w.T, torch.ones(len(x), 40))
    energies = [bam_energy(w, x, y)]
    for _ in range(int(out.steps.max()) + 1):
        x = threshold(y @ w, x)
        energies.append(bam_energy(w, x, y))
        y = threshold(x @ w.T, y)
        energies.append(bam_energy(w, x, y))
    assert (torch.stack(energies, -1).diff(dim=-1) <= 0).all()
    assert torch.equal(y, out.pred)  # settled where the model settled
    torch.testing.assert_close(energies[-1], out.energy[:, -1])


@pytest.mark.parametrize("pairs", [2, 5])
def test_bam_recalls_at_least_99_percent_below_its_capacity_from_10_percent_flipped_bits(pairs):
    recalled = []
    for seed in range(3):
        dm = PatternsDataModule(
            size=100,
            num_patterns=pairs,
            partner_size=100,
            noise=0.1,
            probes_per_pattern=20,
            seed=seed,
            batch_size=10_000,
        )
        dm.setup()
        batch = next(iter(dm.test_dataloader()))
        out = BAM(size=100, partner_size=100)(batch)
        recalled.append((out.pred == batch["pairs"][batch["targets"]]).all(-1).float().mean())
        assert (out.energy.diff(dim=-1) <= 0).all()
    assert torch.stack(recalled).mean() >= 0.99


def test_pairs_are_seeded_and_leave_the_patterns_and_probes_of_a_seed_as_they_were():
    plain = PatternsDataModule(size=30, num_patterns=4, noise=0.2, seed=3)
    paired = PatternsDataModule(size=30, num_patterns=4, noise=0.2, seed=3, partner_size=7)
    plain.setup()
    paired.setup()
    assert torch.equal(plain.patterns, paired.patterns)
    assert torch.equal(plain.splits["val"]["probes"], paired.splits["val"]["probes"])
    batch = next(iter(paired.val_dataloader()))
    assert batch["pairs"].shape == (4, 7) and paired.dims.partner_size == 7 and plain.dims.partner_size == 0
    assert "pairs" not in next(iter(plain.val_dataloader()))


def test_mismatched_pair_counts_stop_with_one_line_naming_the_option(tmp_path):
    path = tmp_path / "y.npy"
    np.save(path, np.ones((3, 5)))
    dm = PatternsDataModule(size=10, num_patterns=4, pairs_path=str(path))
    with pytest.raises(UserError, match=r"data.pairs_path=.*3 partners for 4 stored patterns: give one row per"):
        dm.setup()
    with pytest.raises(ValueError, match="BAM: 2 patterns x but 1 partners y: store one partner y per pattern x"):
        BAM(size=4, partner_size=3).store(X, Y[:1])


def test_a_memory_on_data_without_partners_names_the_option(compose_cfg):
    cfg = compose_cfg("model=bam", "data=patterns", "data.size=16")
    with pytest.raises(ValueError, match=r"^BAM: partner_size=0: there are no partners y to recall; build it with partner_size=M \(in a run: "
                       r"data.partner_size=M"):
        run.setup(cfg)


@pytest.mark.parametrize("model", ["bam", "hetero_associative"])
def test_a_run_on_pairs_writes_recall_and_bit_accuracy(compose_cfg, tmp_path, model):
    cfg = compose_cfg(f"model={model}", "data.size=64", "data.partner_size=32", "data.num_patterns=3", *FAST)
    assert cfg.data.partner_size == 32  # data=pairs, the models' natural data
    run.train(cfg)
    out = tmp_path / "run"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["test/recall"] == 1.0 and metrics["test/bit_accuracy"] == 1.0 and metrics["params"] == 0
    assert ("test/energy_monotone" in metrics) == (model == "bam")
    assert "patterns.png" in {p.name for p in (out / "plots").iterdir()}
