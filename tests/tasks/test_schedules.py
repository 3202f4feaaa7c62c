"""The Noam schedule: hand-computed rates, stepped per batch, reachable from the config; the plateau schedule."""

from __future__ import annotations

import pytest
import torch

from attnmem.core.errors import UserError
from attnmem.runtime import run
from attnmem.tasks import optim
from attnmem.tasks.schedules import noam, noam_factor, plateau


def test_noam_factor_by_hand():
    # d = 64: d^-0.5 = 1/8; warmup 4: warmup^-1.5 = 1/8
    assert noam_factor(1, d_model=64, warmup=4) == pytest.approx(1 / 8 * 1 / 8)  # rising: step · warmup^-1.5
    assert noam_factor(4, d_model=64, warmup=4) == pytest.approx(1 / 8 * 1 / 2)  # the peak, both terms equal
    assert noam_factor(16, d_model=64, warmup=4) == pytest.approx(1 / 8 * 1 / 4)  # decaying: step^-0.5


def test_noam_lr_follows_the_optimizer_steps_times_the_factor():
    weight = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([weight], lr=2.0)
    config = noam(optimizer, d_model=64, warmup=4)
    assert config["interval"] == "step"
    rates = []
    for _ in range(5):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        config["scheduler"].step()
    # step 1..5: 2 · 1/8 · min(s^-0.5, s/8)
    assert rates == pytest.approx([2 / 8 * min(s**-0.5, s / 8) for s in range(1, 6)])


def test_bad_noam_options():
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    with pytest.raises(ValueError, match="d_model and warmup must be >= 1"):
        noam(optimizer, d_model=64, warmup=0)


def test_configure_passes_a_scheduler_dict_through_and_wraps_a_plain_scheduler():
    params = [torch.nn.Parameter(torch.zeros(1))]
    built = optim.configure(params, torch.optim.SGD, lambda optimizer: noam(optimizer, d_model=4, warmup=2))
    assert built["lr_scheduler"]["interval"] == "step"
    plain = optim.configure(params, torch.optim.SGD, lambda optimizer: torch.optim.lr_scheduler.StepLR(optimizer, 1))
    assert set(plain["lr_scheduler"]) == {"scheduler"}  # Lightning's default: per epoch


def test_a_plateau_schedule_names_its_metric_and_a_bare_one_is_refused_in_one_line():
    params = [torch.nn.Parameter(torch.zeros(1))]
    built = optim.configure(params, torch.optim.SGD, lambda optimizer: plateau(optimizer, monitor="val/acc", mode="max"))
    assert built["lr_scheduler"]["monitor"] == "val/acc" and built["lr_scheduler"]["scheduler"].mode == "max"
    bare = torch.optim.lr_scheduler.ReduceLROnPlateau
    with pytest.raises(UserError) as err:
        optim.configure(params, torch.optim.SGD, bare)
    assert "attnmem.tasks.schedules.plateau" in str(err.value) and "\n" not in str(err.value)


def test_transformer_reverse_experiment_steps_noam_per_batch(compose_cfg):
    cfg = compose_cfg(
        "experiment=transformer_reverse", "data.source.num_train=64", "data.source.num_val=8", "data.source.num_test=8"
    )
    _, module, _ = run.setup(cfg)
    config = module.configure_optimizers()
    assert config["lr_scheduler"]["interval"] == "step"
    # lr factor 0.6, d = 64, warmup 100: the first step's rate
    assert config["optimizer"].param_groups[0]["lr"] == pytest.approx(0.6 * 64**-0.5 * 100**-1.5)
