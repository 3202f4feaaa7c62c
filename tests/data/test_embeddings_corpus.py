"""The embeddings corpus: tokeniser, vocabulary, id stream, subsampling and noise, windows, the four sources."""

from __future__ import annotations

import csv
import json
import math

import pytest
import torch
from conftest import FAST

from attnmem.core.errors import UserError
from attnmem.data.babi_simulator import generate_babi
from attnmem.data.embeddings.babi_corpus import BabiCorpus
from attnmem.data.embeddings.babi_gen_corpus import GeneratedBabiCorpus
from attnmem.data.embeddings.corpus import Vocabulary, encode, keep_probabilities, noise_distribution, tokenize
from attnmem.data.embeddings.datamodule import EmbeddingsDataModule
from attnmem.data.embeddings.squad_contexts import SquadContexts
from attnmem.data.embeddings.text_folder import TextFolder
from attnmem.data.embeddings.windows import Windows
from attnmem.data.span.squad_files import SquadFiles
from attnmem.runtime import run


def test_tokenize_lowercases_keeps_inner_apostrophes_and_drops_punctuation():
    assert tokenize("Don't stop, O'Neill_x -- 42 times!") == ["don't", "stop", "o'neill", "x", "42", "times"]


def test_vocabulary_by_count_then_word_with_min_count_and_cap():
    docs = ["b a c a", "b a d", "c"]  # a 3, b 2, c 2, d 1
    vocab = Vocabulary.build(docs, min_count=2, max_vocab=None, where="w")
    assert vocab.itos == ["<pad>", "a", "b", "c"] and vocab.counts == [0, 3, 2, 2]
    assert Vocabulary.build(docs, min_count=1, max_vocab=2, where="w").itos == ["<pad>", "a", "b"]


def test_an_empty_corpus_and_one_below_min_count_stop_in_one_line():
    with pytest.raises(
        UserError, match=r"^data.source.data_dir=x: the training text has no word \(the corpus is empty"
    ):
        Vocabulary.build(["", " ,. "], min_count=1, max_vocab=None, where="data.source.data_dir=x")
    with pytest.raises(
        UserError,
        match=r"no word occurs data.min_count=5 times \(2 distinct, the most frequent 2 "
        r"times\): lower data.min_count",
    ):
        Vocabulary.build(["a b a"], min_count=5, max_vocab=None, where="w")


def test_encode_drops_unknown_words_and_pads_between_documents():
    vocab = Vocabulary(["<pad>", "a", "b"], [0, 3, 2])
    assert encode(["a z b", "zz", "b"], vocab, window=2).tolist() == [0, 0, 1, 2, 0, 0, 2, 0, 0]


def test_subsampling_and_noise_by_hand():
    keep = keep_probabilities([0, 90, 10], t=0.01)  # f = 0.9, 0.1: sqrt(0.01/0.9), sqrt(0.01/0.1)
    assert keep.tolist() == pytest.approx([1.0, math.sqrt(0.01 / 0.9), math.sqrt(0.1)])
    assert keep_probabilities([0, 90, 10], t=None).tolist() == [1.0, 1.0, 1.0]
    noise = noise_distribution([0, 16, 1])  # 16^0.75 = 8, 1^0.75 = 1
    assert noise.tolist() == pytest.approx([0.0, 8 / 9, 1 / 9])


def _windows(stream: list[int], **options) -> Windows:
    settings = {
        "window": 1,
        "keep": torch.ones(4),
        "noise": torch.tensor([0.0, 1, 1, 1]),
        "negatives": 2,
        "batch_size": 2,
        "seed": 0,
        "shuffle": False,
    } | options
    return Windows(torch.tensor(stream), **settings)


def test_evaluation_windows_are_every_centre_in_order_with_fixed_negatives():
    windows = _windows([0, 1, 2, 0, 3, 0])
    batches = list(windows)
    assert [b["window"].tolist() for b in batches] == [[[0, 1, 2], [1, 2, 0]], [[0, 3, 0]]]
    assert all(((b["negatives"] >= 1) & (b["negatives"] <= 3)).all() for b in batches)  # never the pad
    again = list(windows)
    assert all(torch.equal(a["negatives"], b["negatives"]) for a, b in zip(batches, again))
    assert [b["window"].tolist() for b in _windows([0, 1, 2, 3, 0], limit=2)] == [[[0, 1, 2], [2, 3, 0]]]


