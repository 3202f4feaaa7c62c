"""The caption family: attention in the box and the losses by hand, REINFORCE's baseline, a tiny run that learns."""

from __future__ import annotations

import json
import math

import pytest
import torch
from conftest import FAST
from torch import Tensor, nn

from attnmem.blocks.output import Output
from attnmem.core.dims import CaptionDims
from attnmem.runtime import run
from attnmem.tasks.caption import CaptionTask, in_box

DIMS = CaptionDims(vocab_size=5, channels=1, height=4, width=6, pad_id=0, bos_id=1, eos_id=2, max_caption_len=1,
                   itos=["<pad>", "<bos>", "<eos>", "<unk>", "one"])


class Fixed(nn.Module):
    """Uniform logits over 5 words and the given attention (B, T, 2, 3); `hard` adds its arg-max as `chosen`."""

    def __init__(self, alpha: Tensor, hard: bool = False) -> None:
        super().__init__()
        self.alpha, self.hard = nn.Parameter(alpha), hard

    def forward(self, batch: dict[str, Tensor]) -> Output:
        logits = torch.zeros(*batch["tgt"][:, 1:].shape, 5)
        chosen = nn.functional.one_hot(self.alpha.flatten(2).argmax(-1), 6).float().view_as(self.alpha)
        return Output(pred=logits, attention=[self.alpha, chosen] if self.hard else [self.alpha])


def _task(net: nn.Module, **options) -> CaptionTask:
    return CaptionTask(net, optimizer=lambda p: torch.optim.SGD(p, lr=0.1), dims=DIMS, **options)


def test_attention_in_box_compares_the_argmax_cell_with_the_box():
    alpha = torch.zeros(1, 3, 2, 3)
    alpha[0, :, 0, 1] = 1.0  # the cell of rows 0-1, columns 2-3 of a 4 x 6 image (cells of 2 x 2 pixels)
    boxes = torch.tensor([[[1, 3, 3, 5], [2, 0, 4, 2], [0, 4, 2, 6]]])  # overlaps; below-left; right of it
    assert in_box(alpha, boxes, 4, 6).tolist() == [[True, False, False]]


def test_loss_is_the_cross_entropy_plus_the_doubly_stochastic_penalty_per_token():
    batch = {"tgt": torch.tensor([[1, 4, 2]])}  # bos, "one", eos: two target tokens
    alpha = torch.zeros(1, 2, 2, 3)
    alpha[0, :, 0, 0] = 1.0  # both steps on cell 0: Σ_t α = 2 there, 0 in the 5 others
    loss = _task(Fixed(alpha), alpha_c=0.5).shared_step(batch, "train")
    penalty = (1 - 2) ** 2 + 5 * 1**2  # Σ_i (1 − Σ_t α_ti)² = 6
    assert loss.item() == pytest.approx((2 * math.log(5) + 0.5 * penalty) / 2)


def test_reinforce_starts_the_baseline_at_the_first_reward_then_moves_it_by_the_decay():
    batch = {"tgt": torch.tensor([[1, 4, 2], [1, 4, 2]])}
    alpha = torch.full((2, 2, 2, 3), 1 / 6)
    task = _task(Fixed(alpha.clone(), hard=True), alpha_c=0.0, entropy=0.0, baseline_decay=0.9)
    loss = task.shared_step(batch, "train")
    reward = -2 * math.log(5)  # log p(y | s̃) of every caption
    assert task.baseline.item() == pytest.approx(reward)  # the first batch's mean: zero advantage
    assert loss.item() == pytest.approx(math.log(5))
    task.baseline.fill_(reward - 1.0)  # a reward 1 above the baseline: REINFORCE adds −1 · log p(s̃) per caption
    loss = task.shared_step(batch, "train")
    log_p_s = 2 * math.log(1 / 6)  # two steps, α = 1/6 on the chosen cell
    assert loss.item() == pytest.approx(math.log(5) - 2 * log_p_s / 4)
    assert task.baseline.item() == pytest.approx(0.9 * (reward - 1.0) + 0.1 * reward)


def test_entropy_bonus_lowers_the_loss_by_lambda_times_the_entropy_per_token():
    batch = {"tgt": torch.tensor([[1, 4, 2]])}
    task = _task(Fixed(torch.full((1, 2, 2, 3), 1 / 6), hard=True), alpha_c=0.0, entropy=0.5, reinforce=0.0)
    assert task.shared_step(batch, "train").item() == pytest.approx(math.log(5) - 0.5 * 2 * math.log(6) / 2)


def test_options_out_of_range_name_the_option():
    with pytest.raises(ValueError, match="task.alpha_c must be >= 0"):
        _task(Fixed(torch.ones(1, 1, 2, 3)), alpha_c=-1.0)
    with pytest.raises(ValueError, match="task.decode has no option"):
        _task(Fixed(torch.ones(1, 1, 2, 3)), decode={"beams": 2})


def test_a_tiny_soft_attention_run_learns_to_name_single_digits(compose_cfg, tmp_path):
    cfg = compose_cfg("model=sat", "data.source.lengths=[1,1]", "data.source.test_lengths=[2]", "data.source.height=8",
                      "data.source.width=16", "data.source.num_train=384", "data.source.num_val=64",
                      "data.source.num_test=64", "data.batch_size=32", "trainer.max_epochs=8", "optimizer.lr=0.01",
                      "callbacks.plots.num_examples=1", *FAST)
    run.train(cfg)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    # chance: 0.1, on digit images never seen in training; 1.16 nats per token is eos alone learned
    assert metrics["test/exact_match"] > 0.2 and metrics["test/loss"] < 1.1, metrics
    assert "test/len2/exact_match" in metrics and "test/attention_in_box" in metrics
    assert (tmp_path / "run" / "plots" / "caption_0.png").is_file()
