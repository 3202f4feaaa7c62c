"""The chunked Additive score equals the naive vᵀ tanh(Wq + Uk) broadcast, in values and gradients."""

from __future__ import annotations

import pytest
import torch

from attnmem.attention import Additive, additive_kernel

torch.set_num_threads(1)


def _naive(score: Additive, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    q = score.query_proj(query).unsqueeze(-2)  # (B, Tq, 1, H)
    k = score.key_proj(keys).unsqueeze(-3)  # (B, 1, Tk, H)
    return score.v(torch.tanh(q + k)).squeeze(-1)  # (B, Tq, Tk)


@pytest.mark.parametrize("chunk_elements", [1, 2 * 3 * 5 * 3, 10**6])  # one key, 3 keys (7 = 3+3+1), all keys
def test_chunked_equals_naive_values_and_gradients(monkeypatch, chunk_elements):
    monkeypatch.setattr(additive_kernel, "ADDITIVE_CHUNK_ELEMENTS", chunk_elements)
    torch.manual_seed(0)
    score = Additive(4, 6, hidden_dim=5).double()
    query = torch.randn(2, 3, 4, dtype=torch.double, requires_grad=True)
    keys = torch.randn(2, 7, 6, dtype=torch.double, requires_grad=True)
    upstream = torch.randn(2, 3, 7, dtype=torch.double)
    inputs = [query, keys, *score.parameters()]
    ours = score(query, keys)
    grads = torch.autograd.grad(ours, inputs, upstream)
    theirs = _naive(score, query, keys)
    expected = torch.autograd.grad(theirs, inputs, upstream)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-12)
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def test_gradcheck_and_broadcast_batch(monkeypatch):
    monkeypatch.setattr(additive_kernel, "ADDITIVE_CHUNK_ELEMENTS", 8)
    torch.manual_seed(0)
    score = Additive(3, 3, hidden_dim=2).double()
    query = torch.randn(1, 2, 3, dtype=torch.double, requires_grad=True)  # batch 1 broadcast over 4
    keys = torch.randn(4, 5, 3, dtype=torch.double, requires_grad=True)
    assert torch.autograd.gradcheck(lambda q, k: score(q, k), (query, keys))
    torch.testing.assert_close(score(query, keys), _naive(score, query, keys))


def test_keys_that_need_no_gradient():
    score = Additive(3, 3)
    query = torch.randn(2, 2, 3, requires_grad=True)
    score(query, torch.randn(2, 4, 3)).sum().backward()
    assert query.grad is not None and torch.isfinite(query.grad).all()
