"""The DCN and the span baseline: shapes, iterations, sentinels, DCN+, padding, the bi-LSTM's reversal."""

from __future__ import annotations

import pytest
import torch

from attnmem.attention import Additive, Bilinear, Dot
from attnmem.blocks.bilstm import BiLSTM, reverse_within
from attnmem.models.dcn import DCN
from attnmem.models.dcn_decoder import HighwayMaxout
from attnmem.models.span_baseline import SpanBaseline


def batch(lengths=(7, 4), question_lengths=(3, 2), vocab=20):
    gen = torch.Generator().manual_seed(0)
    b, m, n = len(lengths), max(lengths), max(question_lengths)
    context = torch.randint(2, vocab, (b, m), generator=gen)
    question = torch.randint(2, vocab, (b, n), generator=gen)
    for i, (lc, lq) in enumerate(zip(lengths, question_lengths)):
        context[i, lc:] = 0
        question[i, lq:] = 0
    return {
        "context": context,
        "question": question,
        "start": torch.zeros(b, dtype=torch.long),
        "end": torch.zeros(b, dtype=torch.long),
        "index": torch.arange(b),
    }


def dcn(**options):
    torch.manual_seed(0)
    return DCN(**{"vocab_size": 20, "score": Dot, "embed_dim": 8, "hidden_size": 6, "pool_size": 3, **options})


def test_reverse_within_reverses_each_sequence_inside_its_length():
    x = torch.arange(8.0).view(2, 4, 1)
    assert reverse_within(x, torch.tensor([4, 2])).squeeze(-1).tolist() == [[3, 2, 1, 0], [5, 4, 6, 7]]


def test_bilstm_output_does_not_depend_on_padding():
    torch.manual_seed(0)
    lstm = BiLSTM(3, 5)
    x = torch.randn(1, 4, 3)
    alone = lstm(x, torch.tensor([4]))
    padded = lstm(torch.cat([x, torch.randn(1, 3, 3)], dim=1), torch.tensor([4]))  # garbage after the end
    assert torch.allclose(alone, padded[:, :4], atol=1e-6) and padded[:, 4:].abs().sum() == 0


@pytest.mark.parametrize("iterations", [1, 2, 4])
def test_dcn_shapes_and_iterations(iterations):
    out = dcn(iterations=iterations)(batch())
    assert out.pred.shape == (2, iterations, 2, 7)
    assert [a.shape for a in out.attention] == [(2, 4, 8), (2, 8, 4)]  # Aᵠ (n+1, m+1), Aᴰ (m+1, n+1)
    assert torch.isinf(out.pred[1, :, :, 4:]).all() and torch.isfinite(out.pred[1, :, :, :4]).all()


def test_sentinels_take_part_and_padding_gets_no_weight():
    out = dcn()(batch())
    weights_q, weights_d = out.attention
    # question word -> document: the sentinel (last column) is attended; the padding of example 1 (cols 4-6) is not
    assert (weights_q[:, :, -1] > 0).all() and weights_q[1, :, 4:7].abs().sum() == 0
    assert torch.allclose(weights_q.sum(-1), torch.ones(2, 4)) and torch.allclose(weights_d.sum(-1), torch.ones(2, 8))
    assert (weights_d[:, :, -1] > 0).all() and weights_d[1, :, 2:3].abs().sum() == 0


@pytest.mark.parametrize("score", [Dot, Bilinear])
def test_the_affinity_is_one_matrix_read_both_ways(score):
    weights_q, weights_d = dcn(score=score)(batch(lengths=(5,), question_lengths=(3,))).attention
    # Aᵠ and Aᴰ are softmaxes of Lᵀ and L: their logs differ from L by per-row/per-column constants
    log_q, log_d = weights_q.log()[0].T, weights_d.log()[0]  # both (m+1, n+1)
    residual = log_d - log_q
    assert torch.allclose(
        residual - residual.mean(1, keepdim=True) - residual.mean(0, keepdim=True) + residual.mean(),
        torch.zeros_like(residual),
        atol=1e-5,
    )


def test_a_dcn_prediction_does_not_depend_on_batch_padding():
    net = dcn().eval()
    both = batch()
    alone = {k: v[1:2] for k, v in both.items()}
    alone["context"], alone["question"] = alone["context"][:, :4], alone["question"][:, :2]
    assert torch.allclose(net(both).pred[1, :, :, :4], net(alone).pred[0], atol=1e-5)


@pytest.mark.parametrize("score", [Dot, Bilinear, Additive])
def test_dcn_plus_deep_residual_coattention(score):
    out = dcn(coattention_layers=2, score=score)(batch())
    assert out.pred.shape == (2, 4, 2, 7) and len(out.attention) == 4
    out.pred[torch.isfinite(out.pred)].sum().backward()


def test_options_fail_fast():
    with pytest.raises(ValueError, match=r"model.iterations must be >= 1, got 0"):
        dcn(iterations=0)
    with pytest.raises(ValueError, match="model.hidden_size must be even with coattention_layers > 1"):
        dcn(coattention_layers=2, hidden_size=5)
    with pytest.raises(ValueError, match="model.dropout"):
        SpanBaseline(vocab_size=5, score=Dot, dropout=1.0)


def test_highway_maxout_pools_over_pieces():
    hmn = HighwayMaxout(hidden_size=4, pool_size=3)
    document = torch.randn(2, 5, 8)
    scores = hmn(hmn.precompute(document), torch.randn(2, 4), torch.randn(2, 8), torch.randn(2, 8))
    assert scores.shape == (2, 5) and hmn.first_document.out_features == 12


def test_pretrained_embeddings_set_the_width_and_stay_fixed():
    weight = torch.randn(20, 5)
    net = dcn(embeddings=weight)
    assert net.embedding.embedding_dim == 5 and not net.embedding.weight.requires_grad
    assert torch.equal(net.embedding.weight, weight)


def test_span_baseline_shapes():
    torch.manual_seed(0)
    out = SpanBaseline(vocab_size=20, score=Bilinear, embed_dim=8, hidden_size=4)(batch())
    assert out.pred.shape == (2, 1, 2, 7) and out.attention[0].shape == (2, 3, 7)
    assert torch.isinf(out.pred[1, 0, :, 4:]).all()


@pytest.mark.parametrize("layers", [1, 2])
def test_dcn_runs_under_cpu_bf16_autocast(layers):
    # the LSTMs run in float32 (attnmem.core.float32.recurrent); the rest in bfloat16
    net = dcn(coattention_layers=layers, hidden_size=8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = net(batch())
    assert torch.isfinite(out.pred[0]).all()
    out.pred[torch.isfinite(out.pred)].float().sum().backward()
