"""Transformer encoder-decoder: shapes, masks, positions, decoding steps, options, learning."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attnmem.attention import Additive, Dot, ScaledDot
from attnmem.blocks.transformer import sinusoidal_table
from attnmem.models.transformer import Transformer
from attnmem.runtime import run

torch.set_num_threads(1)

PAD, BOS, EOS = 0, 1, 2


def _model(score=ScaledDot, **options) -> Transformer:
    torch.manual_seed(0)
    sizes = {"d_model": 16, "heads": 2, "layers": 2, "d_ff": 32, "dropout": 0.0} | options
    return Transformer(src_vocab_size=12, tgt_vocab_size=12, pad_id=PAD, score=score, **sizes)


def _batch() -> dict[str, torch.Tensor]:
    src = torch.tensor([[4, 5, 6, 7], [8, 9, PAD, PAD]])
    tgt = torch.tensor([[BOS, 7, 6, 5, 4, EOS], [BOS, 9, 8, EOS, PAD, PAD]])
    return {"src": src, "tgt": tgt}


def test_shapes_train_without_weights_eval_with_cross_attention_per_layer():
    model, batch = _model(), _batch()
    out = model(batch)
    assert out.pred.shape == (2, 5, 12) and out.attention == []
    model.eval()
    out = model(batch)
    assert [w.shape for w in out.attention] == [(2, 2, 5, 4)] * 2
    assert out.attention[0][1, :, :, 2:].eq(0).all()  # padded source tokens get no weight
    assert torch.allclose(out.attention[1].sum(-1), torch.ones(2, 2, 5))


@pytest.mark.parametrize("score", [ScaledDot, Additive])
def test_padded_source_tokens_do_not_change_the_output(score):
    model, batch = _model(score).eval(), _batch()
    before = model(batch).pred
    with torch.no_grad():
        model.src_embed.weight[PAD].normal_()  # whatever the padding holds
    longer = {"src": F.pad(batch["src"], (0, 3), value=PAD), "tgt": batch["tgt"]}  # and however much of it
    assert torch.allclose(model(longer).pred, before, atol=1e-6)


@pytest.mark.parametrize("score", [ScaledDot, Dot])
def test_future_target_tokens_do_not_change_earlier_outputs(score):
    model, batch = _model(score).eval(), _batch()
    before = model(batch).pred  # (B, 5, V): position j predicts from tgt[:, : j + 1]
    changed = batch["tgt"].clone()
    changed[:, 3] = 11
    after = model({"src": batch["src"], "tgt": changed}).pred
    assert torch.allclose(after[:, :3], before[:, :3], atol=1e-6)
    assert not torch.allclose(after[:, 3:], before[:, 3:])


def test_sinusoidal_table_by_hand():
    table = sinusoidal_table(3, 4)
    # PE(pos, 2i) = sin(pos / 10000^(2i/4)), PE(pos, 2i+1) = cos(...): 10000^(2/4) = 100
    for pos in range(3):
        expected = [math.sin(pos), math.cos(pos), math.sin(pos / 100), math.cos(pos / 100)]
        assert torch.allclose(table[pos], torch.tensor(expected), atol=1e-7)
    odd = sinusoidal_table(2, 3)  # an odd width keeps the last sine only
    assert torch.allclose(odd[1], torch.tensor([math.sin(1), math.cos(1), math.sin(1 / 10000 ** (2 / 3))]))


@pytest.mark.parametrize("norm_first", [True, False])
def test_encode_and_decode_steps_agree_with_forward(norm_first):
    model, batch = _model(norm_first=norm_first).eval(), _batch()
    full = model(batch).pred  # (B, 5, V)
    state = model.encode(batch["src"])
    assert all(t.shape[0] == 2 for t in state.values())
    for step in range(full.shape[1]):
        logits, state = model.decode_step(state, batch["tgt"][:, step])
        assert torch.allclose(logits, full[:, step], atol=1e-5), step


def test_decoding_state_reorders_by_batch_rows():
    model, batch = _model().eval(), _batch()
    state = model.encode(batch["src"])
    _, state = model.decode_step(state, batch["tgt"][:, 0])
    flipped = {k: v.index_select(0, torch.tensor([1, 0])) for k, v in state.items()}
    logits, _ = model.decode_step(flipped, batch["tgt"][[1, 0], 1])
    expected = model(batch).pred[:, 1]
    assert torch.allclose(logits, expected[[1, 0]], atol=1e-5)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"d_model": 10, "heads": 3}, "heads=3 must divide d_model=10; use heads in [1, 2, 5, 10]"),
        ({"positions": "rotary"}, "positions must be one of ('sinusoidal', 'learned'), got 'rotary' (model.positions in a run)"),
        ({"dropout": 1.0}, "dropout must be in [0, 1)"),
        ({"layers": 0}, "layers must be >= 1, got 0 (model.layers in a run)"),
    ],
)
def test_bad_options_name_the_option(options, message):
    with pytest.raises(ValueError) as err:
        _model(**options)
    assert message in str(err.value)


def test_longer_than_max_len_is_a_value_error_naming_it():
    model, batch = _model(max_len=3), _batch()
    with pytest.raises(ValueError, match=r"4 positions is longer than max_len=3, .* \(model.max_len in a run\)"):
        model(batch)


def test_learned_positions_post_ln_memorise_a_batch():
    model = _model(positions="learned", norm_first=False)
    batch = _batch()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    targets = batch["tgt"][:, 1:].flatten()
    for _ in range(60):
        loss = F.cross_entropy(model(batch).pred.flatten(0, 1), targets, ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    assert (model(batch).pred.argmax(-1).flatten() == targets)[targets != PAD].all()


def test_model_transformer_alone_trains_on_reverse_and_plots_heads(compose_cfg, tmp_path):
    cfg = compose_cfg(
        "model=transformer",
        "data.source.num_train=32",
        "data.source.num_val=8",
        "data.source.num_test=8",
        "data.source.test_lengths=[]",
    )
    assert cfg.data.source.task == "reverse" and cfg.attention._target_.endswith("ScaledDot")
    datamodule, module, _ = run.setup(cfg)
    paths = module.plot_examples(datamodule, tmp_path / "plots", 2)
    # one per-head grid per decoder layer and example
    assert sorted(p.name for p in paths) == [f"attention_{i}_layer{k}.png" for i in (0, 1) for k in (1, 2)]
    assert all(p.stat().st_size > 0 for p in paths)
