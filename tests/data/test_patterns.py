"""Patterns datamodule: sizes, seeding, probes with exact noise and mask counts, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnmem.core.dims import PatternsDims
from attnmem.core.errors import UserError
from attnmem.data.patterns import PatternsDataModule, make_probes, random_patterns


def test_load_sets_the_number_of_patterns_and_num_patterns_replaces_it():
    dm = PatternsDataModule(size=200, load=0.138)
    dm.setup()
    assert dm.dims == PatternsDims(size=200, num_patterns=28)  # round(0.138·200)
    dm = PatternsDataModule(size=200, load=0.138, num_patterns=5)
    dm.setup()
    assert dm.patterns.shape == (5, 200)


def test_batches_carry_patterns_probes_and_targets_and_are_seeded():
    dm = PatternsDataModule(size=50, num_patterns=4, noise=0.2, probes_per_pattern=3, batch_size=5, seed=7)
    dm.setup()
    batch = next(iter(dm.val_dataloader()))
    assert batch["patterns"].shape == (4, 50) and batch["probes"].shape == (5, 50)
    assert batch["targets"].tolist() == [0, 1, 2, 3, 0]
    assert set(batch["patterns"].unique().tolist()) == {-1.0, 1.0}
    again = PatternsDataModule(size=50, num_patterns=4, noise=0.2, probes_per_pattern=3, batch_size=5, seed=7)
    again.setup()
    assert torch.equal(again.patterns, dm.patterns) and torch.equal(again.splits["test"]["probes"],
                                                                    dm.splits["test"]["probes"])
    assert not torch.equal(dm.splits["val"]["probes"], dm.splits["test"]["probes"])  # fresh noise per split


def test_probes_flip_and_mask_exact_fractions():
    generator = torch.Generator().manual_seed(0)
    patterns = random_patterns(3, 40, generator=generator)
    targets = torch.tensor([0, 1, 2, 2])
    probes = make_probes(patterns, targets, noise=0.1, mask=0.25, generator=generator)
    stored = patterns[targets]
    assert ((probes == -stored).sum(-1) == 4).all()  # round(0.1·40) flipped
    assert ((probes == 0).sum(-1) == 10).all()  # round(0.25·40) masked, disjoint from the flips
    assert ((probes == stored).sum(-1) == 26).all()


def test_bias_sets_the_fraction_of_plus_ones():
    patterns = random_patterns(100, 100, bias=0.8, generator=torch.Generator().manual_seed(0))
    assert (patterns == 1).float().mean().item() == pytest.approx(0.8, abs=0.02)


def test_patterns_from_a_file(tmp_path):
    path = tmp_path / "p.npy"
    np.save(path, np.array([[0, 1, 1], [1, 0, 0]]))
    dm = PatternsDataModule(path=str(path), noise=0.0)
    dm.setup()
    assert dm.dims == PatternsDims(size=3, num_patterns=2)
    assert dm.patterns.tolist() == [[-1.0, 1.0, 1.0], [1.0, -1.0, -1.0]]
    assert dm.data_files == [path]


def test_a_file_with_other_values_is_one_line_naming_file_and_value(tmp_path):
    path = tmp_path / "bad.npy"
    np.save(path, np.array([[1, -1, 2]]))
    dm = PatternsDataModule(path=str(path))
    with pytest.raises(UserError, match=r"bad\.npy.*found 2"):
        dm.setup()
    np.save(path, np.array([[0, -1]]))  # 0/1 and ±1 mixed
    with pytest.raises(UserError, match=r"bad\.npy.*found 0"):
        PatternsDataModule(path=str(path)).setup()


def test_bad_options():
    with pytest.raises(UserError, match="data.load must be > 0"):
        PatternsDataModule(load=0.0)
    with pytest.raises(ValueError, match="data.size"):
        PatternsDataModule(size=1)
    with pytest.raises(ValueError, match="data.noise"):
        PatternsDataModule(noise=1.5)
    with pytest.raises(ValueError, match="data.mask"):
        PatternsDataModule(mask=-0.1)
    with pytest.raises(ValueError, match="data.noise \\+ data.mask"):
        PatternsDataModule(noise=0.6, mask=0.6)
    assert PatternsDataModule(load=0.0, num_patterns=3).num_patterns == 3  # num_patterns replaces the load
