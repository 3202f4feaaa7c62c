"""Encoder-only Transformer: story packing, qa readout and per-sentence attention, causal sequence model."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnmem.attention import ScaledDot
from attnmem.models.transformer_encoder import TransformerEncoder, pack_story

torch.set_num_threads(1)

STORY = torch.tensor([[[5, 6, 0], [7, 0, 0], [0, 0, 0]], [[8, 0, 0], [0, 0, 0], [0, 0, 0]]])  # (2, 3, 3)
QUERY = torch.tensor([[9, 10], [11, 0]])


def _qa(**options) -> TransformerEncoder:
    torch.manual_seed(0)
    sizes = {"d_model": 16, "heads": 2, "layers": 2, "d_ff": 32, "dropout": 0.0} | options
    return TransformerEncoder(family="qa", score=ScaledDot, vocab_size=12, num_answers=5, memory_size=3, **sizes)


def _sentences(**options) -> TransformerEncoder:
    return _qa(unit="sentence", sentence_len=6, **options)


def _sequence(**options) -> TransformerEncoder:
    torch.manual_seed(0)
    sizes = {"d_model": 16, "heads": 2, "layers": 2, "d_ff": 32, "dropout": 0.0} | options
    return TransformerEncoder(family="sequence", score=ScaledDot, input_size=3, output_size=2, **sizes)


def test_pack_story_by_hand():
    tokens, sentence = pack_story(STORY, QUERY)
    assert tokens.tolist() == [[5, 6, 7, 9, 10], [8, 11, 0, 0, 0]]
    assert sentence[0].tolist() == [0, 0, 1, 3, 3]  # the question's words are sentence S = 3
    assert sentence[1, :2].tolist() == [0, 3]


def test_qa_logits_and_per_sentence_attention():
    model = _qa()
    batch = {"story": STORY, "query": QUERY}
    assert model(batch).pred.shape == (2, 5) and model(batch).attention == []
    model.eval()
    out = model(batch)
    assert [w.shape for w in out.attention] == [(2, 3)] * 2  # per layer: (B, S)
    assert out.attention[0][:, 2].eq(0).all() and out.attention[0][1, 1] == 0  # empty sentences get nothing
    assert (out.attention[1].sum(-1) < 1).all()  # the rest went to the question and the readout itself


def test_sentence_units_attend_over_sentences_and_ignore_empty_ones():
    model = _sentences().eval()
    out = model({"story": STORY, "query": QUERY})
    assert out.pred.shape == (2, 5) and [w.shape for w in out.attention] == [(2, 3)] * 2
    assert out.attention[0][:, 2].eq(0).all() and out.attention[0][1, 1] == 0
    swapped = STORY.clone()
    swapped[0, 0] = STORY[0, 0, [1, 0, 2]]  # word order inside a sentence is seen through the position encoding
    assert not torch.allclose(model({"story": swapped, "query": QUERY}).pred, out.pred)


@pytest.mark.parametrize("build", [_qa, _sentences])
def test_qa_empty_sentences_and_padding_change_nothing(build):
    model = build().eval()
    wider = {"story": F.pad(STORY, (0, 2, 0, 4)), "query": F.pad(QUERY, (0, 3))}  # more padding everywhere
    assert torch.allclose(model(wider).pred, model({"story": STORY, "query": QUERY}).pred, atol=1e-6)


def test_qa_word_order_matters():
    model = _qa().eval()
    swapped = STORY.clone()
    swapped[0, :2] = STORY[0, [1, 0]]  # the same words, sentences in the other order
    assert not torch.allclose(
        model({"story": swapped, "query": QUERY}).pred, model({"story": STORY, "query": QUERY}).pred
    )


def test_sequence_is_causal():
    model = _sequence().eval()
    inputs = torch.rand(2, 6, 3)
    before = model({"inputs": inputs}).pred  # (B, T, 2)
    changed = inputs.clone()
    changed[:, 4] = 1.0
    after = model({"inputs": changed}).pred
    assert before.shape == (2, 6, 2)
    assert torch.allclose(after[:, :4], before[:, :4], atol=1e-6) and not torch.allclose(after[:, 4:], before[:, 4:])
    weights = model({"inputs": inputs}).attention
    assert len(weights) == 6 and weights[2].shape == (2, 2, 6) and weights[2][..., 3:].eq(0).all()


def test_sequence_learns_to_copy_its_previous_input():
    model = _sequence()
    torch.manual_seed(1)
    inputs = (torch.rand(8, 6, 3) > 0.5).float()
    targets = F.pad(inputs[:, :-1, :2], (0, 0, 1, 0))  # step t outputs the first two bits of step t-1
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(80):
        loss = F.binary_cross_entropy_with_logits(model({"inputs": inputs}).pred, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    assert ((model({"inputs": inputs}).pred > 0) == (targets > 0.5)).float().mean() > 0.95


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: _qa(heads=3), "model.heads=3 must divide model.d_model=16"),
        (lambda: _qa(unit="phrase"), "unit must be one of ('word', 'sentence'), got 'phrase'"),
        (lambda: _qa(unit="sentence"), "needs vocab_size, num_answers, memory_size, sentence_len >= 1"),
        (
            lambda: TransformerEncoder(family="qa", score=ScaledDot, vocab_size=12),
            "family 'qa' needs vocab_size, num_answers, memory_size >= 1, got 12, None, None",
        ),
        (lambda: TransformerEncoder(family="span", score=ScaledDot), "family must be one of ('qa', 'sequence')"),
    ],
)
def test_bad_options_name_the_option(build, message):
    with pytest.raises(ValueError) as err:
        build()
    assert message in str(err.value)
