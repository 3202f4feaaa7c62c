"""Encoder-only Transformer for qa: story packing, the readout and per-sentence attention, sentence units."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnmem.attention import ScaledDot
from attnmem.models.transformer_qa import TransformerQA, pack_story

torch.set_num_threads(1)

STORY = torch.tensor([[[5, 6, 0], [7, 0, 0], [0, 0, 0]], [[8, 0, 0], [0, 0, 0], [0, 0, 0]]])  # (2, 3, 3)
QUERY = torch.tensor([[9, 10], [11, 0]])
SIZES = {"vocab_size": 12, "num_answers": 5, "memory_size": 3, "sentence_len": 6}


def _qa(**options) -> TransformerQA:
    torch.manual_seed(0)
    sizes = SIZES | {"d_model": 16, "heads": 2, "layers": 2, "d_ff": 32, "dropout": 0.0} | options
    return TransformerQA(score=ScaledDot, **sizes)


def _sentences(**options) -> TransformerQA:
    return _qa(unit="sentence", **options)


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


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: _qa(heads=3), "heads=3 must divide d_model=16"),
        (lambda: _qa(unit="phrase"), "unit must be one of ('word', 'sentence'), got 'phrase'"),
        (lambda: _sentences(sentence_len=0), "TransformerQA: sentence_len must be >= 1, got 0"),
        (lambda: _qa(num_answers=0), "TransformerQA: num_answers must be >= 1, got 0"),
        (lambda: _qa(memory_size=0), "TransformerQA: memory_size must be >= 1, got 0"),
    ],
)
def test_bad_options_name_the_option(build, message):
    with pytest.raises(ValueError) as err:
        build()
    assert message in str(err.value)


def test_sentences_longer_than_sentence_len_name_the_option():
    with pytest.raises(ValueError, match="TransformerQA: sentences of 3 words exceed sentence_len=2"):
        _sentences(sentence_len=2)({"story": STORY, "query": QUERY})


def test_serves_the_qa_family_only():
    assert TransformerQA.families == ("qa",)
