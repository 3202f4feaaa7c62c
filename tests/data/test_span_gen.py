"""Generated span QA: seeded, answers are spans of their contexts, the asked attribute needs the entity."""

from __future__ import annotations

import re

import pytest

from attnmem.core.dims import SpanDims
from attnmem.data.span.datamodule import SpanDataModule
from attnmem.data.span.span_generator import ATTRIBUTES, SpanGenerator, entity_names


def test_records_are_seeded_and_splits_differ():
    source = SpanGenerator(num_train=50, num_val=20, num_test=20)
    again = SpanGenerator(num_train=50, num_val=20, num_test=20)
    assert source.records("train") == again.records("train")
    assert source.records("train")[:20] != source.records("val")
    assert SpanGenerator(num_train=50, seed=1).records("train") != source.records("train")


def test_every_answer_is_its_span_and_every_entity_has_the_asked_attribute():
    source = SpanGenerator(num_train=200, entities_per_context=3, facts_per_entity=2, fillers=1)
    names = entity_names(50)
    for record in source.records("train"):
        ((text, start),) = record.answers
        assert record.context[start : start + len(text)] == text
        asked = next(
            a
            for a, (_, questions, _) in ATTRIBUTES.items()
            if any(re.fullmatch(re.escape(q).replace(re.escape("{e}"), r"\w+"), record.question) for q in questions)
        )
        entities = [n for n in names if re.search(rf"\b{n}\b", record.context)]
        assert len(entities) == 3 and any(e in record.question for e in entities)
        values = [v for v in ATTRIBUTES[asked][2] if re.search(rf"\b{v}\b", record.context)]
        assert text in values and len(values) >= 3  # one value per entity: matching the entity is needed
        assert len(re.findall(r"[.!?](?:\s|$)", record.context)) == 3 * 2 + 1


def test_batches_and_text_mapping():
    dm = SpanDataModule(source=SpanGenerator(num_train=64, num_val=16, num_test=16), batch_size=16)
    dm.setup()
    batch = next(iter(dm.val_dataloader()))
    assert batch["context"].shape[0] == 16 and batch["start"].le(batch["end"]).all()
    for i, s, e in zip(batch["index"].tolist(), batch["start"].tolist(), batch["end"].tolist()):
        example = dm.examples("val")[i]
        assert example.span_text(s, e) == example.answers[0]
    assert dm.dims == SpanDims(vocab_size=len(dm.data.vocab), embeddings=None) and dm.has_test


def test_options_fail_fast():
    with pytest.raises(ValueError, match=r"data.source.entities_per_context must be in \[1, 8\], got 9"):
        SpanGenerator(entities_per_context=9)
    with pytest.raises(ValueError, match="data.source.facts_per_entity"):
        SpanGenerator(facts_per_entity=7)
