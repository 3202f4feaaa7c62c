"""bAbI and SQuAD files that are not UTF-8, empty, or without a usable question: one line naming the file."""

import json
import re
from pathlib import Path

import pytest
import torch

from attnmem.core.errors import UserError
from attnmem.data.qa.babi_files import BabiFiles
from attnmem.data.qa.datamodule import QADataModule
from attnmem.data.span.datamodule import SpanDataModule
from attnmem.data.span.squad_files import SquadFiles

torch.set_num_threads(1)

STORY = "1 Mary moved to the bathroom.\n2 Where is Mary?\tbathroom\t1\n"
TRAIN = (STORY * 2 + STORY.replace("Mary", "John") * 2).encode()  # two distinct stories: a train and a val one


@pytest.fixture(autouse=True)
def caches(tmp_path, monkeypatch) -> None:
    """Caches in the test's folder, never in the real ~."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ATTNMEM_CACHE", str(tmp_path / "cache"))


def babi_setup(tmp_path: Path, train: bytes, test: bytes | None = None) -> Path:
    """Write a task-1 training (and test) file and set a datamodule up on it; returns the training file."""
    folder = tmp_path / "en"
    folder.mkdir(parents=True)
    (folder / "qa1_x_train.txt").write_bytes(train)
    if test is not None:
        (folder / "qa1_x_test.txt").write_bytes(test)
    dm = QADataModule(source=BabiFiles(data_dir=str(folder)), tasks=[1], memory_size=4, batch_size=4)
    dm.prepare_data()
    dm.setup("fit")
    return folder / "qa1_x_train.txt"


def one_line(error: pytest.ExceptionInfo) -> str:
    """The error's message, checked to be one line."""
    message = str(error.value)
    assert "\n" not in message
    return message


def test_babi_file_not_utf8_names_file_line_and_byte(tmp_path):
    text = (STORY * 3).encode() + b"1 Ren\xe9 went home.\n2 Where is Ren\xe9?\thome\t1\n"
    with pytest.raises(UserError) as err:
        babi_setup(tmp_path, text)
    offset = text.index(b"\xe9")
    assert one_line(err) == (f"{tmp_path / 'en' / 'qa1_x_train.txt'}:7: not UTF-8 text (byte {offset} is b'\\xe9'): "
                             "bAbI files are UTF-8; re-save the file as UTF-8")


@pytest.mark.parametrize(("train", "test", "file", "why"), [
    (b"", None, "train", "the file is empty"),
    (b"\n  \n", None, "train", "the file is empty"),
    (b"1 Mary moved.\n2 John moved.\n", None, "train", "no question in the file"),
    (TRAIN, b"", "test", "the file is empty"),
    (TRAIN, b"1 Mary moved.\n", "test", "no question in the file"),
])
def test_babi_file_empty_or_without_question_names_the_file(tmp_path, train, test, file, why):
    with pytest.raises(UserError) as err:
        babi_setup(tmp_path, train, test)
    assert one_line(err).startswith(f"{tmp_path / 'en' / f'qa1_x_{file}.txt'}: {why}")


def test_babi_split_without_training_or_validation_question(tmp_path):
    with pytest.raises(UserError, match=r"\(4 training stories\): no training question left, "
                                        r"data\.source\.val_fraction=0\.1 took every story"):
        babi_setup(tmp_path / "same", (STORY * 4).encode())  # four equal stories stay on one side
    with pytest.raises(UserError, match=r"\(1 training story\): no validation question"):
        babi_setup(tmp_path / "one", STORY.encode())


def test_babi_file_with_a_byte_order_mark_reads(tmp_path):
    babi_setup(tmp_path, b"\xef\xbb\xbf" + TRAIN)


def squad_setup(tmp_path: Path, data: bytes, **options) -> Path:
    """Write `data` as the SQuAD training file and set a span datamodule up on it; returns the file."""
    path = tmp_path / "train.json"
    path.write_bytes(data)
    dm = SpanDataModule(source=SquadFiles(train_path=str(path), val_fraction=0.5), **options)
    dm.prepare_data()
    dm.setup("fit")
    return path


def squad(*contexts: str, answer: str = "town", start: int | None = None) -> bytes:
    """A SQuAD file of one article per context, each with one question whose answer is `answer`."""
    return json.dumps({"data": [
        {"title": f"t{k}", "paragraphs": [{"context": c, "qas": [
            {"id": f"q{k}", "question": "What?",
             "answers": [{"text": answer, "answer_start": c.find(answer) if start is None else start}]}]}]}
        for k, c in enumerate(contexts)]}).encode()


def test_squad_file_not_utf8_names_file_line_and_byte(tmp_path):
    data = squad("Lisk is a town.", "Caf\u00e9 town.").replace(b"Caf\\u00e9", b"Caf\xe9")
    data = data.replace(b'"data": [', b'"data": [\n')
    with pytest.raises(UserError) as err:
        squad_setup(tmp_path, data)
    at = data.index(b"\xe9")
    assert one_line(err) == (f"{tmp_path / 'train.json'}:2: not UTF-8 text (byte {at} is b'\\xe9'): "
                             "SQuAD files (JSON) are UTF-8; re-save the file as UTF-8")


@pytest.mark.parametrize(("data", "why"), [
    (b"", "the file is empty"),
    (b" \n", "the file is empty"),
    (b'{"data": []}', "no usable question (0 read: 0 unanswerable, 0 answer(s) not in their context)"),
    (json.dumps({"data": [{"paragraphs": [{"context": "Lisk.", "qas": [
        {"id": "a", "question": "Who?", "answers": [], "is_impossible": True}]}]}]}).encode(),
     "no usable question (1 read: 1 unanswerable, 0 answer(s) not in their context)"),
    (squad("Lisk is a town.", "Tarn is a lake.", answer="city"),
     "no usable question (2 read: 0 unanswerable, 2 answer(s) not in their context)"),
])
def test_squad_file_empty_or_without_usable_question_names_the_file(tmp_path, data, why):
    with pytest.raises(UserError) as err:
        squad_setup(tmp_path, data)
    assert one_line(err).startswith(f"{tmp_path / 'train.json'}: {why}")


def test_squad_split_left_without_a_question(tmp_path):
    long = "one two three four five six seven town"
    with pytest.raises(UserError) as err:
        squad_setup(tmp_path, squad(long, long, long, long), max_context_len=4)  # every answer past the cut
    assert re.fullmatch(r"the train split has no usable question \(.*train\.json\): all 2 skipped, their answers "
                        r"lie past data\.max_context_len=4 tokens .*", one_line(err))
    empty = json.loads(squad("Lisk is a town."))
    empty["data"].append({"title": "none", "paragraphs": [{"context": "Nothing here.", "qas": []}]})
    with pytest.raises(UserError, match=r"the (train|val) split has no question \(.*train\.json\): its articles "
                                        r"hold no answerable question"):
        squad_setup(tmp_path, json.dumps(empty).encode())


def test_parallel_text_not_utf8_names_file_line_and_byte(tmp_path):
    from attnmem.data.seq2seq.parallel_text_files import read_pairs

    path = tmp_path / "train.tsv"
    path.write_bytes("a b\tc d\nx y\t\xe9t\xe9\n".encode("latin-1"))
    with pytest.raises(UserError) as caught:
        read_pairs(path, tokens="word")
    assert str(caught.value).startswith(f"{path}:2: not UTF-8 text (byte 12 is b'\\xe9'): parallel text files are UTF-8")
