"""`Hopfield`, `HopfieldPooling`, `HopfieldLayer`: shapes, masks with hflayers' meanings, ξ, update steps, errors,
and the 0.2 forms (HopfieldPoolingQA's deprecated arguments, old state dicts)."""

from __future__ import annotations

import math

import pytest
import torch

from attnmem.attention import Cosine, Dot
from attnmem.blocks.hopfield import Hopfield, HopfieldLayer, HopfieldPooling
from attnmem.models.hopfield_pooling_qa import HopfieldPoolingQA

PLAIN = dict(normalize_stored_pattern=False, normalize_stored_pattern_affine=False, normalize_state_pattern=False,
             normalize_state_pattern_affine=False, normalize_pattern_projection=False,
             normalize_pattern_projection_affine=False)


def test_one_retrieval_is_the_formula_by_hand():
    torch.manual_seed(0)
    layer = Hopfield(6, hidden_size=4, output_size=3, scaling=2.0, **PLAIN)
    stored, state, projection = torch.randn(2, 5, 6), torch.randn(2, 3, 6), torch.randn(2, 5, 6)
    q, k, v = layer.query_proj(state), layer.key_proj(stored), layer.value_proj(projection)
    xi = torch.softmax(2.0 * q @ k.transpose(1, 2), -1)  # (B, L, S)
    want = layer.out_proj(xi @ v)
    got, got_xi = layer((stored, state, projection), return_association=True)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_xi[:, 0], xi)
    assert layer.scaling == 2.0 and Hopfield(16, num_heads=4).scaling == 1 / math.sqrt(4)  # default β = 1/√hidden


def test_shapes_heads_sequence_first_and_no_out_projection():
    layer = Hopfield(8, num_heads=2, pattern_size=3, disable_out_projection=True, batch_first=False)
    out, xi = layer(torch.randn(5, 4, 8), return_association=True)  # (T, B, D)
    assert out.shape == (5, 4, 2 * 3) and xi.shape == (4, 2, 5, 5)
    torch.testing.assert_close(xi.sum(-1), torch.ones(4, 2, 5))
    zero = Hopfield(8, add_zero_association=True)
    assert zero(torch.randn(4, 5, 8), return_association=True)[1].shape == (4, 1, 5, 6)


def test_padding_mask_true_is_ignored():
    torch.manual_seed(0)
    layer = Hopfield(8, num_heads=2)
    stored, state = torch.randn(3, 6, 8), torch.randn(3, 2, 8)
    padding = torch.zeros(3, 6, dtype=torch.bool)
    padding[:, 4:] = True
    out, xi = layer((stored, state, stored), padding, return_association=True)
    assert torch.equal(xi[..., 4:], torch.zeros(3, 2, 2, 2))
    changed = stored.clone()
    changed[:, 4:] = 100.0  # what a padding pattern holds does not matter
    torch.testing.assert_close(layer((changed, state, changed), padding), out)


def test_association_mask_true_may_not_associate_in_both_shapes():
    torch.manual_seed(0)
    layer = Hopfield(8, num_heads=2)
    x = torch.randn(3, 4, 8)
    forbid = torch.zeros(4, 4, dtype=torch.bool)
    forbid[0, 1:] = True  # state 0 reads only pattern 0
    _, xi = layer(x, association_mask=forbid, return_association=True)
    assert torch.equal(xi[:, :, 0], torch.tensor([1.0, 0, 0, 0]).expand(3, 2, 4))
    per_head = forbid.expand(3 * 2, 4, 4).clone()
    per_head[1] = False  # (B·H, L, S): example 0, head 1 unmasked
    _, xi = layer(x, association_mask=per_head, return_association=True)
    assert xi[0, 1, 0, 1] > 0 and xi[0, 0, 0, 1] == 0
    with pytest.raises(ValueError, match=r"association_mask of shape \(3, 3\), expected \(states, stored\)"):
        layer(x, association_mask=torch.zeros(3, 3, dtype=torch.bool))
    with pytest.raises(TypeError, match="association_mask must be a bool tensor"):
        layer(x, association_mask=torch.zeros(4, 4))
    with pytest.raises(ValueError, match="stored_pattern_padding_mask of shape"):
        layer(x, torch.zeros(3, 5, dtype=torch.bool))


