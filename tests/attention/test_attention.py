"""The scoring functions against hand-computed numbers, attend()'s masking and fast path, MultiHead's per-head scores."""

import math

import pytest
import torch
import torch.nn.functional as F

from attnmem.attention import Additive, Bilinear, Cosine, Dot, LeakyConcat, MultiHead, ScaledDot, Trilinear, attend

torch.set_num_threads(1)

Q = torch.tensor([[[1.0, 2.0]]])  # (1, 1, 2)
K = torch.tensor([[[3.0, 0.0], [1.0, 1.0], [0.0, -1.0]]])  # (1, 3, 2)


def test_dot_is_q_dot_k():
    assert Dot(2, 2)(Q, K).tolist() == [[[3.0, 3.0, -2.0]]]


@pytest.mark.parametrize("score_cls", [Dot, ScaledDot])
@pytest.mark.parametrize("queries", [1, 3])
def test_dot_scores_give_the_keys_a_contiguous_gradient(score_cls, queries):
    q, leaf = torch.randn(4, queries, 5, requires_grad=True), torch.randn(4, 7, 5, requires_grad=True)
    k, seen = leaf * 1, []  # not a leaf: its gradient reaches the hook as the backward made it
    k.register_hook(lambda grad: seen.append(grad.is_contiguous()))
    scores = score_cls(5, 5)(q, k)
    scale = 1 / math.sqrt(5) if score_cls is ScaledDot else 1.0
    torch.testing.assert_close(scores, q.detach() @ k.detach().transpose(1, 2) * scale)
    scores.sum().backward()
    # one query (a memory read): k qᵀ, whose backward gives the keys a contiguous gradient (an embedding's
    # backward would copy a transposed one); several: q kᵀ as before
    assert seen == [queries == 1]
    torch.testing.assert_close(leaf.grad, q.detach().sum(1, keepdim=True).expand(4, 7, 5) * scale)


def test_scaled_dot_divides_by_sqrt_d():
    expected = [[[3 / math.sqrt(2), 3 / math.sqrt(2), -2 / math.sqrt(2)]]]
    assert torch.allclose(ScaledDot(2, 2)(Q, K), torch.tensor(expected))


def test_bilinear_is_q_W_k_with_different_widths():
    score = Bilinear(2, 3)
    with torch.no_grad():
        score.weight.copy_(torch.tensor([[1.0, 0.0, 2.0], [0.0, 1.0, -1.0]]))
    keys = torch.tensor([[[1.0, 1.0, 1.0], [0.0, 2.0, 1.0]]])  # (1, 2, 3)
    # qᵀW = [1, 2, 0]; · [1,1,1] = 3; · [0,2,1] = 4
    assert score(Q, keys).tolist() == [[[3.0, 4.0]]]


def test_additive_is_v_tanh_Wq_plus_Uk():
    score = Additive(2, 2, hidden_dim=1)
    with torch.no_grad():
        score.query_proj.weight.copy_(torch.tensor([[1.0, 0.0]]))  # W q = q1 = 1
        score.key_proj.weight.copy_(torch.tensor([[0.0, 1.0]]))  # U k = k2
        score.key_proj.bias.fill_(0.5)
        score.v.weight.fill_(2.0)
    expected = [2 * math.tanh(1 + 0 + 0.5), 2 * math.tanh(1 + 1 + 0.5), 2 * math.tanh(1 - 1 + 0.5)]
    assert torch.allclose(score(Q, K), torch.tensor([[expected]]))


def test_cosine_times_beta():
    score = Cosine(2, 2, beta=4.0)
    norm_q = math.sqrt(5)
    expected = [4 * 3 / (norm_q * 3), 4 * 3 / (norm_q * math.sqrt(2)), 4 * -2 / (norm_q * 1)]
    assert torch.allclose(score(Q, K), torch.tensor([[expected]]), atol=1e-6)
    assert torch.allclose(score.similarity(Q, K), torch.tensor([[expected]]) / 4, atol=1e-6)


def test_cosine_of_a_zero_key_is_zero_with_finite_gradients():
    query = torch.tensor([[[3.0, 4.0]]], requires_grad=True)
    keys = torch.tensor([[[0.0, 0.0], [6.0, 8.0], [-4.0, 3.0]]], requires_grad=True)
    similarity = Cosine(2, 2).similarity(query, keys)
    assert torch.allclose(similarity, torch.tensor([[[0.0, 1.0, 0.0]]]), atol=1e-6)
    similarity.sum().backward()
    assert torch.isfinite(query.grad).all() and torch.isfinite(keys.grad).all()
    # d/dq of q·k/(|q||k|) for k = (6, 8) (parallel to q): 0; for k = (-4, 3): k/(|q||k|) = (-4, 3)/25
    assert torch.allclose(query.grad, torch.tensor([[[-4.0, 3.0]]]) / 25, atol=1e-6)


