"""What Lightning does around every hook, made cheaper without changing what it sees: the trainer's profiler, the
module's `_current_fx_name`, the callbacks' state keys and the step hooks' signatures."""

from __future__ import annotations

import functools
import inspect

import pytest
import torch
from conftest import FAST
from lightning.pytorch.callbacks import EarlyStopping as LightningEarlyStopping
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.profilers import SimpleProfiler
from lightning.pytorch.utilities.signature_utils import is_param_in_hook_signature
from torch import nn

from attnmem.callbacks.checkpoint import AtomicModelCheckpoint
from attnmem.callbacks.early_stopping import EarlyStopping
from attnmem.runtime import run
from attnmem.runtime.profiler import NoProfiler
from attnmem.tasks import hooks


def test_the_default_trainer_profiles_nothing_and_a_named_profiler_still_profiles(compose_cfg, tmp_path):
    _, _, trainer = run.setup(compose_cfg(*FAST, "data.source.num_train=64"))
    assert type(trainer.profiler) is NoProfiler
    with trainer.profiler.profile("[LightningModule]QATask.training_step") as entered:
        assert entered is None
    _, _, trainer = run.setup(compose_cfg(*FAST, "data.source.num_train=64", "trainer.profiler=simple",
                                          run_dir=tmp_path / "simple"))
    assert isinstance(trainer.profiler, SimpleProfiler)
    with trainer.profiler.profile("some action"):
        pass
    assert "some action" in trainer.profiler.recorded_durations


def test_set_attribute_stores_the_hook_name_and_still_registers_modules_and_parameters(compose_cfg, monkeypatch):
    datamodule, module, trainer = run.setup(compose_cfg(*FAST, "data.source.num_train=64", "trainer.max_epochs=1"))
    assert type(module).__setattr__ is hooks.set_attribute
    # the hook name Lightning sets around each hook is what the hook reads, in training and in validation
    seen = []
    for name in ("training_step", "validation_step"):
        hook = getattr(module, name)
        monkeypatch.setattr(module, name, functools.wraps(hook)(
            lambda *args, hook=hook, **kwargs: seen.append(module._current_fx_name) or hook(*args, **kwargs)))
    trainer.fit(module, datamodule=datamodule)
    assert set(seen) == {"training_step", "validation_step"} and seen[-1] == "validation_step"
    # ... stored without nn.Module.__setattr__'s checks, which every other name still goes through
    checked, extra, checks = [], nn.Linear(2, 3), nn.Module.__setattr__

    def checking(self: nn.Module, name: str, value: object) -> None:
        checked.append(name)
        checks(self, name, value)

    monkeypatch.setattr(nn.Module, "__setattr__", checking)
    module._current_fx_name = "training_step"
    assert vars(module)["_current_fx_name"] == "training_step" and checked == []
    module._current_fx_name = None
    assert module._current_fx_name is None and checked == []
    module.extra = extra
    assert checked == ["extra"]
    module.scale = nn.Parameter(torch.ones(1))
    module.register_buffer("counts", torch.zeros(2))
    module.counts = torch.ones(2)
    names = dict(module.named_parameters())
    assert "extra.weight" in names and "scale" in names
    assert torch.equal(dict(module.named_buffers())["counts"], torch.ones(2))
    with pytest.raises(TypeError, match="cannot assign"):
        module.counts = [1.0, 2.0]  # nn.Module's own check is still made


@pytest.mark.parametrize(("ours", "lightnings"), [(AtomicModelCheckpoint, ModelCheckpoint),
                                                  (EarlyStopping, LightningEarlyStopping)])
def test_state_keys_are_lightnings_own(ours, lightnings):
    for monitor, mode in (("val/acc", "max"), ("train/error", "min")):
        callback = ours(monitor=monitor, mode=mode)
        assert callback.state_key == lightnings.state_key.fget(callback)
        assert monitor in callback.state_key and mode in callback.state_key
        assert callback.state_key is callback.state_key  # made once


@pytest.mark.parametrize("split", ["train", "val", "test"])
def test_step_hooks_keep_the_signature_lightning_reads(split):
    hook = hooks.step(split)
    stored = hook.__signature__
    del hook.__signature__
    assert stored == inspect.signature(hook)
    assert list(stored.parameters) == ["module", "batch", "batch_idx", "dataloader_idx"]
    hook.__signature__ = stored
    bound = hook.__get__(object())
    assert is_param_in_hook_signature(bound, "batch_idx", min_args=2)
    assert is_param_in_hook_signature(bound, "dataloader_idx", explicit=True)
