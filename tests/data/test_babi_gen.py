"""bAbI generator: seeded, and every answer checked by replaying the parsed story with an independent reader."""

import re

import pytest
import torch

from attnmem.core.dims import QADims
from attnmem.data.babi_simulator import generate_babi
from attnmem.data.qa.babi_generator import BabiGenerator
from attnmem.data.qa.babi_text import parse_babi
from attnmem.data.qa.datamodule import QADataModule
from attnmem.data.qa.tensors import Example

torch.set_num_threads(1)

SIZES = {"statements_per_question": 2, "people": 4, "locations": 6, "objects": 3, "questions_per_story": 5}
MOVE = re.compile(r"(\w+) (?:moved|went|journeyed|travelled|went back) to the (\w+)")
TAKE = re.compile(r"(\w+) (?:got|took|grabbed|picked up) the (\w+) there")
DROP = re.compile(r"(\w+) (?:dropped|left|discarded|put down) the (\w+)(?: there)?")
MODULE_OPTIONS = {"tasks", "memory_size", "batch_size", "num_workers"}


def generated_module(**options) -> QADataModule:
    """A qa datamodule on generated bAbI: the generator's options go to its `BabiGenerator` source."""
    module = {k: options.pop(k) for k in MODULE_OPTIONS & set(options)}
    return QADataModule(source=BabiGenerator(**options), **module)


def replay(story: tuple[tuple[str, ...], ...]) -> tuple[dict, dict]:
    """Where each person is, and the places each object has been (a new entry each time it changes place)."""
    at: dict[str, str] = {}
    holder: dict[str, str] = {}
    places: dict[str, list[str]] = {}
    for words in story:
        sentence = " ".join(words)
        if match := MOVE.fullmatch(sentence):
            person, location = match.groups()
            at[person] = location
            for obj in (o for o, h in holder.items() if h == person):
                places[obj].append(location)
        elif match := TAKE.fullmatch(sentence):
            person, obj = match.groups()
            holder[obj] = person
            if not places.get(obj) or places[obj][-1] != at[person]:
                places.setdefault(obj, []).append(at[person])
        elif match := DROP.fullmatch(sentence):
            assert holder.pop(match[2]) == match[1], sentence
        else:
            raise AssertionError(f"not a sentence of the simulator: {sentence!r}")
    return at, places


def check(ex: Example) -> None:
    """Assert that the example's answer and supports follow from its story."""
    at, places = replay(ex.story)
    query, facts = " ".join(ex.query), [" ".join(ex.story[i]) for i in ex.supports]
    assert ex.supports and all(0 <= i < len(ex.story) for i in ex.supports)
    if ex.task == 1:
        person = re.fullmatch(r"where is (\w+)", query)[1]
        assert ex.answer == at[person]
        assert facts == [next(" ".join(s) for s in reversed(ex.story) if s[0] == person)]  # their last move
    elif ex.task == 2:
        obj = re.fullmatch(r"where is the (\w+)", query)[1]
        assert ex.answer == places[obj][-1] and len(facts) == 2 and any(obj in f for f in facts)
    elif ex.task == 3:
        obj, now = re.fullmatch(r"where was the (\w+) before the (\w+)", query).groups()
        assert places[obj][-1] == now and places[obj].count(now) == 1 and ex.answer == places[obj][-2]
        assert len(facts) >= 3
    elif ex.task == 6:
        person, place = re.fullmatch(r"is (\w+) in the (\w+)", query).groups()
        assert ex.answer == ("yes" if at[person] == place else "no")
    else:
        raise AssertionError(f"unexpected task {ex.task}")


@pytest.mark.parametrize("task", [1, 2, 3, 6])
def test_answers_follow_from_the_story(task):
    examples = parse_babi(generate_babi(task, 200, 7, "train", **SIZES), f"gen{task}", task)
    assert len(examples) == 200
    for ex in examples:
        check(ex)
    if task == 6:
        assert 0.35 < sum(ex.answer == "yes" for ex in examples) / 200 < 0.65
    assert len({ex.answer for ex in examples}) >= (3 if task != 6 else 2)


def test_replay_catches_a_wrong_answer():
    (ex, *_) = parse_babi(generate_babi(1, 5, 0, "train", **SIZES), "gen", 1)
    wrong = Example(ex.story, ex.query, "mars", ex.supports, ex.task, ex.story_id, ex.story_key)
    with pytest.raises(AssertionError):
        check(wrong)


def test_generation_is_seeded():
    text = generate_babi(2, 50, 0, "train", **SIZES)
    assert text == generate_babi(2, 50, 0, "train", **SIZES)
    assert text != generate_babi(2, 50, 1, "train", **SIZES)
    assert text != generate_babi(2, 50, 0, "test", **SIZES)
    assert sum("\t" in line for line in text) == 50


def test_datamodule_contract_and_determinism():
    options = {"tasks": [1, 3, 6], "num_train": 60, "num_val": 20, "num_test": 30, "memory_size": 10, "batch_size": 16}
    dm = generated_module(**options)
    dm.setup("fit")
    assert dm.family == "qa" and dm.has_test and dm.data_files == []
    dims = dm.dims
    assert isinstance(dims, QADims)
    assert dims.tasks == [1, 3, 6] and dims.memory_size == 10 and dims.vocab_size == len(dm.vocab)
    assert {"yes", "no"} <= set(dm.answers) and dm.answers[0] == "<unk>"
    batch = next(iter(dm.train_dataloader()))
    # a batch keeps the memory slots its longest story fills; J covers statements and queries
    assert batch["story"].shape[0] == 16 and batch["story"].shape[1] <= 10 and batch["story"][:, -1].ne(0).any()
    assert batch["story"].shape[2] <= dims.sentence_len and batch["query"].shape == (16, dims.query_len)
    assert all(v.dtype == torch.long for v in batch.values())
    assert [sum(len(b["answer"]) for b in loader) for loader in
            (dm.train_dataloader(), dm.val_dataloader(), dm.test_dataloader())] == [180, 60, 90]
    same, other = generated_module(**options), generated_module(**options, seed=1)
    same.setup()
    other.setup()
    assert all(torch.equal(t, same.qa.splits["test"][k]) for k, t in dm.qa.splits["test"].items())
    assert not torch.equal(dm.qa.splits["test"]["story"], other.qa.splits["test"]["story"])


@pytest.mark.parametrize(("option", "value"), [("tasks", [4]), ("source.num_locations", 1), ("source.num_people", 9),
                                                ("memory_size", 0), ("source.num_train", 0)])
def test_bad_options_raise_value_error_naming_them(option, value):
    with pytest.raises(ValueError, match=f"data.{option}"):
        generated_module(**{option.removeprefix("source."): value})