def test_cosine_learned_beta_is_a_parameter_and_fixed_is_not():
    assert any(n == "log_beta" for n, _ in Cosine(2, 2, learn_beta=True).named_parameters())
    assert not list(Cosine(2, 2, learn_beta=False).parameters())


def test_attend_softmax_by_hand():
    values = torch.tensor([[[1.0], [2.0], [4.0]]])
    context, weights = attend(Q, K, values, Dot(2, 2))
    e = [math.exp(3), math.exp(3), math.exp(-2)]
    w = [x / sum(e) for x in e]
    assert torch.allclose(weights, torch.tensor([[w]]))
    assert torch.allclose(context, torch.tensor([[[w[0] * 1 + w[1] * 2 + w[2] * 4]]]))


@pytest.mark.parametrize("score_cls", [Dot, ScaledDot, Bilinear, Additive, Cosine])
def test_masked_weights_are_exactly_zero_and_rows_sum_to_one(score_cls):
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 4, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 3)
    mask = torch.tensor([[True, False, True, True, False], [False, False, False, False, False]])[:, None, :]
    context, weights = attend(q, k, v, score_cls(8, 8), mask=mask)
    assert weights[:, :, [1, 4]].eq(0).all()
    assert torch.allclose(weights[0].sum(-1), torch.ones(4))
    # a fully masked row: zero weights, zero context
    assert weights[1].eq(0).all() and context[1].eq(0).all()


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("score_cls", [Dot, ScaledDot, Bilinear, Additive, Cosine])
def test_gradients_are_finite_even_with_fully_masked_rows(score_cls, need_weights):
    torch.manual_seed(0)
    q = torch.randn(2, 3, 4, requires_grad=True)
    k, v = torch.randn(2, 6, 4, requires_grad=True), torch.randn(2, 6, 4, requires_grad=True)
    mask = torch.rand(2, 3, 6) > 0.5
    mask[0, 0] = False
    score = score_cls(4, 4)
    context, weights = attend(q, k, v, score, attn_mask=mask, need_weights=need_weights)
    loss = context.sum() + (weights.square().sum() if need_weights else 0)
    loss.backward()
    assert context[0, 0].eq(0).all()
    for t in [q, k, v, *score.parameters()]:
        assert torch.isfinite(t.grad).all()
    assert q.grad[0, 0].eq(0).all()  # the query with nothing to attend takes no part


@pytest.mark.parametrize("with_mask", [False, True])
def test_fast_path_equals_slow_path(with_mask):
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 7, 16), torch.randn(3, 9, 16), torch.randn(3, 9, 16)
    mask = (torch.rand(3, 7, 9) > 0.3) if with_mask else None
    if with_mask:
        mask[1, 2] = False
    slow, weights = attend(q, k, v, ScaledDot(16, 16), mask=mask)
    fast, none = attend(q, k, v, ScaledDot(16, 16), mask=mask, need_weights=False)
    assert none is None and weights is not None
    assert torch.allclose(fast, slow, atol=1e-6)


def test_fast_path_matches_sdpa():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 5, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 8)
    fast, _ = attend(q, k, v, ScaledDot(8, 8), need_weights=False)
    assert torch.allclose(fast, F.scaled_dot_product_attention(q, k, v), atol=1e-6)


@pytest.mark.parametrize("score_cls", [Dot, ScaledDot, Bilinear, Additive, Cosine])
def test_multihead_wraps_any_score(score_cls):
    torch.manual_seed(0)
    mha = MultiHead(16, 4, score_cls)
    x, mem = torch.randn(2, 3, 16), torch.randn(2, 5, 16)
    mask = torch.ones(2, 3, 5, dtype=torch.bool)
    mask[:, :, -1] = False
    out, weights = mha(x, mem, mem, mask=mask)
    assert out.shape == (2, 3, 16) and weights.shape == (2, 4, 3, 5)
    assert weights[..., -1].eq(0).all()
    assert torch.allclose(weights.sum(-1), torch.ones(2, 4, 3))


def test_multihead_matches_torch_with_scaled_dot():
    torch.manual_seed(0)
    mha = MultiHead(8, 2, ScaledDot)
    ref = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight]))
        ref.in_proj_bias.copy_(torch.cat([mha.q_proj.bias, mha.k_proj.bias, mha.v_proj.bias]))
        ref.out_proj.weight.copy_(mha.out_proj.weight)
        ref.out_proj.bias.copy_(mha.out_proj.bias)
    x = torch.randn(2, 4, 8)
    ours, w = mha(x, x, x)
    theirs, w_ref = ref(x, x, x, average_attn_weights=False)
    assert torch.allclose(ours, theirs, atol=1e-6)
    assert torch.allclose(w, w_ref, atol=1e-6)


