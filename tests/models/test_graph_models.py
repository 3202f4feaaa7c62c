"""GCN's renormalised propagation, GAT's score and its attention over edges, by hand on tiny graphs."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attnmem.attention import Additive, Dot, LeakyConcat, attend, attend_edges
from attnmem.models.gat import GAT, GraphAttentionLayer, neighbour_edges
from attnmem.models.gcn import GCN, renormalized_adjacency
from attnmem.models.mlp import MLP

PATH = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])  # the path 0 - 1 - 2, both directions


def test_renormalized_adjacency_of_a_path_by_hand():
    # Ã = A + I has degrees 2, 3, 2: Â_ij = 1 / sqrt(d_i d_j) where Ã_ij = 1
    expected = torch.tensor(
        [[1 / 2, 1 / math.sqrt(6), 0], [1 / math.sqrt(6), 1 / 3, 1 / math.sqrt(6)], [0, 1 / math.sqrt(6), 1 / 2]]
    )
    assert torch.allclose(renormalized_adjacency(PATH, 3).to_dense(), expected)


def test_gcn_is_eq_9_of_kipf_and_welling():
    torch.manual_seed(0)
    net = GCN(num_features=4, num_classes=2, hidden_dim=5).eval()
    x = torch.randn(3, 4)
    a = renormalized_adjacency(PATH, 3).to_dense()
    w0, w1 = net.weights
    expected = a @ F.relu(a @ x @ w0.weight.T + w0.bias) @ w1.weight.T + w1.bias
    assert torch.allclose(net({"features": x, "edge_index": PATH}).pred, expected, atol=1e-6)


def test_gcn_under_bf16_autocast_propagates_in_float32():
    torch.manual_seed(0)
    net = GCN(num_features=4, num_classes=2).eval()
    batch = {"features": torch.randn(3, 4), "edge_index": PATH}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = net(batch).pred
    assert torch.allclose(mixed.float(), net(batch).pred, atol=0.05)


def test_leaky_concat_score_by_hand():
    score = LeakyConcat(query_dim=2, key_dim=3, negative_slope=0.2)
    with torch.no_grad():
        score.query_weight.copy_(torch.tensor([1.0, 0.0]))
        score.key_weight.copy_(torch.tensor([0.0, 2.0, 0.0]))
    query = torch.tensor([[[1.0, 1.0]]])  # a_qᵀq = 1
    keys = torch.tensor([[[1.0, -1.0, 5.0], [0.0, 1.0, 5.0]]])  # a_kᵀk = -2, 2
    assert torch.allclose(score(query, keys), torch.tensor([[[-0.2, 3.0]]]))  # LeakyReLU(-1), LeakyReLU(3)
    with pytest.raises(ValueError, match="negative_slope must be >= 0"):
        LeakyConcat(query_dim=2, key_dim=2, negative_slope=-1)


def test_gat_layer_attends_only_to_neighbours_and_itself_as_eq_2_to_4():
    torch.manual_seed(0)
    layer = GraphAttentionLayer(3, 2, heads=2, score=LeakyConcat, concat=True, dropout=0.0)
    h = torch.randn(3, 3)
    edges = neighbour_edges(torch.cat([PATH, PATH[:, :1]], 1), 3)  # an edge listed twice counts once
    assert edges.T.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1], [1, 2], [2, 1], [2, 2]]  # (source, target)
    mask = torch.tensor([[True, True, False], [True, True, True], [False, True, True]])  # [i, j]: j -> i
    out, alpha = layer(h, edges)
    assert out.shape == (3, 4) and alpha.shape == (2, 3, 3) and alpha.is_sparse
    alpha = alpha.to_dense()
    assert alpha[:, 0, 2].eq(0).all() and alpha[:, 2, 0].eq(0).all()
    wh = layer.weight(h).view(3, 2, 2)  # (N, K, F')
    for k, score in enumerate(layer.scores):
        e = F.leaky_relu(wh[:, k] @ score.query_weight[:, None] + (wh[:, k] @ score.key_weight)[None, :], 0.2)
        expected = torch.softmax(e.masked_fill(~mask, float("-inf")), -1)  # eq. 3
        assert torch.allclose(alpha[k], expected, atol=1e-6)
        assert torch.allclose(out[:, 2 * k : 2 * k + 2], expected @ wh[:, k], atol=1e-6)  # eq. 4, no bias yet


def test_attention_over_edges_equals_dense_masked_attention_for_every_score_and_in_its_gradients():
    torch.manual_seed(0)
    n, dim = 6, 4
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 0, 5], [1, 2, 3, 4, 0, 3, 5]])  # node 5: only its own loop
    source, target = neighbour_edges(edge_index, n)
    mask = torch.zeros(n, n, dtype=torch.bool)
    mask[target, source] = True
    x = torch.randn(n, dim, requires_grad=True)
    for score in (Dot(query_dim=dim, key_dim=dim), Additive(query_dim=dim, key_dim=dim), LeakyConcat(query_dim=dim, key_dim=dim)):
        context, weights = attend_edges(x[target], x[source], x[source], score, target=target, num_targets=n)
        dense, dense_weights = attend(x[None], x[None], x[None], score, mask=mask[None])
        assert torch.allclose(context, dense[0], atol=1e-6)
        assert torch.allclose(weights, dense_weights[0, target, source], atol=1e-6)
        (grad,) = torch.autograd.grad(context.square().sum(), x)
        (dense_grad,) = torch.autograd.grad(dense.square().sum(), x)
        assert torch.allclose(grad, dense_grad, atol=1e-5)
    lonely = attend_edges(x[:0], x[:0], x[:0], Dot(query_dim=dim, key_dim=dim), target=target[:0], num_targets=2)[0]
    assert lonely.eq(0).all() and lonely.shape == (2, dim)  # a target without edges: a zero context


def test_gat_and_mlp_give_logits_per_node_and_gat_its_attention():
    batch = {"features": torch.randn(3, 4), "edge_index": PATH}
    out = GAT(num_features=4, num_classes=2, score=LeakyConcat, hidden_dim=3, heads=2).eval()(batch)
    assert out.pred.shape == (3, 2) and [a.shape for a in out.attention] == [(2, 3, 3), (1, 3, 3)]
    assert MLP(num_features=4, num_classes=2).eval()(batch).pred.shape == (3, 2)
    with pytest.raises(ValueError, match="GAT: heads must be >= 1"):
        GAT(num_features=4, num_classes=2, score=LeakyConcat, heads=0)
