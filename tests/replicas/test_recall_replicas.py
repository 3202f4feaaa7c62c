"""`replicas=R` of the `recall` family's MixerLM: one batched `vmap` whose replicas each train as their seed's
single run (the helpers of `test_replicas.py`)."""

from __future__ import annotations

import pytest
import torch
from conftest import FAST
from test_replicas import train, worst_gap

import attnmem
from attnmem.replicas.batch import Batched
from attnmem.replicas.models import TensorVmapped

# 64 sequences in batches of 16: 4 steps an epoch, 8 in all
RECALL = [*FAST, "data.source.vocab_size=16", "data.source.seq_len=16", "data.source.num_kv_pairs=2",
          "data.num_train=64", "data.num_val=16", "data.num_test=16", "~data.test_sets", "data.batch_size=16",
          "model.d_model=8", "model.max_len=16", "trainer.max_epochs=2", "trainer.max_steps=8",
          "trainer.val_check_interval=1.0", "callbacks.plots=null"]


@pytest.mark.parametrize(("experiment", "path"), [
    (["experiment=mqar_attention"], "one batched vmap"),
    (["experiment=mqar_selective_ssm", "model.mixer_options={d_state:2}"], "one batched vmap"),
    (["experiment=mqar_lstm"], "a loop"),  # `nn.LSTM` has no vmap batching rule
])
def test_recall_replicas_reproduce_single_runs(experiment, path, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(TensorVmapped, "on_cpu", True)  # batched on this CPU too (by default it loops there)
    tiny = [*experiment, *RECALL]
    steps, metrics = train(tmp_path / "replicas", *tiny, "replicas=2")
    assert path in capsys.readouterr().out
    for r in range(2):
        single_steps, single = train(tmp_path / f"seed{r}", *tiny, f"seed={r}")
        assert worst_gap(steps, single_steps, r, steps=8) < 1e-5
        assert metrics[f"replicas/{r}/val/acc"] == single["val/acc"]
        assert metrics[f"replicas/{r}/val/loss"] == pytest.approx(single["val/loss"], rel=1e-5)
        model = attnmem.load_run(tmp_path / "replicas", replica=r).model
        expected = attnmem.load_run(tmp_path / f"seed{r}").model
        for (name, p), q in zip(model.state_dict().items(), expected.state_dict().values()):
            # attention's key bias shifts every score of a row alike, which softmax ignores: its gradient is rounding
            # error, which Adam's steps scale up to about lr either way
            if not name.endswith("k_proj.bias"):
                torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=name)


def test_recall_replicas_loop_on_a_cpu_by_default(tmp_path, capsys, monkeypatch):
    calls = []
    monkeypatch.setattr(Batched, "__call__", lambda self, *args: calls.append(args))  # would break the run if called
    train(tmp_path / "replicas", "experiment=mqar_attention", *RECALL, "replicas=2")
    assert "one batched vmap on an accelerator (on a CPU a loop, faster there)" in capsys.readouterr().out
    assert calls == []