def test_update_steps_repeat_the_retrieval_and_stop_by_eps():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)
    layers = {n: Hopfield(8, scaling=0.3, update_steps_max=n, **PLAIN) for n in (0, 1, 5)}
    for layer in layers.values():
        layer.load_state_dict(layers[0].state_dict())
    one = layers[0]
    q, k, v = one.query_proj(x), one.key_proj(x), one.value_proj(x)
    xi = torch.softmax(0.3 * q @ k.transpose(1, 2), -1)
    xi = torch.softmax(0.3 * (xi @ k) @ k.transpose(1, 2), -1)  # one update: ξ ← softmax(β (ξ K) Kᵀ)
    torch.testing.assert_close(layers[1](x), one.out_proj(xi @ v))
    stops = Hopfield(8, scaling=0.3, update_steps_max=5, update_steps_eps=1e9, **PLAIN)
    stops.load_state_dict(one.state_dict())  # ξ moves by less than eps after its first update: it stops there
    torch.testing.assert_close(stops(x), layers[1](x))
    assert not torch.allclose(layers[5](x), layers[1](x))
    assert torch.isfinite(Hopfield(8, update_steps_max=None)(x)).all()  # until converged


def test_per_head_scaling_scales_each_head():
    torch.manual_seed(0)
    layer = Hopfield(8, num_heads=2, scaling=[1.0, 4.0], **PLAIN)
    x = torch.randn(2, 3, 8)
    _, xi = layer(x, return_association=True)
    q = layer.query_proj(x).view(2, 3, 2, 4).transpose(1, 2)
    k = layer.key_proj(x).view(2, 3, 2, 4).transpose(1, 2)
    beta = torch.tensor([1.0, 4.0]).view(2, 1, 1)
    torch.testing.assert_close(xi, torch.softmax(beta * q @ k.transpose(-1, -2), -1))
    with pytest.raises(ValueError, match="scaling has 3 entries, expected one per head"):
        Hopfield(8, num_heads=2, scaling=[1.0, 2.0, 3.0])


def test_score_by_name_class_or_factory_and_bad_options():
    x = torch.randn(2, 3, 8)
    for score in ("cosine", Cosine, lambda **d: Cosine(**d, beta=2.0)):
        assert Hopfield(8, score=score)(x).shape == (2, 3, 8)
    with pytest.raises(TypeError, match="is a built score"):
        Hopfield(8, score=Dot(8, 8))
    with pytest.raises(ValueError, match="concat_bias_pattern is not supported"):
        Hopfield(8, concat_bias_pattern=True)
    with pytest.raises(ValueError, match="num_heads=3 must be >= 1 and divide input_size=8"):
        Hopfield(8, num_heads=3)
    with pytest.raises(ValueError, match="normalize_state_pattern_affine=True needs normalize_state_pattern=True"):
        Hopfield(8, normalize_state_pattern=False)
    with pytest.raises(ValueError, match="association_activation='nope' is not a torch function"):
        Hopfield(8, association_activation="nope")
    with pytest.raises(ValueError, match="pattern_projection_as_static=True leaves unprojected: set one of them"):
        Hopfield(8, pattern_projection_as_static=True, pattern_projection_as_connected=True)
    with pytest.raises(ValueError, match="pattern_projection_as_connected needs the stored patterns' projection"):
        Hopfield(8, stored_pattern_as_static=True, pattern_projection_as_connected=True)
    assert Hopfield(8, pattern_projection_as_connected=True)(x).shape == (2, 3, 8)
    assert Hopfield(8, association_activation="tanh")(x * 100).abs().max() <= 1


