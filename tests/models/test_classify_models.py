"""HAN's attention by hand (Yang et al. 2016, eq. 5-7 and 10), padding invariance, and learning on generated data."""

from __future__ import annotations

import json
from functools import partial

import pytest
import torch
from conftest import FAST, train_once

from attnmem.attention import Additive, Dot, ScaledDot
from attnmem.models.bigru_classify import BiGRUClassify
from attnmem.models.han import HAN
from attnmem.models.transformer_classify import TransformerClassify

# two documents: 2 sentences of 3 and 2 words; 1 sentence of 4 words (0 pads)
DOCUMENT = torch.tensor([[[3, 4, 5, 0], [6, 7, 0, 0]], [[8, 9, 3, 4], [0, 0, 0, 0]]])


def _padded(document: torch.Tensor) -> torch.Tensor:
    """The same documents with two more padding sentences and three more padding words."""
    return torch.nn.functional.pad(document, (0, 3, 0, 2))


def test_han_additive_word_attention_is_yangs_u_it_dot_u_w():
    torch.manual_seed(0)
    net = HAN(vocab_size=10, num_classes=3, score=Additive, embed_dim=6, hidden_size=8).eval()
    out = net({"document": DOCUMENT})
    h, _, _ = net.word_encoder(DOCUMENT[0, :1])  # the first sentence's states h_1t: (1, L, H)
    score = net.word_score
    # eq. 5-6: u_it = tanh(W_w h_it + b_w), α_it ∝ exp(u_itᵀ u_w), with W_w = U, b_w = U's bias + W u_w, u_w = v
    b_w = score.key_proj.bias + score.query_proj(net.word_context)
    u = torch.tanh(h[0, :3] @ score.key_proj.weight.T + b_w)  # (3, H)
    alpha = torch.softmax(u @ score.v.weight[0], dim=0)  # (3,)
    assert torch.allclose(out.attention[0][0, 0, :3], alpha, atol=1e-6)
    assert out.attention[0][0, 0, 3] == 0  # padding
    beta = out.attention[1]  # (B, S): eq. 10
    assert torch.allclose(beta.sum(-1), torch.ones(2)) and beta[1, 1] == 0


@pytest.mark.parametrize("model", ["han", "bigru", "transformer"])
def test_padding_sentences_and_words_changes_nothing(model):
    torch.manual_seed(0)
    sizes = {"vocab_size": 10, "num_classes": 3}
    net = {"han": partial(HAN, score=Dot, embed_dim=6, hidden_size=8),
           "bigru": partial(BiGRUClassify, embed_dim=6, hidden_size=8),
           "transformer": partial(TransformerClassify, score=ScaledDot, d_model=8, heads=2, d_ff=16)}[model]
    net = net(**sizes).eval()
    out, padded = net({"document": DOCUMENT}), net({"document": _padded(DOCUMENT)})
    assert torch.allclose(out.pred, padded.pred, atol=1e-5)
    for a, p in zip(out.attention, padded.attention):  # HAN: α (B, S, L), β (B, S); Transformer: (B, S) per layer
        assert torch.allclose(p[(slice(None), slice(0, 2), slice(0, 4))[: a.dim()]], a, atol=1e-5)
        assert p[:, 2:].abs().sum() == 0


def test_transformer_readout_attention_per_sentence_sums_its_words():
    torch.manual_seed(0)
    net = TransformerClassify(vocab_size=10, num_classes=3, score=ScaledDot, d_model=8, heads=2, d_ff=16).eval()
    out = net({"document": DOCUMENT})
    weights = []
    net.encoder.layers[0].register_forward_hook(lambda m, i, o: weights.append(o[1]))
    net({"document": DOCUMENT})
    readout = weights[0][:, :, 0, 1:].mean(1)  # (B, T): words of document 0 in order, 3 then 2; then 1 pad
    assert torch.allclose(out.attention[0][0], torch.stack([readout[0, :3].sum(), readout[0, 3:5].sum()]))
    assert torch.allclose(out.attention[0][1], torch.stack([readout[1, :4].sum(), torch.tensor(0.0)]))


@pytest.fixture(scope="module")
def han_run(tmp_path_factory):
    # 80 steps: the first epoch of 40 reaches ~70% accuracy, the second ~100% (~8 s of training)
    data = ["data.source.num_train=1280", "data.source.num_val=100", "data.source.num_test=100"]
    return train_once(tmp_path_factory, "han", "model=han", *FAST, *data, "trainer.max_epochs=2",
                      "callbacks.plots.num_examples=1")


def test_han_learns_generated_documents_and_attends_to_the_deciding_sentence(han_run):
    metrics = json.loads((han_run / "metrics.json").read_text())
    assert metrics["test/acc"] >= 0.95 and metrics["test/deciding_sentence_top"] >= 0.9, metrics
    assert (han_run / "plots" / "document_0.png").is_file()
