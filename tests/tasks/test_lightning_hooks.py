"""What Lightning does around every hook, made cheaper without changing what it sees: the trainer's profiler and the
callbacks' state keys (the step hooks' signatures: tests/tasks/test_family.py)."""

from __future__ import annotations

import pytest
from conftest import FAST
from lightning.pytorch.callbacks import EarlyStopping as LightningEarlyStopping
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.profilers import SimpleProfiler

from attnmem.callbacks.checkpoint import AtomicModelCheckpoint
from attnmem.callbacks.early_stopping import EarlyStopping
from attnmem.runtime import run
from attnmem.runtime.profiler import NoProfiler


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


@pytest.mark.parametrize(("ours", "lightnings"), [(AtomicModelCheckpoint, ModelCheckpoint),
                                                  (EarlyStopping, LightningEarlyStopping)])
def test_state_keys_are_lightnings_own(ours, lightnings):
    for monitor, mode in (("val/acc", "max"), ("train/error", "min")):
        callback = ours(monitor=monitor, mode=mode)
        assert callback.state_key == lightnings.state_key.fget(callback)
        assert monitor in callback.state_key and mode in callback.state_key
        assert callback.state_key is callback.state_key  # made once
