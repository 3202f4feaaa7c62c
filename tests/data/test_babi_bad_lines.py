"""bAbI lines whose fields are damaged: each is refused with file:line, never read as something else."""

import time

import pytest
from conftest import one_line

from attnmem.core.errors import UserError
from attnmem.data.qa.babi_text import MAX_WORDS, parse_babi

STORY = ["1 Mary moved to the bathroom.", "2 John went to the hallway."]


@pytest.mark.parametrize(("line", "fragments"), [
    ("3 Where is Mary? bathroom 1", ["qa1.txt:3: a question without a TAB-separated answer", "tabs turned into spaces",
                                       "expected 'ID text' or 'ID question?<TAB>answer<TAB>supporting ids'"]),
    ("3 Where is Mary?", ["qa1.txt:3: a question without a TAB-separated answer"]),
    ("3 Where is Mary?\tbathroom 1", ["qa1.txt:3: the answer 'bathroom 1' holds a space"]),
    ("3 Where is Mary?\tbathroom\t1 x", ["qa1.txt:3: supporting id 'x'"]),
    ("3 " + "word " * (MAX_WORDS + 1), [f"qa1.txt:3: a sentence of {MAX_WORDS + 1} words, more than the {MAX_WORDS}"]),
    ("3 " + "who " * (MAX_WORDS + 1) + "?\tbathroom\t1", [f"qa1.txt:3: a sentence of {MAX_WORDS + 1} words"]),
], ids=["tabs-to-spaces", "no-answer", "answer-and-ids-joined", "bad-support", "long-statement", "long-question"])
def test_a_damaged_line_names_file_and_line(line, fragments):
    with pytest.raises(UserError) as err:
        parse_babi([*STORY, line], "qa1.txt", task=1)
    one_line(str(err.value), *fragments)


def test_a_line_of_megabytes_is_refused_at_once_and_shown_cut():
    line = "3 " + "Mary went to the garden " * 60_000  # 1.4 MB
    start = time.perf_counter()
    with pytest.raises(UserError) as err:
        parse_babi([*STORY, line], "qa1.txt", task=1)
    assert time.perf_counter() - start < 5
    message = str(err.value)
    one_line(message, "qa1.txt:3: a sentence of 300,000 words", "characters)")
    assert len(message) < 400


def test_a_good_story_still_parses():
    (example,) = parse_babi([*STORY, "3 Where is Mary?\tbathroom\t1"], "qa1.txt", task=1)
    assert example.answer == "bathroom" and example.query == ("where", "is", "mary") and example.supports == (0,)
