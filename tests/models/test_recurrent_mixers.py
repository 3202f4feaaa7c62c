"""The LSTM, NTM and DNC as `MixerLM` mixers: shapes, causality, the state-size formulas, errors, MQAR learnt."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnmem.data.recall.mqar import MQAR
from attnmem.models.mixer_lm import MixerLM
from attnmem.models.recurrent_mixers import DNCMixer, LSTMMixer, NTMMixer

SMALL = {"lstm": {"hidden_size": 6, "num_layers": 2},
         "ntm": {"controller_size": 5, "memory_locations": 4, "memory_width": 3, "read_heads": 2},
         "dnc": {"controller_size": 5, "memory_locations": 4, "memory_width": 3, "read_heads": 2}}


@pytest.mark.parametrize("mixer", sorted(SMALL))
def test_shape_causality_and_the_model_around_it(mixer: str) -> None:
    torch.manual_seed(0)
    net = MixerLM(vocab_size=7, mixer=mixer, mixer_options=SMALL[mixer], d_model=8, layers=1, positions="none")
    tokens = torch.randint(0, 7, (2, 9))
    logits = net(tokens)
    assert logits.shape == (2, 9, 7)
    changed = tokens.clone()
    changed[:, 5:] = (changed[:, 5:] + 1) % 7
    torch.testing.assert_close(net(changed)[:, :5], logits[:, :5])
    assert not torch.allclose(net(changed)[:, 5:], logits[:, 5:])
    assert net.state_size == net.mixers[0].state_size > 0


def test_state_size_formulas() -> None:
    assert LSTMMixer(8).state_size == 2 * 8
    assert LSTMMixer(8, hidden_size=6, num_layers=2).state_size == 2 * 6 * 2
    # N·M + R·M + (R + W)·N + 2C
    assert NTMMixer(8, **SMALL["ntm"]).state_size == 4 * 3 + 2 * 3 + (2 + 1) * 4 + 2 * 5
    assert NTMMixer(8, controller="feedforward", **SMALL["ntm"]).state_size == 4 * 3 + 2 * 3 + 3 * 4
    assert NTMMixer(8).state_size == 128 * 20 + 20 + 2 * 128 + 2 * 100  # NTM's defaults
    # N·W + N² + (3 + R)·N + R·W + 2C
    assert DNCMixer(8, **SMALL["dnc"]).state_size == 4 * 3 + 4 * 4 + (3 + 2) * 4 + 2 * 3 + 2 * 5
    assert DNCMixer(8).state_size == 128 * 20 + 128 * 128 + 4 * 128 + 20 + 2 * 100


def test_bad_options_are_one_line() -> None:
    with pytest.raises(ValueError, match=r"^LSTMMixer: hidden_size must be >= 1, got 0 "
                                         r"\(model.mixer_options.hidden_size in a run\)$"):
        LSTMMixer(8, hidden_size=0)
    with pytest.raises(ValueError, match="mixer 'ntm' .* does not take the options") as err:
        MixerLM(vocab_size=5, mixer="ntm", mixer_options={"window": 3})
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="memory_locations must be >= 1"):
        MixerLM(vocab_size=5, mixer="dnc", mixer_options={"memory_locations": 0})


def test_the_lstm_learns_mqar_with_two_pairs() -> None:
    torch.manual_seed(0)
    inputs, targets = MQAR(vocab_size=10, seq_len=8, num_kv_pairs=2).generate(256, seed=0)
    net = MixerLM(vocab_size=10, mixer="lstm", mixer_options={"hidden_size": 32}, d_model=32, layers=1,
                  positions="none")
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(60):
        loss = nn.functional.cross_entropy(net(inputs).flatten(0, 1), targets.flatten(), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
    scored = targets != -100
    accuracy = (net(inputs).argmax(-1)[scored] == targets[scored]).float().mean().item()
    assert accuracy > 0.5  # chance: 1 in the 5 values
