"""BiDAF's trilinear similarity wᵀ[q; k; q∘k]: hand-computed values, the concatenation it avoids, two widths."""

import pytest
import torch

from attnmem.attention import Trilinear, attend

torch.set_num_threads(1)


def test_trilinear_is_w1_q_plus_w2_k_plus_q_w3_k_by_hand():
    score = Trilinear(2, 2)
    with torch.no_grad():
        score.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))  # w₁, w₂, w₃
    query = torch.tensor([[[1.0, 2.0]]])  # (1, 1, 2)
    keys = torch.tensor([[[3.0, 0.0], [1.0, 1.0], [0.0, -1.0]]])  # (1, 3, 2)
    # w₁ᵀq = 1; w₂ᵀk = 0, 1, -1; (q∘w₃)ᵀk = 3, 3, -2
    assert score(query, keys).tolist() == [[[4.0, 5.0, -2.0]]]


def test_trilinear_equals_w_dot_the_concatenation_it_never_builds():
    torch.manual_seed(0)
    score = Trilinear(4, 4)
    query, keys = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
    q, k = query.unsqueeze(2).expand(-1, -1, 5, -1), keys.unsqueeze(1).expand(-1, 3, -1, -1)  # (2, 3, 5, 4)
    explicit = torch.cat([q, k, q * k], dim=-1) @ score.weight.flatten()  # wᵀ[h; u; h∘u] of eq. 1: (2, 3, 5)
    assert torch.allclose(score(query, keys), explicit, atol=1e-6)


def test_keys_of_another_width_are_projected_to_the_query_width():
    torch.manual_seed(0)
    score = Trilinear(4, 6)
    query, keys = torch.randn(2, 3, 4), torch.randn(2, 5, 6)
    same = Trilinear(4, 4)
    with torch.no_grad():
        same.weight.copy_(score.weight)
    assert score.key_proj.weight.shape == (4, 6) and Trilinear(4, 4).key_proj is None
    assert torch.allclose(score(query, keys), same(query, score.key_proj(keys)), atol=1e-6)
    context, weights = attend(query, keys, keys, score, mask=torch.tensor([True, True, False, True, True]))
    assert context.shape == (2, 3, 6) and weights[..., 2].abs().sum() == 0


def test_bad_widths_name_the_score():
    with pytest.raises(ValueError, match="Trilinear: query_dim and key_dim must be >= 1, got 0 and 3"):
        Trilinear(0, 3)
