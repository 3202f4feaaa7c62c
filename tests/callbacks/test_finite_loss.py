"""Training stops at the first non-finite loss with one line; the last good checkpoint stays on disk."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import FAST

from attnmem.core.errors import UserError
from attnmem.runtime import checkpoint, run
from attnmem.tasks import qa

TINY = [*FAST, "data.source.num_train=200", "data.source.num_val=20", "data.source.num_test=20", "data.batch_size=32"]


def test_nan_loss_stops_with_the_step_the_last_finite_loss_and_the_checkpoint(compose_cfg, tmp_path, monkeypatch):
    step_of = qa.QATask.training_step

    def nan_from_step_10(self, batch, batch_idx):
        loss = step_of(self, batch, batch_idx)
        return loss * math.nan if self.global_step >= 10 else loss

    monkeypatch.setattr(qa.QATask, "training_step", nan_from_step_10)
    with pytest.raises(UserError) as err:
        run.train(compose_cfg(*TINY, "trainer.max_epochs=5"))  # 7 steps per epoch: step 11 is in epoch 1
    message = str(err.value)
    assert "\n" not in message
    assert "the loss is nan at step 11 (epoch 1)" in message
    assert "the last finite loss was" in message and "at step 10" in message
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert f"the last good checkpoint is {last}" in message
    assert "trainer.gradient_clip_val" in message and "optimizer.lr" in message
    state = checkpoint.load(last)
    assert state["global_step"] == 7  # the end of epoch 0: the bad step never reached a checkpoint
    assert all(torch.isfinite(v).all() for v in state["state_dict"].values() if v.is_floating_point())
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_a_diverging_learning_rate_is_caught(compose_cfg, tmp_path):
    with pytest.raises(UserError, match=r"training stopped: the loss is (nan|inf) at step \d+ .*gradient_clip_val"):
        run.train(compose_cfg(*TINY, "trainer.max_epochs=2", "optimizer.lr=1e30"))
    assert not (tmp_path / "run" / "metrics.json").exists()
