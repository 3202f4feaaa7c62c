"""Attention RNN: local windows and Gaussian weighting by hand, hard attention, step-by-step = forward, options."""

from __future__ import annotations

import functools
import math

import pytest
import torch
from torch import nn

from attnmem.attention import Additive, Bilinear, Cosine, Dot, ScaledDot
from attnmem.models.attn_rnn import MODES, STYLES, AttnRNN

torch.set_num_threads(1)


def make(**kw) -> AttnRNN:
    torch.manual_seed(0)
    args = {
        "src_vocab_size": 9,
        "tgt_vocab_size": 7,
        "score": functools.partial(Dot),
        "hidden_size": 4,
        "embed_dim": 3,
    } | kw
    return AttnRNN(**args)


def state(keys: list[list[float]], length: int, step: int = 0) -> dict[str, torch.Tensor]:
    keys = torch.tensor([keys])  # (1, Ls, H)
    mask = torch.arange(keys.shape[1]).unsqueeze(0) < length
    return {"keys": keys, "mask": mask, "step": torch.tensor([float(step)])}


KEYS = [
    [1.0, 0.0, 0.0, 0.0],
    [0.0, 1.0, 0.0, 0.0],
    [2.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 1.0, 0.0],
    [3.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0],
]
QUERY = torch.tensor([[1.0, 0.0, 0.0, 0.0]])  # Dot scores: 1, 0, 2, 0, 3, 0 (position 5 is padding)


def softmax(scores: list[float]) -> list[float]:
    total = sum(math.exp(s) for s in scores)
    return [math.exp(s) / total for s in scores]


def test_local_m_softmax_over_the_window_around_t_only():
    model = make(mode="local_m", window=1)
    _, weights = model.align(QUERY, state(KEYS, length=5, step=2))  # window [1, 3]
    expected = [0.0, *softmax([0.0, 2.0, 0.0]), 0.0, 0.0]
    torch.testing.assert_close(weights, torch.tensor([expected]))
    # t beyond the source is clamped to its last position (4): window [3, 5], 5 is padding
    _, late = model.align(QUERY, state(KEYS, length=5, step=9))
    torch.testing.assert_close(late, torch.tensor([[0.0, 0.0, 0.0, *softmax([0.0, 3.0]), 0.0]]))


def test_local_p_predicted_centre_and_gaussian_weighting():
    model = make(mode="local_p", window=2)
    for p in model.position.parameters():
        nn.init.zeros_(p)  # sigmoid(0) = 1/2: p_t = (S - 1) / 2 = 2 for S = 5
    context, weights = model.align(QUERY, state(KEYS, length=5))
    sigma = 2 / 2
    inside = softmax([1.0, 0.0, 2.0, 0.0, 3.0])  # window [0, 4]: the whole source
    expected = [w * math.exp(-((s - 2) ** 2) / (2 * sigma**2)) for s, w in enumerate(inside)] + [0.0]
    torch.testing.assert_close(weights, torch.tensor([expected]))
    torch.testing.assert_close(context, torch.tensor([expected]) @ torch.tensor(KEYS))
    with torch.no_grad():
        model.position[2].bias.fill_(math.log(4))  # sigmoid = 4/5: p_t = 3.2, window [1.2, 5.2] minus padding
    _, shifted = model.align(QUERY, state(KEYS, length=5))
    inside = softmax([2.0, 0.0, 3.0])
    expected = [0.0, 0.0] + [w * math.exp(-((s - 3.2) ** 2) / 2) for s, w in zip(range(2, 5), inside)] + [0.0]
    torch.testing.assert_close(shifted, torch.tensor([expected]))


def test_hard_attention_is_one_hot_with_straight_through_gradients():
    model = make(mode="hard")
    keys = torch.tensor([KEYS], requires_grad=True)
    mask = torch.arange(6).unsqueeze(0) < 5
    context, weights = model.align(QUERY, {"keys": keys, "mask": mask, "step": torch.zeros(1)})
    torch.testing.assert_close(weights, torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0, 0.0]]))
    torch.testing.assert_close(context, torch.tensor([KEYS[4]]))
    context.sum().backward()
    assert keys.grad[0, :4].abs().sum() > 0  # the soft weights' gradient reaches the other keys
    model.eval()
    _, weights = model.align(QUERY, {"keys": keys.detach(), "mask": mask, "step": torch.zeros(1)})
    torch.testing.assert_close(weights, torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0, 0.0]]))


def batch() -> dict[str, torch.Tensor]:
    src = torch.tensor([[4, 5, 6, 7, 8], [5, 6, 0, 0, 0]])
    tgt = torch.tensor([[1, 4, 5, 6, 2], [1, 6, 2, 0, 0]])
    return {"src": src, "tgt": tgt}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("style", STYLES)
def test_stepwise_decoding_equals_the_teacher_forced_forward(style, mode):
    model = make(style=style, mode=mode, window=1, score=functools.partial(Additive)).eval()
    b = batch()
    out = model(b)
    assert out.pred.shape == (2, 4, 7) and out.attention[0].shape == (2, 4, 5)
    assert torch.all(out.attention[0][1, :, 2:] == 0)  # padding gets no weight
    if mode in ("global", "hard"):
        torch.testing.assert_close(out.attention[0].sum(-1), torch.ones(2, 4))
    state, logits = model.encode(b["src"]), []
    for t in range(4):
        step, state = model.decode_step(state, b["tgt"][:, t])
        logits.append(step)
    torch.testing.assert_close(torch.stack(logits, 1), out.pred)


@pytest.mark.parametrize("score", [Additive, Bilinear, Cosine, Dot, ScaledDot])
def test_padding_does_not_change_a_sequence_and_every_score_fits(score):
    model = make(score=functools.partial(score), bidirectional=True)
    b = batch()
    padded = {"src": torch.cat([b["src"], torch.zeros(2, 3, dtype=torch.long)], 1), "tgt": b["tgt"]}
    out, out_padded = model(b), model(padded)
    torch.testing.assert_close(out.pred, out_padded.pred)
    torch.testing.assert_close(out.attention[0], out_padded.attention[0][..., :5])


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"window": -1}, r"window \(D\) must be >= 0"),
        ({"mode": "local_p", "window": 0}, r"window \(D\) must be >= 1 for mode=local_p"),
        ({"mode": "soft"}, "mode must be one of"),
        ({"style": "vaswani"}, "style must be one of"),
        ({"hidden_size": 5}, "bidirectional splits hidden_size"),
        ({"cell": "transformer"}, "cell must be one of"),
    ],
)
def test_bad_options_name_the_option(kw, message):
    with pytest.raises(ValueError, match=message):
        make(**kw)
