"""BiDAF (Seo et al. 2017): the attention flow by hand, shapes, padding, character ids from the span datamodule."""

from __future__ import annotations

import json
import math

import pytest
import torch
from conftest import FAST

from attnmem.attention import Dot, Trilinear
from attnmem.core.dims import SpanDims
from attnmem.data.span.datamodule import SpanDataModule
from attnmem.data.span.span_generator import SpanGenerator
from attnmem.data.span.tensors import CHAR_VOCAB_SIZE, char_ids
from attnmem.models.bidaf import BiDAF
from attnmem.runtime import run

torch.set_num_threads(1)


def bidaf(**options):
    torch.manual_seed(0)
    sizes = {"embed_dim": 6, "char_dim": 4, "char_channels": 5, "hidden_size": 4, "dropout": 0.0}
    return BiDAF(**{"vocab_size": 20, "char_vocab_size": CHAR_VOCAB_SIZE, "score": Trilinear, **sizes, **options})


def batch(lengths=(7, 4), question_lengths=(3, 2), word_len=3):
    gen = torch.Generator().manual_seed(0)
    b, m, n = len(lengths), max(lengths), max(question_lengths)
    out = {"context": torch.randint(2, 20, (b, m), generator=gen), "question": torch.randint(2, 20, (b, n), generator=gen)}
    out["context_chars"] = torch.randint(2, CHAR_VOCAB_SIZE, (b, m, word_len), generator=gen)
    out["question_chars"] = torch.randint(2, CHAR_VOCAB_SIZE, (b, n, word_len), generator=gen)
    for i, (lc, lq) in enumerate(zip(lengths, question_lengths)):
        out["context"][i, lc:], out["context_chars"][i, lc:] = 0, 0
        out["question"][i, lq:], out["question_chars"][i, lq:] = 0, 0
    return out


def test_attention_flow_by_hand_with_a_dot_similarity():
    net = bidaf(score=Dot, hidden_size=1)  # 2d = 2
    h = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])  # H: T = 2 context words
    u = torch.tensor([[[2.0, 1.0], [5.0, 5.0]]])  # U: J = 2, the second one padding
    g, a, b = net.attention_flow(h, u, torch.tensor([[True, True]]), torch.tensor([[True, False]]))
    # S = H Uᵀ = [[2, 5], [1, 5]]; the padded question word gets no C2Q weight, so Ũ_t = U_0 for both t
    assert a.tolist() == [[[1.0, 0.0], [1.0, 0.0]]]
    # Q2C: b = softmax_t(max_j S_tj) over the real j only = softmax([2, 1]); h̃ = b_0 H_0 + b_1 H_1
    b0 = math.e / (math.e + 1)
    assert torch.allclose(b, torch.tensor([[[b0, 1 - b0]]]))
    h_tilde = torch.tensor([b0, 1 - b0])
    expected = torch.cat([h[0], u[0, :1].expand(2, -1), h[0] * u[0, :1], h[0] * h_tilde], dim=-1)  # eq. 3
    assert torch.allclose(g[0], expected)


def test_shapes_weights_and_padding():
    out = bidaf()(batch())
    assert out.pred.shape == (2, 1, 2, 7)
    assert torch.isinf(out.pred[1, 0, :, 4:]).all() and torch.isfinite(out.pred[1, 0, :, :4]).all()
    c2q, q2c = out.attention  # (B, Lq, Lc) question words as rows, (B, 1, Lc)
    assert c2q.shape == (2, 3, 7) and q2c.shape == (2, 1, 7)
    assert torch.allclose(c2q[1, :, :4].sum(0), torch.ones(4)) and c2q[1, 2:].abs().sum() == 0
    assert torch.allclose(q2c.sum(-1), torch.ones(2, 1)) and q2c[1, 0, 4:].abs().sum() == 0


def test_a_prediction_does_not_depend_on_batch_padding():
    net = bidaf().eval()
    both = batch()
    alone = {k: v[1:2] for k, v in both.items()}
    for key, length in (("context", 4), ("question", 2)):
        alone[key], alone[f"{key}_chars"] = alone[key][:, :length], alone[f"{key}_chars"][:, :length]
    assert torch.allclose(net(both).pred[1, :, :, :4], net(alone).pred[0], atol=1e-5)


def test_characters_reach_the_prediction():
    net, inputs = bidaf().eval(), batch()
    changed = dict(inputs, context_chars=inputs["context_chars"].clone())
    changed["context_chars"][0, 0] = torch.tensor([5, 6, 7])  # the same word id, other characters
    assert not torch.allclose(net(inputs).pred[0], net(changed).pred[0])


def test_bidaf_without_character_ids_names_the_option(compose_cfg):
    cfg = compose_cfg("model=bidaf", "data.word_len=0", "data.source.num_train=16", "data.source.num_val=8")
    with pytest.raises(ValueError, match=r"BiDAF reads character ids: char_vocab_size must be >= 1, got 0 \(in a "
                       r"run: data.word_len must be >= 1; model=bidaf's"):
        run.setup(cfg)
    with pytest.raises(ValueError, match=r"^BiDAF: char_width must be >= 1, got 0 \(model.char_width in a run\)$"):
        bidaf(char_width=0)


def test_char_ids_by_hand():
    ids = char_ids([("ab", "é€x"), ("xyzzy",)], width=3, word_len=3)
    # 2 + code point; € (U+20AC) is past Latin-1: <unk> = 1; words cut to 3 characters, padding 0
    assert ids.tolist() == [
        [[99, 100, 0], [235, 1, 122], [0, 0, 0]],
        [[122, 123, 124], [0, 0, 0], [0, 0, 0]],
    ]


def test_the_span_datamodule_gives_character_ids_only_when_asked():
    source = SpanGenerator(num_train=32, num_val=16, num_test=16)
    plain = SpanDataModule(source=source, batch_size=8)
    plain.setup()
    assert "context_chars" not in next(iter(plain.train_dataloader())) and plain.dims.char_vocab_size == 0
    dm = SpanDataModule(source=source, batch_size=8, word_len=4)
    dm.setup()
    assert dm.dims == SpanDims(vocab_size=len(dm.data.vocab), char_vocab_size=CHAR_VOCAB_SIZE)
    got = next(iter(dm.val_dataloader()))
    assert got["context_chars"].shape == (*got["context"].shape, 4)
    assert got["question_chars"].shape == (*got["question"].shape, 4)
    example = dm.examples("val")[int(got["index"][0])]
    word = example.context_words[0]
    assert got["context_chars"][0, 0].tolist() == [2 + ord(c) for c in word[:4]] + [0] * (4 - len(word[:4]))
    assert got["context_chars"][got["context"].eq(0)].abs().sum() == 0  # padding words have no characters


def test_a_tiny_run_learns_and_draws_the_c2q_map_and_the_pointers(compose_cfg, tmp_path):
    cfg = compose_cfg(
        "model=bidaf",
        "data.source.num_train=320",
        "data.source.num_val=32",
        "data.source.num_test=32",
        "data.source.entities_per_context=1",
        "data.source.facts_per_entity=1",
        "data.source.fillers=1",
        "trainer.max_epochs=3",
        "optimizer.lr=0.01",
        "callbacks.plots.num_examples=1",
        *FAST,
    )
    run.train(cfg)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["test/f1"] > 0.3, metrics  # untrained: about 0.05
    assert {p.name for p in (tmp_path / "run" / "plots").iterdir()} >= {"pointers_0.png", "c2q_0.png"}