def test_dropout_acts_on_xi_while_training_only():
    torch.manual_seed(0)
    layer = Hopfield(8, dropout=0.5)
    x = torch.randn(2, 6, 8)
    _, xi = layer(x, return_association=True)
    torch.testing.assert_close(xi.sum(-1), torch.ones(2, 1, 6))  # ξ is returned before dropout
    assert not torch.allclose(layer(x), layer(x))
    layer.eval()
    torch.testing.assert_close(layer(x), layer(x))


@pytest.mark.parametrize("make", [lambda: Hopfield(16), lambda: HopfieldPooling(16), lambda: HopfieldLayer(16)])
def test_an_unbatched_input_is_refused_in_one_line(make):
    with pytest.raises(ValueError, match=r"of shape \(7, 16\), expected 3-D \(batch, length, width\); add a batch "
                                         r"dimension .*x\.unsqueeze\(0\)") as error:
        make()(torch.randn(7, 16))
    assert "\n" not in str(error.value)


def test_pooling_and_lookup_shapes_and_conditioning_state():
    pool = HopfieldPooling(8, quantity=3, output_size=5)
    x = torch.randn(4, 6, 8)
    assert pool(x).shape == (4, 15) and pool((x, torch.randn(4, 6, 8))).shape == (4, 15)
    assert not torch.allclose(pool(x, state=torch.randn(4, 3, 8)), pool(x))
    frozen = HopfieldPooling(8, trainable=False)
    assert not frozen.pooling_weights.requires_grad
    lookup = HopfieldLayer(8, quantity=10, lookup_weights_as_separated=True, pattern_projection_size=4)
    out, xi = lookup(torch.randn(4, 6, 8), return_association=True)
    assert out.shape == (4, 6, 8) and xi.shape == (4, 1, 6, 10) and lookup.target_weights.shape == (10, 4)


def test_old_pooling_state_dict_loads_and_computes_the_old_update():
    """attnmem 0.2's HopfieldPooling(input_dim=4, score=Dot, beta=2): softmax(β (Q + u)(Y W_K)ᵀ) Y W_V."""
    torch.manual_seed(0)
    old = {"query": torch.randn(1, 4), "key_proj.weight": torch.randn(4, 4), "value_proj.weight": torch.randn(4, 4)}
    qa = HopfieldPoolingQA(vocab_size=5, num_answers=3, memory_size=6, sentence_len=2, score=Dot, embed_dim=4,
                           hops=1, scaling=2.0)
    pool = qa.pools[0]
    pool.load_state_dict(old)
    y, u = torch.randn(2, 6, 4), torch.randn(2, 1, 4)
    xi = torch.softmax(2.0 * (old["query"] + u) @ (y @ old["key_proj.weight"].T).transpose(1, 2), -1)
    want = (xi @ y @ old["value_proj.weight"].T).squeeze(1)
    torch.testing.assert_close(pool(y, state=u), want)
    full = {k: v for k, v in qa.state_dict().items() if not k.startswith("pools.")}
    full |= {f"pools.0.{k}": v for k, v in old.items()}
    qa.load_state_dict(full)  # strict: a 0.2 checkpoint of the model loads whole


def test_qa_deprecated_beta_and_update_steps_warn_and_mean_the_same():
    sizes = dict(vocab_size=5, num_answers=3, memory_size=6, sentence_len=2, score=Dot, embed_dim=4)
    with pytest.warns(DeprecationWarning, match=r"beta=.*use scaling="):
        old = HopfieldPoolingQA(**sizes, beta=2.0)
    with pytest.warns(DeprecationWarning, match=r"update_steps=n.*update_steps_max=n-1"):
        steps = HopfieldPoolingQA(**sizes, update_steps=3)
    assert old.pools[0].hopfield.scaling == 2.0 and steps.pools[0].hopfield.update_steps_max == 2
    batch = {"story": torch.randint(1, 5, (2, 6, 2)), "query": torch.randint(1, 5, (2, 2))}
    new = HopfieldPoolingQA(**sizes, scaling=2.0)
    new.load_state_dict(old.state_dict())
    torch.testing.assert_close(new(batch).pred, old(batch).pred)
