"""SQuAD answers whose text is not at their answer_start: moved to the nearest exact occurrence, or skipped, counted once."""

import json
import logging
from pathlib import Path

from attnmem.data.span.datamodule import SpanDataModule
from attnmem.data.span.squad_files import SquadFiles, find_answer, read_squad

CONTEXT = "The town of Lisk lies on the river. Lisk was founded by the Norsemen, who named the town."


def write(tmp_path: Path, answers: list[tuple[str, int]]) -> Path:
    """One article, one question per answer, on CONTEXT."""
    qas = [{"id": f"q{k}", "question": "What?", "answers": [{"text": t, "answer_start": s}]}
           for k, (t, s) in enumerate(answers)]
    path = tmp_path / "squad.json"
    path.write_text(json.dumps({"data": [{"title": "a", "paragraphs": [{"context": CONTEXT, "qas": qas}]}]}))
    return path


def test_find_answer_takes_the_nearest_exact_occurrence():
    assert find_answer(CONTEXT, "Lisk", 12) == ("exact", 12)
    assert find_answer(CONTEXT, "Lisk", 0) == ("moved", 12)  # both "Lisk"s: the one nearest 0
    assert find_answer(CONTEXT, "Lisk", 40) == ("moved", 36)
    assert find_answer(CONTEXT, "town", 70) == ("moved", CONTEXT.rindex("town"))
    assert find_answer(CONTEXT, "Oslo", 3) == ("missing", -1)
    assert find_answer(CONTEXT, "  ", 3) == ("missing", -1)
    assert find_answer(CONTEXT, "town", len(CONTEXT) + 1) == ("bad_start", -1)
    assert find_answer(CONTEXT, "town", "4") == ("bad_start", -1)


def test_misplaced_answers_are_moved_or_skipped_and_counted_once(tmp_path, caplog):
    answers = [("the river", CONTEXT.index("the river")), ("Norsemen", 0), ("Lisk", 0), ("river", 0),
               ("Oslo", 0), ("the sea", 5)]
    path = write(tmp_path, answers)
    with caplog.at_level(logging.WARNING):
        records = read_squad(path)[0]
    assert [r.id for r in records] == ["q0", "q1", "q2", "q3"]
    assert all(r.context[s : s + len(t)] == t for r in records for t, s in r.answers)
    assert [r.answers[0][1] for r in records] == [25, 60, 12, 29]
    messages = [r.getMessage() for r in caplog.records]
    moved = [m for m in messages if "moved" in m]
    assert moved == [f"{path}: 3 answer(s) whose text is not at answer_start moved to its nearest occurrence in "
                     "the context (first: data[0].paragraphs[0].qas[1].answers[0])"]
    missing = [m for m in messages if "not in the context" in m]
    assert missing == [f"{path}: 2 answer(s) whose text is not in the context skipped "
                       "(first: data[0].paragraphs[0].qas[4].answers[0])"]


def test_every_answer_start_zero_trains_on_the_right_spans(tmp_path):
    words = ["the river", "Norsemen", "founded", "named the town"]
    path = write(tmp_path, [(w, 0) for w in words] * 3)  # a file written with every answer_start = 0
    dm = SpanDataModule(source=SquadFiles(train_path=str(path), val_path=str(path)), batch_size=4)
    dm.setup("fit")
    train = dm.examples("train")
    assert len(train) == 12 and [ex.span_text(ex.start, ex.end) for ex in train] == words * 3

