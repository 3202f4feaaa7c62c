"""`HopfieldMixer`: a retrieval by hand (one step and two), forward = recurrent, causality, state size, errors."""

from __future__ import annotations

import math

import pytest
import torch

from attnmem.blocks.hopfield_mixer import HopfieldMixer
from attnmem.models.mixer_lm import MixerLM


def tiny(steps: int) -> HopfieldMixer:
    """Width 1, one learned pattern (key 0, value 2), β = 1 fixed, every projection the identity."""
    layer = HopfieldMixer(1, memory=1, steps=steps, beta=1.0, learn_beta=False).double()
    with torch.no_grad():
        for name, p in layer.named_parameters():
            if name.endswith("weight"):
                p.fill_(1.0)
            elif name.endswith("bias"):
                p.zero_()
        layer.memory_keys.fill_(0.0)
        layer.memory_values.fill_(2.0)
    return layer


def test_one_retrieval_by_hand():
    layer = tiny(steps=1)
    x = torch.tensor([[[1.0], [2.0]]], dtype=torch.float64)
    # t = 0: ξ = 1 scores (0, 1) against the stored keys (0, x0 = 1); values (2, 1)
    w0 = math.e / (1 + math.e)
    # t = 1: ξ = 2 scores (0, 2, 4) against (0, 1, 2); values (2, 1, 2)
    z1 = 1 + math.exp(2) + math.exp(4)
    want = torch.tensor([[[2 * (1 - w0) + w0], [(2 + math.exp(2) + 2 * math.exp(4)) / z1]]], dtype=torch.float64)
    torch.testing.assert_close(layer(x), want)
    torch.testing.assert_close(layer.recurrent(x), want)


def test_two_steps_update_the_state_pattern_first():
    layer = tiny(steps=2)
    x = torch.tensor([[[1.0]]], dtype=torch.float64)
    w = math.e / (1 + math.e)
    xi = w * 1.0  # eq. 3: ξ ← Y softmax(β Yᵀ ξ), Y = (0, 1)
    w2 = math.exp(xi) / (1 + math.exp(xi))  # the read of the new ξ: scores (0, ξ)
    want = torch.tensor([[[2 * (1 - w2) + w2]]], dtype=torch.float64)
    torch.testing.assert_close(layer(x), want)
    assert not torch.allclose(tiny(steps=1)(x), want)


@pytest.mark.parametrize("heads, memory, steps, score", [(1, 0, 1, "dot"), (2, 3, 1, "dot"), (2, 4, 3, "dot"),
                                                         (4, 2, 2, "cosine")])
def test_forward_equals_recurrent(heads, memory, steps, score):
    torch.manual_seed(0)
    layer = HopfieldMixer(8, heads=heads, memory=memory, steps=steps, score=score).double()
    x = torch.randn(2, 7, 8, dtype=torch.float64)
    torch.testing.assert_close(layer(x), layer.recurrent(x), atol=1e-5, rtol=0)


def test_causal_and_beta_learns():
    torch.manual_seed(0)
    layer = HopfieldMixer(8, heads=2, memory=3, steps=2).double()
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    changed = x.clone()
    changed[:, 3:] = torch.randn(2, 3, 8, dtype=torch.float64)
    torch.testing.assert_close(layer(changed)[:, :3], layer(x)[:, :3])
    assert not torch.allclose(layer(changed)[:, 3:], layer(x)[:, 3:])
    torch.testing.assert_close(layer.beta, torch.full((2,), 0.5, dtype=torch.float64))  # 1/√(8 / 2)
    layer(x).sum().backward()
    assert layer.score.log_beta.grad is not None and layer.memory_keys.grad is not None


def test_state_size_and_errors():
    assert HopfieldMixer(8, memory=5, max_len=10).state_size == 2 * 10 * 8
    bad = {"heads": (3, r"heads must be >= 1 and divide d_model \(8\), got 3"),
           "memory": (-1, r"memory \(learned stored patterns\) must be >= 0, got -1"),
           "steps": (0, r"steps must be >= 1 \(1: one retrieval\), got 0"),
           "beta": (0.0, r"beta must be > 0 or None \(1/sqrt\(head width\)\), got 0.0"),
           "max_len": (0, r"max_len must be >= 1, got 0")}
    for option, (value, message) in bad.items():
        with pytest.raises(ValueError, match=rf"^HopfieldMixer: {message}$"):
            HopfieldMixer(8, **{option: value})


def test_in_mixer_lm_its_state_counts_the_models_longest_sequence():
    net = MixerLM(vocab_size=7, mixer="hopfield", mixer_options={"memory": 2, "steps": 2}, d_model=8, layers=2,
                  max_len=16)
    assert net(torch.randint(0, 7, (2, 5))).shape == (2, 5, 7)
    assert net.state_size == 2 * (2 * 16 * 8)
