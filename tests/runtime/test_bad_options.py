"""Options a run would take badly: each is refused in one line naming it, before the run writes anything.

The optimizer, scheduler and trainer partials are type-checked against their constructors' hints, their numbers
must be finite (and some non-negative), the optimizer and scheduler are tried on one dummy weight, a misspelt
`_target_` lists the near names, the seed is numpy's range, and a model too big for the machine is measured on
the meta device and refused with the figure (`attnmem.runtime.option_types`, `attnmem.runtime.model_memory`).
"""

from __future__ import annotations

import random

import pytest
import torch
from conftest import FAST, cli_error, one_line

from attnmem.core.errors import UserError
from attnmem.runtime import cli, model_memory, run, run_dir_guard

TINY = [*FAST, "data.source.num_train=60", "data.source.num_val=20", "data.source.num_test=20", "trainer.max_epochs=1"]
STEP_LR = "scheduler={_target_:torch.optim.lr_scheduler.StepLR,_partial_:true}"


@pytest.mark.parametrize(("overrides", "error", "fragments"), [
    (["optimizer.lr=fast"], UserError, ["optimizer.lr=fast: expected a number (Adam takes lr as such)"]),
    (["+optimizer.betas=[0.9,fast]"], UserError, ["optimizer.betas=[0.9, 'fast']: expected a list of 2 items, each a number"]),
    (["+optimizer.betas=[0.9]"], UserError, ["optimizer.betas=[0.9]: expected a list of 2 items"]),
    (["+optimizer.amsgrad=maybe"], UserError, ["optimizer.amsgrad=maybe: expected a boolean"]),
    (["optimizer.lr=nan"], UserError, ["optimizer.lr=nan: expected a finite number"]),
    (["+optimizer.eps=inf"], UserError, ["optimizer.eps=inf: expected a finite number, not nan or inf"]),
    (["model.init_std=nan"], UserError, ["model.init_std=nan: expected a finite number, not nan (MemN2NQA"]),
    (["+optimizer.weight_decay=-1"], ValueError, ["optimizer.weight_decay must be >= 0, got -1"]),
    (["+optimizer.betas=[0.9,1.5]"], UserError, ["optimizer (torch.optim.Adam): Invalid beta parameter at index 1: 1.5"]),
    (["trainer.gradient_clip_val=fast"], UserError, ["trainer.gradient_clip_val=fast: expected an integer or a number"]),
    (["trainer.gradient_clip_val=-1"], ValueError,
     ["trainer.gradient_clip_val must be >= 0, got -1", "trainer.gradient_clip_val=null for no clipping"]),
    (["trainer.gradient_clip_val=-1", "+task.clip_per_weight=true"], ValueError,
     ["trainer.gradient_clip_val must be >= 0, got -1"]),
    (["trainer.gradient_clip_val=nan"], UserError, ["trainer.gradient_clip_val=nan: expected a finite number"]),
    ([STEP_LR], UserError, ["scheduler (torch.optim.lr_scheduler.StepLR):", "step_size"]),
    ([STEP_LR, "+scheduler.step_size=many"], UserError, ["scheduler.step_size=many: expected an integer (StepLR"]),
    (["seed=-1"], UserError, ["seed=-1: expected an integer from 0 to 4294967295", "seed=1"]),
    (["seed=4294967296"], UserError, ["seed=4294967296: expected an integer from 0 to 4294967295"]),
    (["optimizer._target_=torch.optim.Adamm"], UserError,
     ["optimizer._target_=torch.optim.Adamm: torch.optim has no Adamm; did you mean torch.optim.Adam"]),
    (["optimizer._target_=torhc.optim.Adam"], UserError, ["optimizer._target_=torhc.optim.Adam: no module named torhc"]),
    (["+callbacks.extra._target_=lightning.pytorch.callbacks.EarlyStoping"], UserError,
     ["callbacks.extra._target_=lightning.pytorch.callbacks.EarlyStoping: ", "EarlyStopping"]),
], ids=["lr-str", "betas-str", "betas-length", "bool", "lr-nan", "eps-inf", "model-nan", "weight-decay-negative", "betas-range",
        "clip-str", "clip-negative", "clip-negative-per-weight", "clip-nan", "scheduler-missing-option",
        "scheduler-option-str", "seed-negative", "seed-too-big", "target-class", "target-module", "target-callback"])
def test_a_bad_option_is_refused_in_one_line_before_anything_is_written(compose_cfg, tmp_path, overrides, error,
                                                                         fragments):
    with pytest.raises(error) as err:
        run.train(compose_cfg(*TINY, *overrides))
    one_line(str(err.value), *fragments)
    assert {p.name for p in (tmp_path / "run").iterdir()} <= run_dir_guard.BEFORE_A_RUN


@pytest.mark.parametrize("overrides", [
    ["optimizer.lr=0", "+optimizer.betas=[0.5,0.9]", "trainer.gradient_clip_val=0", "seed=4294967295"],
    ["optimizer._target_=torch.optim.SGD", "+optimizer.momentum=0.9", STEP_LR, "+scheduler.step_size=2"],
], ids=["adam", "sgd"])
def test_good_options_pass(compose_cfg, overrides):
    run.setup(compose_cfg(*TINY, *overrides))


def test_a_model_too_big_for_the_machine_is_refused_with_the_figure(compose_cfg):
    with pytest.raises(UserError) as err:  # 10**12 numbers a row: terabytes, measured on the meta device
        run.setup(compose_cfg(*TINY, "model.embed_dim=1000000000000"))
    one_line(str(err.value), "the model's parameters take", "GiB", "of shape (", "1000000000000)",
             "free on", "choose smaller model sizes")


def test_the_meta_build_leaves_the_random_generators_as_they_were():
    torch.manual_seed(3)
    before = torch.get_rng_state(), random.getstate()
    parameters = model_memory.parameters_on_meta(lambda: torch.nn.Linear(4, int(random.random() * 3) + 3))
    assert parameters is not None and [p.device.type for _, p in parameters] == ["meta", "meta"]
    assert torch.equal(torch.get_rng_state(), before[0]) and random.getstate() == before[1]
    assert model_memory.parameters_on_meta(lambda: torch.nn.Linear(int(torch.ones(1).item()), 1)) is None


@pytest.mark.slow  # a subprocess: ~5 s of imports alone, 20 s on a loaded machine
def test_cli_non_finite_learning_rate_leaves_no_run_folder(tmp_path):
    one_line(cli_error(tmp_path, "optimizer.lr=nan", "data.source.num_train=60"), "optimizer.lr=nan: expected a finite")
    assert not (tmp_path / "cli").exists()


@pytest.mark.parametrize(("overrides", "fragments"), [
    (["+trainer.gradient_clip_algorithm=normm"], ["Trainer", "`gradient_clip_algorithm` normm is invalid", "trainer"]),
    (["+trainer.max_epoch=3"], ["Trainer", "unexpected keyword argument 'max_epoch'", "full_key: trainer"]),
], ids=["lightning-refuses", "unknown-keyword"])
def test_a_constructor_refusing_its_options_is_one_line(compose_cfg, capsys, overrides, fragments):
    with pytest.raises(SystemExit) as info:
        cli.guarded(compose_cfg(*TINY, "print_config=none", *overrides), "train")
    err = capsys.readouterr().err.strip().splitlines()
    assert info.value.code == 1 and err[-1].startswith("error: "), err
    one_line(err[-1], *fragments)
