"""Truncated BPTT (`task.tbptt_steps=k`): no gradient across a chunk boundary; k >= T is full BPTT step for step."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import FAST

from attnmem.attention import Cosine
from attnmem.core.errors import UserError
from attnmem.models.bptt_rnn import BPTTRNN
from attnmem.models.rnn_sequence import RNNSequence
from attnmem.runtime import run
from attnmem.tasks import tbptt
from attnmem.tasks.sequence_nets import NTMSequence

COPY = [
    "data=copy",
    "data.batch_size=4",
    "data.steps_per_epoch=3",
    "data.num_val=4",
    "data.num_test=4",
    "data.task.min_length=3",
    "data.task.max_length=3",
    "data.test_lengths=[]",
    "callbacks.plots=null",
    *FAST,
]
NETS = {
    "bptt_rnn": lambda: BPTTRNN(input_size=4, output_size=3, hidden_size=6),
    "rnn_sequence": lambda: RNNSequence(input_size=4, output_size=3, cell="lstm", hidden_size=6, num_layers=2),
    "ntm": lambda: NTMSequence(
        input_size=4, output_size=3, score=Cosine, controller_size=6, memory_locations=5, memory_width=3
    ),
}


@pytest.mark.parametrize("name", NETS)
def test_the_loss_of_a_chunk_has_exactly_zero_gradient_on_the_inputs_of_earlier_chunks(name):
    torch.manual_seed(0)
    net = NETS[name]()
    inputs = torch.randn(2, 10, 4, requires_grad=True)  # (B, T, I): chunks of 3, 3, 3, 1 steps
    batch = {"inputs": inputs, "targets": torch.rand(2, 10, 3), "mask": torch.ones(2, 10)}
    for c, (chunk, out) in enumerate(tbptt.run_chunks(net, batch, 3)):
        (grad,) = torch.autograd.grad(out.pred.sum(), inputs, retain_graph=True)
        assert torch.count_nonzero(grad[:, : 3 * c]) == 0  # every earlier step: exactly zero
        assert torch.count_nonzero(grad[:, 3 * c : 3 * c + chunk["inputs"].shape[1]]) > 0  # its own steps: not
    full = net(batch).pred  # untruncated, the last step depends on the first
    assert torch.count_nonzero(torch.autograd.grad(full[:, -1].sum(), inputs)[0][:, 0]) > 0


def test_the_state_is_carried_over_so_the_chunked_forward_equals_the_full_one():
    torch.manual_seed(0)
    net = NETS["rnn_sequence"]()
    batch = {"inputs": torch.randn(2, 10, 4), "targets": torch.rand(2, 10, 3), "mask": torch.ones(2, 10)}
    pieces = torch.cat([out.pred for _, out in tbptt.run_chunks(net, batch, 4)], 1)
    torch.testing.assert_close(pieces, net(batch).pred)


def _fit(compose_cfg, tmp_path, name, *overrides):
    cfg = compose_cfg("model=bptt_rnn", "model.hidden_size=8", *COPY, *overrides, run_dir=tmp_path / name)
    datamodule, module, trainer = run.setup(cfg)
    trainer.fit(module, datamodule)
    return module, trainer


SCHEDULES = {  # stepped by Lightning's loop without truncation, by attnmem.tasks.tbptt with it
    "per_epoch": "{_target_:torch.optim.lr_scheduler.StepLR,_partial_:true,step_size:1,gamma:0.5}",
    "per_step": "{_target_:attnmem.tasks.schedules.noam,_partial_:true,d_model:16,warmup:4}",
    # threshold 10 (relative): no epoch counts as better, so with patience 0 the rate halves at each epoch's end
    "plateau": "{_target_:attnmem.tasks.schedules.plateau,_partial_:true,factor:0.5,patience:0,threshold:10}",
}


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_chunks_as_long_as_the_sequence_train_exactly_as_full_bptt_step_for_step(compose_cfg, tmp_path, schedule):
    # gradient clipping and the scheduler go through the manual path too
    common = [
        "trainer.max_epochs=2",
        "trainer.gradient_clip_val=0.05",
        "optimizer.lr=0.01",
        f"scheduler={SCHEDULES[schedule]}",
    ]
    full, full_trainer = _fit(compose_cfg, tmp_path, "full", *common)
    chunked, chunked_trainer = _fit(compose_cfg, tmp_path, "chunked", *common, "+task.tbptt_steps=100")
    assert not chunked.automatic_optimization and full.automatic_optimization
    assert chunked_trainer.global_step == full_trainer.global_step == 6
    for (name, a), (_, b) in zip(full.net.named_parameters(), chunked.net.named_parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=0, atol=0, msg=name)
    keys = {k for k in full_trainer.logged_metrics if not k.endswith("_seconds")}
    assert {"train/loss", "val/bit_errors"} <= keys
    assert {k: full_trainer.logged_metrics[k] for k in keys} == {k: chunked_trainer.logged_metrics[k] for k in keys}
    lrs = [m.optimizers().param_groups[0]["lr"] for m in (full, chunked)]
    assert lrs[0] == lrs[1] != 0.01  # the same schedule steps
    if schedule in ("per_epoch", "plateau"):
        assert lrs[1] == pytest.approx(0.01 * 0.25)  # stepped at both epoch ends (the plateau on val/loss)


def test_short_chunks_make_one_step_per_chunk_with_output_bits(compose_cfg, tmp_path):
    module, trainer = _fit(
        compose_cfg, tmp_path, "short", "+task.tbptt_steps=2", "trainer.max_epochs=1", "data.steps_per_epoch=1"
    )
    batch = next(iter(trainer.datamodule.train_dataloader()))  # copy of 3 vectors: T = 7, chunks 2, 2, 2, 1
    pieces = tbptt.chunks(batch, 2)
    with_bits = sum(bool(c["mask"].any()) for c in pieces)  # t = 0..3 is input and delimiter: no loss, no step
    assert [c["inputs"].shape[1] for c in pieces] == [2, 2, 2, 1] and with_bits == 2 == trainer.global_step


def test_a_tiny_run_with_chunks_shorter_than_the_sequence_learns(compose_cfg, tmp_path):
    # copy of 2 vectors, T = 5, chunks of 2: the outputs at t = 3, 4 see the inputs at t = 0, 1 only through the
    # carried (detached) state; the loss falls all the same
    tiny = [
        "model.hidden_size=32",
        "+task.tbptt_steps=2",
        "optimizer.lr=0.02",
        "data.batch_size=16",
        "data.steps_per_epoch=10",
        "data.task.min_length=2",
        "data.task.max_length=2",
    ]
    losses = []
    for epochs in (1, 10):
        _, trainer = _fit(compose_cfg, tmp_path, f"learn{epochs}", *tiny, f"trainer.max_epochs={epochs}")
        losses.append(float(trainer.logged_metrics["train/loss"]))
    assert trainer.global_step == 10 * 10 * 2  # two chunks of three carry output bits
    assert losses[1] < 0.85 * losses[0], losses


def test_max_steps_counts_optimiser_steps_under_truncation(compose_cfg, tmp_path):
    _, trainer = _fit(compose_cfg, tmp_path, "limit", "+task.tbptt_steps=1", "trainer.max_steps=5")
    assert trainer.global_step == 5


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["+task.tbptt_steps=0"],
            "task.tbptt_steps=0: a chunk needs at least 1 step; set task.tbptt_steps=k with k >= 1",
        ),
        (
            ["model=transformer_sequence", "+task.tbptt_steps=4"],
            "task.tbptt_steps=4: TransformerSequence is not recurrent (it has no run_chunk/initial_state); use model=",
        ),
        (
            ["+task.tbptt_steps=4", "+trainer.accumulate_grad_batches=2"],
            "task.tbptt_steps=4 steps the optimiser once per chunk: trainer.accumulate_grad_batches=2 cannot go with it",
        ),
    ],
)
def test_misuse_stops_with_one_line_naming_the_option(compose_cfg, tmp_path, overrides, message):
    cfg = compose_cfg("model=bptt_rnn", *COPY, *overrides)
    with pytest.raises(UserError) as err:
        datamodule, module, trainer = run.setup(cfg)
        trainer.fit(module, datamodule)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_resumed_truncated_run_ends_as_one_that_never_stopped(compose_cfg, tmp_path):
    tiny = ["model=bptt_rnn", "model.hidden_size=8", *COPY, "+task.tbptt_steps=3", "trainer.gradient_clip_val=0.1"]
    run.train(compose_cfg(*tiny, "trainer.max_epochs=2", run_dir=tmp_path / "straight"))
    run.train(compose_cfg(*tiny, "trainer.max_epochs=1", run_dir=tmp_path / "stopped"))
    (tmp_path / "stopped" / "metrics.json").unlink()
    run.train(compose_cfg(*tiny, "trainer.max_epochs=2", "resume=auto", run_dir=tmp_path / "stopped"))
    straight, resumed = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("straight", "stopped"))
    assert straight["global_step"] == 2 * 3 * 2  # 2 epochs of 3 batches, 2 of the 3 chunks of T = 7 with output bits
    assert {k: v for k, v in straight.items() if not k.endswith("_seconds")} == {
        k: v for k, v in resumed.items() if not k.endswith("_seconds")
    }