def test_training_windows_subsample_reshuffle_each_pass_and_repeat_with_the_seed():
    stream = [0] + [1, 2] * 50 + [0]
    keep = torch.tensor([1.0, 1.0, 0.0, 1.0])  # word 2 always dropped: the 1s become neighbours
    windows = _windows(stream, keep=keep, shuffle=True, batch_size=100)
    first, second = next(iter(windows))["window"], next(iter(windows))["window"]
    assert len(first) == 50 and set(first[:, 1].tolist()) == {1}
    assert not torch.equal(first, second)  # another pass, another order
    assert torch.equal(next(iter(_windows(stream, keep=keep, shuffle=True, batch_size=100)))["window"], first)


def _babi(tmp_path):
    folder = tmp_path / "babi"
    folder.mkdir()
    (folder / "qa1_single-supporting-fact_train.txt").write_text(
        "1 Mary moved to the bathroom.\n2 Where is Mary?\tbathroom\t1\n1 John went to the hallway.\n"
        "2 Where is John?\thallway\t1\n"
    )
    (folder / "qa1_single-supporting-fact_test.txt").write_text("1 Sandra went to the garden.\n")
    return folder


def test_babi_stories_lose_line_numbers_answers_and_supports(tmp_path):
    source = BabiCorpus(data_dir=str(_babi(tmp_path)), val_fraction=0.5)
    assert list(source.all_documents()) == [
        "Mary moved to the bathroom. Where is Mary?",
        "John went to the hallway. Where is John?",
    ]
    assert sorted([*source.documents("train"), *source.documents("val")]) == sorted(source.all_documents())
    assert [p.name for p in source.data_files] == ["qa1_single-supporting-fact_train.txt"]  # never the test file


def test_babi_line_without_number_and_missing_folder_name_the_file(tmp_path):
    folder = _babi(tmp_path)
    (folder / "qa2_two-supporting-facts_train.txt").write_text("1 Mary went home.\nno number here\n")
    with pytest.raises(UserError, match=r"qa2_two-supporting-facts_train.txt:2: expected 'ID text'"):
        list(BabiCorpus(data_dir=str(folder)).all_documents())
    with pytest.raises(UserError, match=r"data.source.data_dir=.*nothing: no such folder"):
        BabiCorpus(data_dir=str(tmp_path / "nothing")).prepare_data()
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"no file matches data.source.pattern=\*_train.txt: expected bAbI files"):
        BabiCorpus(data_dir=str(tmp_path / "empty")).prepare_data()


def test_text_folder_reads_lines_and_names_a_missing_folder_or_pattern(tmp_path):
    (tmp_path / "a.txt").write_text("one two\n\nthree\n")
    (tmp_path / "b.txt").write_text("four\n")
    assert list(TextFolder(data_dir=str(tmp_path)).all_documents()) == ["one two\n", "three\n", "four\n"]
    with pytest.raises(UserError, match=r"data.source.data_dir=.*missing: no such folder"):
        TextFolder(data_dir=str(tmp_path / "missing")).prepare_data()
    with pytest.raises(UserError, match=r"no file matches data.source.pattern=\*.md"):
        TextFolder(data_dir=str(tmp_path), pattern="*.md").prepare_data()


def test_squad_contexts_of_the_training_articles_only(tmp_path):
    articles = [
        {
            "title": str(k),
            "paragraphs": [
                {
                    "context": f"article {k} paragraph {p}",
                    "qas": [
                        {"id": f"{k}{p}", "question": "which?", "answers": [{"text": "article", "answer_start": 0}]}
                    ],
                }
                for p in range(2)
            ],
        }
        for k in range(10)
    ]
    path = tmp_path / "squad.json"
    path.write_text(json.dumps({"data": articles}))
    source = SquadContexts(path=str(path), val_fraction=0.2, test_fraction=0.2, split_seed=3)
    split = SquadFiles(train_path=str(path), val_fraction=0.2, test_fraction=0.2, split_seed=3).splits()
    for name in ("train", "val"):
        assert set(source.documents(name)) == {r.context for r in split[name]}
    held_out = {r.context for r in split["test"]} | {r.context for r in split["val"]}
    assert not held_out & set(source.documents("train"))


def test_squad_contexts_bad_file_is_one_line(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"data": [{"title": "x"}]}')
    with pytest.raises(UserError, match=r"bad.json: not a SQuAD file \(missing 'paragraphs'\)"):
        list(SquadContexts(path=str(path)).documents("train"))


