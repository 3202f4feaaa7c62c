"""The DCN and the span baseline: shapes, iterations, sentinels, DCN+ (§2.1), padding, the bi-LSTM's reversal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from attnmem.attention import Additive, Bilinear, Dot
from attnmem.blocks.bilstm import BiLSTM, reverse_within
from attnmem.data.span.datamodule import SpanDataModule
from attnmem.data.span.span_generator import SpanGenerator
from attnmem.models.dcn import DCN
from attnmem.models.dcn_decoder import HighwayMaxout
from attnmem.models.span_baseline import SpanBaseline
from attnmem.tasks.span import span_losses


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


def record_calls(net: torch.nn.Module, names: list[str]) -> dict[str, list]:
    """The input and output shapes of every call of the named submodules, in call order."""
    calls: dict[str, list] = {name: [] for name in names}
    for name in names:
        module = net.get_submodule(name)
        module.register_forward_hook(
            lambda _, inputs, output, name=name: calls[name].append(
                ([tuple(x.shape) for x in inputs if x.dim() == 3], [tuple(x.shape) for x in output if x.dim() == 3])
                if isinstance(output, tuple)
                else ([tuple(inputs[0].shape)], [tuple(output.shape)])
            )
        )
    return calls


def test_dcn_plus_stages_have_the_shapes_of_section_2_1():
    # h = hidden_size = 6; m = 7 document words, n = 3 question words (Xiong et al. 2018, §2.1)
    net = dcn(coattention_layers=2)
    calls = record_calls(net, ["encoder", "coattention.0", "summary_encoder", "coattention.1", "fusion"])
    out = net(batch())
    assert isinstance(net.encoder, BiLSTM)  # eq. 1-2: biLSTM_1, both directions
    assert calls["encoder"] == [([(2, 7, 8)], [(2, 7, 6)]), ([(2, 3, 8)], [(2, 3, 6)])]  # E^D_1, E^Q_1 before sentinels
    # coattn_1 (eq. 3-5, 8) on E^D_1 (m+1, h), E^Q_1 (n+1, h): [S^D_1; C^D_1] (m+1, 2h), S^Q_1 (n+1, h)
    assert calls["coattention.0"][0][1][:2] == [(2, 8, 12), (2, 4, 6)]
    # eq. 6-7: biLSTM_2 reads S^D_1 and S^Q_1 without their sentinel positions and gives 2h
    assert calls["summary_encoder"] == [([(2, 7, 6)], [(2, 7, 12)]), ([(2, 3, 6)], [(2, 3, 12)])]
    # coattn_2 (eq. 9) on E^D_2 (m, 2h), E^Q_2 (n, 2h), no sentinel: [S^D_2; C^D_2] (m, 4h), S^Q_2 (n, 2h)
    assert calls["coattention.1"][0][0] == [(2, 7, 12), (2, 3, 12)]
    assert calls["coattention.1"][0][1][:2] == [(2, 7, 24), (2, 3, 12)]
    # eq. 10: U = biLSTM(concat(E^D_1; E^D_2; S^D_1; S^D_2; C^D_1; C^D_2)), h + 2h + h + 2h + h + 2h = 9h wide
    assert calls["fusion"] == [([(2, 7, 54)], [(2, 7, 12)])]
    assert [a.shape for a in out.attention] == [(2, 4, 8), (2, 8, 4), (2, 3, 7), (2, 7, 3)]  # layer 2: no sentinel
    weights_q, weights_d = out.attention[2:]
    assert weights_q[1, :, 4:].abs().sum() == 0 and weights_d[1, :, 2:].abs().sum() == 0  # padding gets no weight


def test_dcn_plus_shares_each_encoder_between_document_and_question():
    net = dcn(coattention_layers=2)
    calls = record_calls(net, ["encoder", "summary_encoder"])
    net(batch())
    assert len(calls["encoder"]) == len(calls["summary_encoder"]) == 2  # one module for D and Q (eq. 1-2, 6-7)
    bilstms = [name for name, module in net.named_modules() if isinstance(module, BiLSTM)]
    assert bilstms == ["encoder", "summary_encoder", "fusion"]
    assert net.sentinels.shape == (1, 2, 1, 6)  # d_∅ and q_∅ of the first layer only


def test_dcn_plus_learns_generated_span_qa():
    torch.manual_seed(0)
    source = SpanGenerator(num_train=64, num_val=8, num_test=8, entities_per_context=2, facts_per_entity=2, fillers=0)
    dm = SpanDataModule(source=source, batch_size=16)
    dm.setup("fit")
    net = DCN(vocab_size=dm.dims.vocab_size, score=Dot, embed_dim=16, hidden_size=16, pool_size=2, coattention_layers=2)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    batches = list(dm.train_dataloader())
    losses = []
    for step in range(20):
        b = batches[step % len(batches)]
        loss = span_losses(net(b).pred, b["start"], b["end"]).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert sum(losses[-4:]) < 0.6 * sum(losses[:4]), losses  # about 26 per question at first (4 iterations)


def test_the_original_dcn_is_unchanged():
    # outputs of coattention_layers=1 saved from the code before DCN+ followed §2.1 (the commit in the file)
    reference = json.loads((Path(__file__).parents[1] / "fixtures" / "dcn_layers1_outputs.json").read_text())
    for score in (Dot, Bilinear):
        net = dcn(score=score).eval()
        with torch.no_grad():
            out = net(batch())
        saved = reference[score.__name__]
        assert {k: list(v.shape) for k, v in net.state_dict().items()} == saved["parameters"]  # checkpoints still load
        assert torch.allclose(out.pred, torch.tensor(saved["pred"]), atol=1e-6)
        for weights, expected in zip(out.attention, saved["attention"], strict=True):
            assert torch.allclose(weights, torch.tensor(expected), atol=1e-6)


def test_options_fail_fast():
    with pytest.raises(ValueError, match=r"iterations must be >= 1, got 0 \(model.iterations in a run\)"):
        dcn(iterations=0)
    with pytest.raises(ValueError, match=r"^DCN: hidden_size must be even with coattention_layers=2, got 5 \(model.hidden_size in a run\)$"):
        dcn(coattention_layers=2, hidden_size=5)
    with pytest.raises(ValueError, match=r"^DCN: coattention_layers must be 1 \(DCN\) or 2 \(DCN\+\), got 3 \(model.coattention_layers"):
        dcn(coattention_layers=3)
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
