"""`ShortConv`: nn.Conv1d's parameters drawn as it draws them, its causal output by hand and equal to the
convolution's, gradients included; its state size and options."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnmem.blocks.short_conv import ShortConv


def test_parameters_are_drawn_as_a_depthwise_conv1d_draws_them() -> None:
    torch.manual_seed(0)
    conv = nn.Conv1d(6, 6, 4, groups=6)
    torch.manual_seed(0)
    short = ShortConv(6, 4)
    assert torch.equal(short.weight, conv.weight) and torch.equal(short.bias, conv.bias)
    assert dict(short.state_dict()).keys() == dict(conv.state_dict()).keys()  # its checkpoints load either way


def test_by_hand() -> None:
    short = ShortConv(1, 3).double()
    with torch.no_grad():
        short.weight.copy_(torch.tensor([[[1.0, 10.0, 100.0]]]))  # y_t = x_{t-2} + 10 x_{t-1} + 100 x_t + 0.5
        short.bias.fill_(0.5)
    y = short(torch.tensor([[[1.0], [2.0], [3.0]]], dtype=torch.float64))
    assert y.flatten().tolist() == [100.5, 210.5, 321.5]


def test_equals_the_causal_convolution_with_its_gradients() -> None:
    torch.manual_seed(1)
    short = ShortConv(5, 4).double()
    conv = nn.Conv1d(5, 5, 4, groups=5, padding=3).double()
    conv.load_state_dict(short.state_dict())
    x = torch.randn(2, 9, 5, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(2, 9, 5, dtype=torch.float64)
    grads = []
    for form in (short, lambda h: conv(h.transpose(1, 2))[..., :9].transpose(1, 2)):
        y = form(x)
        grads.append([y, *torch.autograd.grad((y * weights).sum(), [x, *short.parameters(), *conv.parameters()],
                                              allow_unused=True)])
    (y1, gx1, gw1, gb1, *_), (y2, gx2, _, _, gw2, gb2) = grads
    for a, b in [(y1, y2), (gx1, gx2), (gw1, gw2), (gb1, gb2)]:
        assert torch.allclose(a, b, atol=1e-12)


def test_state_size_and_options() -> None:
    assert ShortConv(8, 4).state_size == 3 * 8
    with pytest.raises(ValueError, match="ShortConv: kernel_size must be >= 1, got 0"):
        ShortConv(8, 0)
