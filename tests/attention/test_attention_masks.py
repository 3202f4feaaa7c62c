"""attend's and MultiHead's masks with PyTorch's names and meanings, their checks, and a layer's `score=` choice."""

import functools

import pytest
import torch
import torch.nn.functional as F

from attnmem.attention import SCORES, Cosine, Dot, MultiHead, ScaledDot, attend, score_factory

torch.set_num_threads(1)


def _qkv(b=2, tq=3, tk=4, d=8):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, tq, d, generator=g), torch.randn(b, tk, d, generator=g), torch.randn(b, tk, d, generator=g)


def test_key_padding_mask_true_is_never_attended_as_in_multihead_attention():
    q, k, v = _qkv()
    padding = torch.tensor([[False, False, True, True], [False, True, False, True]])  # (B, Tk), True = padding
    _, weights = attend(q, k, v, Dot(8, 8), key_padding_mask=padding)
    assert weights.masked_select(padding[:, None, :].expand_as(weights)).abs().max() == 0
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3))
    # the same weights as torch's own MultiheadAttention given the same padding (identity projections, one head)
    mha = torch.nn.MultiheadAttention(8, 1, bias=False, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(8).repeat(3, 1) * torch.tensor([8**0.5, 1, 1]).repeat_interleave(8)[:, None])
    _, torch_weights = mha(q, k, v, key_padding_mask=padding)
    torch.testing.assert_close(weights, torch_weights)


def test_attn_mask_true_attends_as_scaled_dot_product_attention():
    q, k, v = _qkv()
    keep = torch.rand(2, 3, 4, generator=torch.Generator().manual_seed(1)) > 0.3
    keep[..., 0] = True  # no empty row: SDPA gives NaN there
    context, _ = attend(q, k, v, ScaledDot(8, 8), attn_mask=keep)
    torch.testing.assert_close(context, F.scaled_dot_product_attention(q, k, v, attn_mask=keep))


def test_both_masks_combine_and_a_row_with_nothing_left_is_zero():
    q, k, v = _qkv()
    keep = torch.tensor([True, True, False, False]).expand(3, 4)  # (Tq, Tk): every query
    padding = torch.tensor([[True, False, False, False], [True, True, False, False]])
    context, weights = attend(q, k, v, Dot(8, 8), attn_mask=keep, key_padding_mask=padding)
    assert weights[0, :, 1].eq(1).all() and weights[1].eq(0).all() and context[1].eq(0).all()


def test_the_old_mask_name_still_works_with_a_deprecation_warning():
    q, k, v = _qkv()
    keep = torch.tensor([True, False, True, True])[None, None]
    with pytest.warns(DeprecationWarning, match=r"attend\(mask=...\) is deprecated.*attn_mask="):
        old, _ = attend(q, k, v, Dot(8, 8), mask=keep)
    torch.testing.assert_close(old, attend(q, k, v, Dot(8, 8), attn_mask=keep)[0])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"key_padding_mask": torch.zeros(2, 3, 4, dtype=torch.bool)},
         r"attend: key_padding_mask of shape \(2, 3, 4\), expected \(2, 4\) \(batch, keys\)"),
        ({"key_padding_mask": torch.zeros(4, dtype=torch.bool)}, r"key_padding_mask of shape \(4\), expected \(2, 4\)"),
        ({"attn_mask": torch.ones(2, 3, 5, dtype=torch.bool)},
         r"attend: attn_mask of shape \(2, 3, 5\) does not broadcast to the scores' shape \(2, 3, 4\)"),
        ({"attn_mask": torch.ones(1, 2, 3, 4, dtype=torch.bool)}, r"attn_mask has 4 dimensions, the scores"),
    ],
)
def test_wrong_mask_shapes_get_one_line(kwargs, message):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=message):
        attend(q, k, v, Dot(8, 8), **kwargs)


def test_a_float_mask_is_refused_with_its_meaning():
    q, k, v = _qkv()
    with pytest.raises(TypeError, match=r"key_padding_mask must be a bool tensor \(True = padding\), got torch.float32"):
        attend(q, k, v, Dot(8, 8), key_padding_mask=torch.zeros(2, 4))


def test_multihead_takes_the_same_masks_and_checks_its_inputs():
    torch.manual_seed(0)
    mha = MultiHead(8, 2)  # scaled dot by default
    assert all(type(s) is ScaledDot for s in mha.scores)
    q, k, v = _qkv()
    padding = torch.tensor([[False, False, False, True], [True, False, False, False]])
    _, weights = mha(q, k, v, key_padding_mask=padding)  # (B, H, Tq, Tk)
    assert weights[0, ..., 3].eq(0).all() and weights[1, ..., 0].eq(0).all()
    with pytest.raises(ValueError, match=r"MultiHead: query of shape \(3, 8\), expected \(batch, length, 8\)"):
        mha(q[0], k, v)


def test_score_factory_takes_a_name_a_class_or_a_factory():
    assert score_factory("cosine", owner="NTM") is Cosine and set(SCORES) >= {"dot", "scaled_dot", "cosine"}
    assert score_factory(Dot, owner="NTM") is Dot
    partial = functools.partial(Cosine, beta=3.0)
    assert score_factory(partial, owner="NTM") is partial
    with pytest.raises(ValueError, match=r"NTM: unknown score 'cos': one of 'dot', 'scaled_dot'"):
        score_factory("cos", owner="NTM")
    with pytest.raises(TypeError, match=r"NTM: score=Cosine\(...\) is a built score; pass the class \(Cosine\)"):
        score_factory(Cosine(20, 20), owner="NTM")


def test_multihead_takes_a_two_dimensional_attn_mask_as_its_broadcast():
    # a (Tq, Tk) mask (a causal one) is the same mask for every batch row: as (1, Tq, Tk) or (B, Tq, Tk)
    torch.manual_seed(0)
    layer = MultiHead(8, 2).eval()
    x = torch.randn(3, 5, 8)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    out, weights = layer(x, x, x, attn_mask=causal)
    expected, expected_weights = layer(x, x, x, attn_mask=causal.expand(3, 5, 5))
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    assert torch.equal(weights, expected_weights) and weights[:, :, 0, 1:].eq(0).all()
