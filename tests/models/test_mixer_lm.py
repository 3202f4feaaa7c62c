"""`MixerLM`: shapes for every mixer of this package, causality of the whole model, options, a tiny task learnt."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnmem.blocks.base_conv import BaseConv
from attnmem.models.mixer_backbone import MIXERS
from attnmem.models.mixer_lm import MixerLM

OURS = ["attention", "selective_ssm", "lti_ssm", "base_conv"]  # the attention-like mixers are tested where they live
OPTIONS = {"attention": {"heads": 2}, "selective_ssm": {"d_state": 4, "chunk_size": 4},
           "lti_ssm": {"d_state": 4}, "base_conv": {"l_max": 16}}


def _model(mixer: str, **options: object) -> MixerLM:
    return MixerLM(vocab_size=11, mixer=mixer, mixer_options=OPTIONS[mixer], d_model=8, layers=2, max_len=16,
                   **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("mixer", OURS)
def test_shapes_causality_and_state_size(mixer: str) -> None:
    torch.manual_seed(0)
    net = _model(mixer, mlp=True).double()
    tokens = torch.randint(0, 11, (2, 9))
    logits = net(tokens)
    assert logits.shape == (2, 9, 11)
    changed = tokens.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 11
    assert torch.allclose(net(changed)[:, :6], logits[:, :6], atol=1e-10)
    assert net.state_size == 2 * net.mixers[0].state_size > 0


def test_factory_and_no_positions() -> None:
    net = MixerLM(vocab_size=5, mixer=lambda d: BaseConv(d, l_max=4), d_model=6, layers=1, positions="none")
    assert net.positions is None and net(torch.zeros(1, 20, dtype=torch.long)).shape == (1, 20, 5)
    assert net.state_size == 4 * 6


def test_bad_options_are_one_line() -> None:
    with pytest.raises(ValueError, match="mixer must be one of .*'base_conv'.*got 'mamba'") as err:
        MixerLM(vocab_size=5, mixer="mamba")
    assert "\n" not in str(err.value) and all(name in str(err.value) for name in MIXERS)
    with pytest.raises(ValueError, match="does not take the options"):
        MixerLM(vocab_size=5, mixer="base_conv", mixer_options={"window": 3})
    with pytest.raises(ValueError, match="positions must be one of"):
        MixerLM(vocab_size=5, positions="rotary")
    with pytest.raises(ValueError, match="vocab_size must be >= 1"):
        MixerLM(vocab_size=0)


def test_attention_learns_to_copy() -> None:
    # the second half of each sequence repeats the first: its next tokens are predictable by looking back
    torch.manual_seed(0)
    net = MixerLM(vocab_size=8, mixer="attention", d_model=16, layers=2, max_len=12)
    first = torch.randint(0, 8, (32, 6))
    tokens = torch.cat([first, first], 1)  # (32, 12)
    inputs, targets = tokens[:, :-1], tokens[:, 1:].clone()
    targets[:, :5] = -100  # only the repeat is scored
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        loss = nn.functional.cross_entropy(net(inputs).flatten(0, 1), targets.flatten(), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_a_state_that_cannot_hold_one_pair_is_one_line_naming_the_option():
    # S6 with 1 state a channel holds d_model = 16 numbers: less than a key and a value of width 16
    with pytest.raises(ValueError, match=r"'selective_ssm' holds a state of 16 numbers.*must be >= 32.*"
                                         r"model.mixer_options \(d_state"):
        MixerLM(vocab_size=32, mixer="selective_ssm", mixer_options={"d_state": 1}, d_model=16)
    assert MixerLM(vocab_size=32, mixer="selective_ssm", mixer_options={"d_state": 2}, d_model=16).state_size == 64


def test_a_kv_cache_is_counted_at_the_datas_longest_sequence():
    # 2 layers x 2 (keys, values) x T x D: at the data's seq_len when given, else at max_len
    assert MixerLM(vocab_size=32, d_model=16, max_len=1024, seq_len=128).state_size == 2 * 2 * 128 * 16
    assert MixerLM(vocab_size=32, d_model=16, max_len=1024).state_size == 2 * 2 * 1024 * 16


def test_the_short_convolution_is_causal_and_counted_in_the_state():
    torch.manual_seed(0)
    net = MixerLM(vocab_size=16, mixer="linear_attention", d_model=8, layers=2, short_conv=4).double()
    with torch.no_grad():  # y_t = Σ_j w_j x_{t-3+j}: taps 1, 2, 3, 4 on a one-channel impulse
        conv = net.convs[0]
        conv.weight.copy_(torch.tensor([1.0, 2.0, 3.0, 4.0]).repeat(8, 1, 1))
        conv.bias.zero_()
        impulse = torch.zeros(1, 6, 8, dtype=torch.float64)  # (B, T, D)
        impulse[0, 1, :] = 1.0
        assert conv(impulse)[0, :, 0].tolist() == [0.0, 4.0, 3.0, 2.0, 1.0, 0.0]
    tokens = torch.randint(0, 16, (2, 10))
    changed = tokens.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 16
    assert torch.equal(net(tokens)[:, :6], net(changed)[:, :6])
    assert net.state_size == 2 * 3 * 8 + MixerLM(vocab_size=16, mixer="linear_attention", d_model=8).state_size
    with pytest.raises(ValueError, match=r"short_conv must be >= 0 \(0: none\), got -1 \(model.short_conv"):
        MixerLM(vocab_size=16, short_conv=-1)


def test_tied_embeddings_read_the_token_table() -> None:
    torch.manual_seed(0)
    untied = MixerLM(vocab_size=500, d_model=16, layers=1)
    torch.manual_seed(0)
    tied = MixerLM(vocab_size=500, d_model=16, layers=1, tie_embeddings=True).double()
    table = tied.embed.weight  # (V, D)
    assert tied.head.weight is table and tied.head.bias is None
    # one parameter fewer (the head's weight is the table) and no bias: V·D + V numbers fewer
    count = lambda net: sum(p.numel() for p in net.parameters())  # noqa: E731
    assert count(untied) - count(tied) == 500 * 16 + 500
    assert 0.018 < table.std().item() < 0.022  # N(0, 0.02²), against N(0, 1) untied
    assert 0.9 < untied.embed.weight.std().item() < 1.1
    # logits = norm(x) Eᵀ: the head is the table, read by the final norm's output
    tokens = torch.randint(0, 500, (2, 7))
    hidden = {}
    tied.norm.register_forward_hook(lambda module, args, out: hidden.update(out=out))
    logits = tied(tokens)
    assert torch.allclose(logits, hidden["out"] @ table.T, atol=1e-12)
    # a gradient through the head reaches the table: one parameter, trained by both uses
    logits[0, -1, 3].backward()
    assert table.grad is not None and table.grad[3].abs().sum() > 0


def test_logits_at_are_the_forwards_rows_at_the_marked_steps() -> None:
    torch.manual_seed(0)
    net = MixerLM(vocab_size=11, mixer="linear_attention", d_model=8, layers=2, max_len=16, short_conv=3).double()
    tokens = torch.randint(11, (3, 9))
    where = torch.rand(3, 9) < 0.4
    at = net.logits_at(tokens, where)
    assert at.shape == (int(where.sum()), 11)
    assert torch.allclose(at, net(tokens)[where], atol=1e-12)
    with pytest.raises(ValueError, match=r"where must be a bool tensor of the tokens' shape \(3, 9\), got torch.int64"):
        net.logits_at(tokens, where.long())