@pytest.mark.parametrize("score_cls", [Bilinear, Additive])
def test_multihead_learns_one_score_per_head(score_cls):
    torch.manual_seed(0)
    mha, one = MultiHead(8, 4, score_cls), score_cls(query_dim=2, key_dim=2)
    projections = 4 * (8 * 8 + 8)  # q, k, v, out: weight and bias
    assert sum(p.numel() for p in mha.parameters()) == projections + 4 * sum(p.numel() for p in one.parameters())
    first = list(mha.scores[0].parameters())
    for score in mha.scores[1:]:
        assert all(not torch.equal(a, b) for a, b in zip(first, score.parameters(), strict=True))


def identity_projections(mha: MultiHead) -> None:
    """Make q, k, v and the output projection the identity, so head h reads columns h*Dh .. (h+1)*Dh."""
    with torch.no_grad():
        for proj in (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj):
            proj.weight.copy_(torch.eye(proj.weight.shape[0]))
            proj.bias.zero_()


def test_each_head_scores_with_its_own_bilinear_weights():
    mha = MultiHead(4, 2, Bilinear)
    identity_projections(mha)
    with torch.no_grad():
        mha.scores[0].weight.copy_(torch.eye(2))
        mha.scores[1].weight.copy_(torch.tensor([[0.0, 1.0], [-1.0, 0.0]]))
    query = torch.tensor([[[1.0, 2.0, 0.0, 1.0]]])  # (1, 1, 4): head 0 reads [1, 2], head 1 [0, 1]
    keys = torch.tensor([[[1.0, 0.0, 1.0, 1.0], [0.0, 1.0, 2.0, 0.0], [1.0, 1.0, 0.0, -1.0]]])  # (1, 3, 4)
    out, weights = mha(query, keys, keys)
    # head 0: qᵀ I k = [1, 2, 3]; head 1: qᵀ W1 = [-1, 0], so [-1, -2, 0] (a shared I would give [1, 0, -1])
    expected = torch.stack(
        [torch.softmax(torch.tensor([1.0, 2.0, 3.0]), 0), torch.softmax(torch.tensor([-1.0, -2.0, 0.0]), 0)]
    )
    assert torch.allclose(weights[0, :, 0], expected, atol=1e-6)  # (H, Tk)
    context = torch.cat([expected[0] @ keys[0, :, :2], expected[1] @ keys[0, :, 2:]])  # (D,)
    assert torch.allclose(out[0, 0], context, atol=1e-6)


def test_each_head_attends_with_its_own_additive_score():
    torch.manual_seed(0)
    mha = MultiHead(6, 3, Additive)
    identity_projections(mha)
    x, mem = torch.randn(2, 4, 6), torch.randn(2, 5, 6)
    mask = torch.rand(2, 4, 5) > 0.3
    out, weights = mha(x, mem, mem, mask=mask)
    for h in range(3):
        cols = slice(2 * h, 2 * h + 2)
        own, own_weights = attend(x[..., cols], mem[..., cols], mem[..., cols], mha.scores[h], mask=mask)
        other, _ = attend(x[..., cols], mem[..., cols], mem[..., cols], mha.scores[(h + 1) % 3], mask=mask)
        assert torch.allclose(out[..., cols], own, atol=1e-6) and torch.allclose(weights[:, h], own_weights, atol=1e-6)
        assert not torch.allclose(out[..., cols], other, atol=1e-3)


@pytest.mark.parametrize(
    ("build", "option"),
    [
        (lambda: Dot(4, 5), "query_dim == key_dim"),
        (lambda: ScaledDot(0, 0), "query_dim and key_dim must be >= 1"),
        (lambda: Cosine(4, 4, beta=0.0), "beta must be > 0"),
        (lambda: MultiHead(10, 3, Dot), "heads (3) must be >= 1 and divide model_dim (10)"),
    ],
)
def test_bad_sizes_name_the_option(build, option):
    with pytest.raises(ValueError, match=option.replace("(", r"\(").replace(")", r"\)")):
        build()


SCORES = [Dot, ScaledDot, Bilinear, Additive, Cosine, LeakyConcat, Trilinear]


@pytest.mark.parametrize("score_cls", SCORES)
def test_every_score_reads_2d_query_and_keys_as_one_batch(score_cls):
    torch.manual_seed(0)
    score = score_cls(query_dim=4, key_dim=4)
    query, keys = torch.randn(3, 4), torch.randn(5, 4)
    flat = score(query, keys)
    assert flat.shape == (3, 5)
    torch.testing.assert_close(flat, score(query.unsqueeze(0), keys.unsqueeze(0)).squeeze(0), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("side", ["query", "key"])
@pytest.mark.parametrize("score_cls", SCORES)
def test_scores_linear_in_one_argument_say_so(score_cls, side):
    torch.manual_seed(0)
    score = score_cls(query_dim=4, key_dim=4)
    query, keys = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
    linear = getattr(score, f"linear_in_{side}", False)
    assert linear == (score_cls in (Dot, ScaledDot, Bilinear))
    scaled = score(2.5 * query, keys) if side == "query" else score(query, 2.5 * keys)
    assert torch.allclose(scaled, 2.5 * score(query, keys), rtol=1e-5, atol=1e-5) == linear
