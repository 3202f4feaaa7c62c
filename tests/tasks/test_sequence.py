"""The sequence family: metrics by hand, generalisation keys, the pipeline on copy, compatibility, plots."""

from __future__ import annotations

import json
import math

import pytest
import torch
from conftest import FAST
from torch import Tensor, nn

from attnmem.blocks.output import Output
from attnmem.core.dims import SequenceDims
from attnmem.core.errors import UserError
from attnmem.runtime import run
from attnmem.tasks.sequence import SequenceTask

TINY = [*FAST, "data.batch_size=4", "data.steps_per_epoch=3", "data.num_val=8", "data.num_test=4",
        "data.task.max_length=3", "data.test_lengths=[5]", "trainer.max_epochs=1"]


class Fixed(nn.Module):
    """Logits from the targets: `scale · (2 y - 1)`, with the first bit of every step flipped when `flip`."""

    def __init__(self, scale: float, flip: bool = False) -> None:
        super().__init__()
        self.scale, self.flip = scale, flip
        self.bias = nn.Parameter(torch.zeros(()))

    def forward(self, batch: dict[str, Tensor]) -> Output:
        logits = self.scale * (2 * batch["targets"] - 1) + self.bias
        if self.flip:
            logits[..., 0] = -logits[..., 0]
        return Output(pred=logits)


def batch() -> dict[str, Tensor]:
    targets = torch.zeros(2, 4, 3)
    targets[0, 2:] = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    targets[1, 3] = torch.tensor([1.0, 1.0, 0.0])
    mask = torch.tensor([[False, False, True, True], [False, False, False, True]])
    return {"inputs": torch.zeros(2, 4, 2), "targets": targets, "mask": mask}


def metrics(net: nn.Module) -> dict[str, float]:
    task = SequenceTask(net, optimizer=torch.optim.Adam, dims=SequenceDims(input_size=1, output_size=1))
    logged = {}
    task.log_dict = lambda values, **kw: logged.update({k: float(v) for k, v in values.items()})
    task.validation_step(batch(), 0)
    task.on_validation_epoch_end()
    return logged


def test_zero_logits_cost_one_bit_per_bit_and_err_on_every_one():
    got = metrics(Fixed(0.0))
    assert got["val/cost"] == pytest.approx((6 + 3) / 2)  # 9 masked bits over 2 sequences, 1 bit each
    assert got["val/loss"] == pytest.approx(math.log(2))
    assert got["val/bit_errors"] == pytest.approx((4 + 2) / 2)  # p = .5 is not > .5: every 1 is an error
    assert got["val/exact_match"] == 0.0


def test_flipped_bits_count_on_the_output_phase_only():
    got = metrics(Fixed(20.0, flip=True))
    assert got["val/bit_errors"] == pytest.approx((2 + 1) / 2)  # one flipped bit per masked step
    assert got["val/exact_match"] == 0.0
    perfect = metrics(Fixed(20.0))
    assert perfect["val/bit_errors"] == 0.0 and perfect["val/exact_match"] == 1.0 and perfect["val/cost"] < 1e-6


def test_training_step_loss_is_masked_bce_per_bit():
    task = SequenceTask(Fixed(0.0), optimizer=torch.optim.Adam, dims=SequenceDims(input_size=1, output_size=1))
    assert task.training_step(batch(), 0).item() == pytest.approx(math.log(2))


@pytest.mark.parametrize("model", ["ntm", "dnc", "rnn_sequence"])
def test_train_reports_generalisation_lengths_and_plots(compose_cfg, tmp_path, model):
    overrides = ["model.controller_size=8", "model.memory_locations=8"] if model in ("ntm", "dnc") else [
        "model.num_layers=1", "model.hidden_size=8"]
    result = run.train(compose_cfg(f"model={model}", *TINY, *overrides))
    out = tmp_path / "run"
    got = json.loads((out / "metrics.json").read_text())
    for key in ("val/bit_errors", "val/cost", "val/exact_match", "test/bit_errors", "test/len5/bit_errors",
                "test/len5/exact_match", "train/loss"):
        assert key in got, key
    assert result == got["val/bit_errors"] and got["global_step"] == 3
    assert (out / "plots" / "sequence_0.png").is_file()
    assert (out / "plots" / "memory_0.png").is_file() == (model == "dnc")  # usage and links: the DNC's own


def test_another_family_on_copy_gets_the_compatibility_line(compose_cfg):
    with pytest.raises(UserError, match=r"MemN2NQA \(qa\) cannot train on data AlgorithmicDataModule \(sequence\)"):
        run.check_compatible(compose_cfg("model=memn2n", "data=copy"))


def test_min_length_above_max_names_the_option(compose_cfg):
    with pytest.raises(ValueError, match="data.task.min_length"):
        run.setup(compose_cfg("model=ntm", "data.task.min_length=5", "data.task.max_length=3"))
