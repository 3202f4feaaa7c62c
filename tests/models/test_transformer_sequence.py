"""Encoder-only Transformer for sequences: causal, per-step attention, a learning check, options."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnmem.attention import ScaledDot
from attnmem.models.transformer_sequence import TransformerSequence

torch.set_num_threads(1)


def _sequence(**options) -> TransformerSequence:
    torch.manual_seed(0)
    sizes = {"d_model": 16, "heads": 2, "layers": 2, "d_ff": 32, "dropout": 0.0} | options
    return TransformerSequence(score=ScaledDot, input_size=3, output_size=2, **sizes)


def test_sequence_is_causal():
    model = _sequence().eval()
    inputs = torch.rand(2, 6, 3)
    before = model({"inputs": inputs}).pred  # (B, T, 2)
    changed = inputs.clone()
    changed[:, 4] = 1.0
    after = model({"inputs": changed}).pred
    assert before.shape == (2, 6, 2)
    assert torch.allclose(after[:, :4], before[:, :4], atol=1e-6) and not torch.allclose(after[:, 4:], before[:, 4:])
    weights = model({"inputs": inputs}).attention
    assert len(weights) == 6 and weights[2].shape == (2, 2, 6) and weights[2][..., 3:].eq(0).all()


def test_sequence_learns_to_copy_its_previous_input():
    model = _sequence()
    torch.manual_seed(1)
    inputs = (torch.rand(8, 6, 3) > 0.5).float()
    targets = F.pad(inputs[:, :-1, :2], (0, 0, 1, 0))  # step t outputs the first two bits of step t-1
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(80):
        loss = F.binary_cross_entropy_with_logits(model({"inputs": inputs}).pred, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    assert ((model({"inputs": inputs}).pred > 0) == (targets > 0.5)).float().mean() > 0.95


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: _sequence(heads=3), "heads=3 must divide d_model=16"),
        (lambda: _sequence(positions="rotary"), "positions must be one of"),
        (lambda: TransformerSequence(score=ScaledDot, input_size=0, output_size=2), "input_size must be >= 1, got 0"),
    ],
)
def test_bad_options_name_the_option(build, message):
    with pytest.raises(ValueError) as err:
        build()
    assert message in str(err.value)


def test_serves_the_sequence_family_only():
    assert TransformerSequence.families == ("sequence",)