def test_datamodule_vocab_from_training_text_kept_in_its_state(tmp_path):
    (tmp_path / "a.txt").write_text("a b a c\n" * 20)
    dm = EmbeddingsDataModule(source=TextFolder(data_dir=str(tmp_path), val_fraction=0.3), min_count=1)
    dm.prepare_data()
    dm.setup()
    assert dm.dims.itos == ["<pad>", "a", "b", "c"] and dm.dims.window == 2
    other = EmbeddingsDataModule(source=TextFolder(data_dir=str(tmp_path), val_fraction=0.3), min_count=1)
    other.load_state_dict(dm.state_dict())
    other.setup()
    assert other.dims == dm.dims and torch.equal(other.streams["val"], dm.streams["val"])


def test_generated_stories_lose_line_numbers_answers_and_supports():
    source = GeneratedBabiCorpus(tasks=[1, 2], num_stories=1, questions_per_story=2)
    assert generate_babi(2, 2, 0, "train", questions_per_story=2)[3:5] == [
        "4 Where is the football?\tgarden\t2 3", "5 Daniel moved to the office."]  # what is stripped below
    assert source.all_documents() == [
        "Mary travelled to the office. John moved to the office. Where is John? Daniel went back to the hallway. "
        "John went back to the hallway. Where is John?",
        "Mary moved to the garden. Daniel went to the garden. Daniel got the football there. Where is the football? "
        "Daniel moved to the office. Daniel went back to the bedroom. Where is the football?",
    ]
    assert source.data_files == [] and source.prepare_data() is None  # nothing read, nothing fetched


def test_generated_corpus_is_the_simulators_text_read_as_babi_corpus_reads_files(tmp_path):
    options = {"num_stories": 30, "questions_per_story": 3, "statements_per_question": 3, "seed": 5}
    for task in (3, 6):  # the training text of data=babi_gen: num_train = num_stories x questions_per_story
        lines = generate_babi(task, 90, 5, "train", questions_per_story=3, statements_per_question=3)
        (tmp_path / f"qa{task}_task_train.txt").write_text("\n".join(lines) + "\n")
    generated = GeneratedBabiCorpus(tasks=[3, 6], **options).all_documents()
    assert len(generated) == 60 and generated == list(BabiCorpus(data_dir=str(tmp_path)).all_documents())


def test_generated_splits_are_seeded_disjoint_and_of_the_fraction():
    source = GeneratedBabiCorpus(num_stories=100, val_fraction=0.25)
    train, val = list(source.documents("train")), list(source.documents("val"))
    assert len(source.all_documents()) == 400 and sorted(train + val) == sorted(source.all_documents())
    assert not set(train) & set(val) and 80 <= len(val) <= 120
    again = GeneratedBabiCorpus(num_stories=100, val_fraction=0.25)
    assert list(again.documents("val")) == val and list(again.documents("train")) == train
    assert list(GeneratedBabiCorpus(num_stories=100, val_fraction=0.25, split_seed=1).documents("val")) != val
    assert GeneratedBabiCorpus(num_stories=100, seed=1).all_documents() != source.all_documents()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"tasks": [1, 4]}, "data.source.tasks must be distinct tasks of [1, 2, 3, 6], got [1, 4]"),
        ({"tasks": []}, "data.source.tasks must be distinct tasks of [1, 2, 3, 6], got []"),
        ({"num_stories": 0}, "data.source.num_stories must be in [1, inf], got 0"),
        ({"num_locations": 1}, "data.source.num_locations must be in [2, 9], got 1"),
        ({"num_people": 9}, "data.source.num_people must be in [1, 8], got 9"),
        ({"val_fraction": 1.0}, "data.source.val_fraction must be in (0, 1), got 1.0"),
    ],
)
def test_generated_corpus_bad_option_is_one_line(options, message):
    with pytest.raises(ValueError) as caught:
        GeneratedBabiCorpus(**options)
    assert str(caught.value) == message


@pytest.mark.parametrize("model", ["word2vec", "nnlm", "cw"])
def test_embeddings_models_train_on_the_generated_corpus_by_default(compose_cfg, tmp_path, model):
    cfg = compose_cfg(f"model={model}", *FAST, "data.source.num_stories=25", "data.batch_size=32",
                      "data.val_windows=500", "trainer.max_epochs=3", "optimizer.lr=0.01")
    assert cfg.data.source._target_ == "attnmem.data.embeddings.babi_gen_corpus.GeneratedBabiCorpus"
    run.train(cfg)
    rows = list(csv.DictReader((tmp_path / "run" / "csv" / "metrics.csv").open()))
    val = [float(r["val/loss"]) for r in rows if r.get("val/loss")]
    assert len(val) >= 3 and val[-1] < val[0], val
