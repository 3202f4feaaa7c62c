"""The SQuAD reader and datamodule: official JSON, offsets, alignment, truncation, counts, bad input, embeddings."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
from conftest import REAL_DATA

from attnmem.attention import Dot
from attnmem.core.dims import SpanDims
from attnmem.core.errors import UserError
from attnmem.core.glove import read_vectors
from attnmem.data.span.datamodule import SpanDataModule
from attnmem.data.span.squad_files import SquadFiles, read_squad, split_articles
from attnmem.data.span.tensors import UNK, SpanRecord, align, build_examples, tokenize
from attnmem.models.dcn import DCN

PART_A = (REAL_DATA or Path("/nonexistent")) / "squad" / "dev-v1.1-part-a.json"  # the first 40 dev articles


def qa(qid: str, question: str, answers: list[tuple[str, int]], **extra) -> dict:
    return {"id": qid, "question": question, "answers": [{"text": t, "answer_start": s} for t, s in answers], **extra}


def article(title: str, context: str, qas: list[dict]) -> dict:
    return {"title": title, "paragraphs": [{"context": context, "qas": qas}]}


def write(tmp_path: Path, articles: list[dict], name: str = "squad.json", version: str = "1.1") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"version": version, "data": articles}))
    return path


def small_file(tmp_path: Path, articles: int = 4) -> Path:
    """Articles about made-up towns: each question's answer is one or two words of its context."""
    docs = []
    for k in range(articles):
        context = f"Town{k} lies on the river Ouse. It was founded in 19{k}0 by the Norsemen of Lisk."
        docs.append(
            article(
                f"t{k}",
                context,
                [
                    qa(f"q{k}a", f"Where does Town{k} lie?", [("the river Ouse", context.index("the river"))]),
                    qa(f"q{k}b", f"When was Town{k} founded?", [(f"19{k}0", context.index("19"))]),
                    qa(
                        f"q{k}c",
                        "Who founded it?",
                        [("the Norsemen", context.index("the Norsemen")), ("Norsemen", context.index("Norsemen"))],
                    ),
                ],
            )
        )
    return write(tmp_path, docs)


def test_tokenize_keeps_character_offsets():
    text = "Hello, world's end."
    assert tokenize(text) == [
        ("Hello", 0, 5),
        (",", 5, 6),
        ("world", 7, 12),
        ("'", 12, 13),
        ("s", 13, 14),
        ("end", 15, 18),
        (".", 18, 19),
    ]
    other = "Zürich, 1990s: «déjà vu»"
    assert [w for w, _, _ in tokenize(other)] == ["Zürich", ",", "1990s", ":", "«", "déjà", "vu", "»"]
    assert all(other[s:e] == w for w, s, e in tokenize(other))


def test_align_maps_characters_to_tokens():
    offsets = [(s, e) for _, s, e in tokenize("born in the 1990s, in Lisk")]
    assert align(offsets, 8, 17) == (2, 3, True)  # "the 1990s"
    assert align(offsets, 12, 16) == (3, 3, False)  # "1990" inside the token "1990s"
    assert align(offsets, 1, 3) == (0, 0, False)  # "or" inside "born"
    assert align(offsets, 7, 8) is None  # only the space


def test_read_squad_and_split_by_article(tmp_path):
    articles = read_squad(small_file(tmp_path, 5))
    assert [len(a) for a in articles] == [3] * 5
    assert articles[0][2].answers == (("the Norsemen", 56), ("Norsemen", 60))
    train, val, test = split_articles(5, [0.2, 0.2], seed=0)
    assert sorted(train + val + test) == list(range(5)) and len(val) == len(test) == 1
    assert split_articles(5, [0.2, 0.2], seed=0) == [train, val, test]


def test_v2_unanswerable_and_bad_answer_start_are_counted_and_skipped(tmp_path, caplog):
    context = "Lisk is a small town."
    path = write(
        tmp_path,
        [
            article(
                "a",
                context,
                [
                    qa("ok", "What is Lisk?", [("a small town", 8)]),
                    qa(
                        "no",
                        "Who rules Lisk?",
                        [],
                        is_impossible=True,
                        plausible_answers=[{"text": "x", "answer_start": 0}],
                    ),
                    qa("bad", "Where?", [("town", 400)]),
                    qa("bad2", "Where else?", [("town", 99)]),
                ],
            )
        ],
        version="v2.0",
    )
    with caplog.at_level(logging.WARNING):
        articles = read_squad(path)
    assert [r.id for r in articles[0]] == ["ok"]
    bad = [r.getMessage() for r in caplog.records if "answer_start" in r.getMessage()]
    assert len(bad) == 1 and "2 answer(s)" in bad[0] and "data[0].paragraphs[0].qas[2].answers[0]" in bad[0]
    assert any("1 unanswerable" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("drop", "where"),
    [
        (("qas", 1, "answers"), "data[0].paragraphs[0].qas[1].answers"),
        (("qas", 0, "answers", 0, "answer_start"), "data[0].paragraphs[0].qas[0].answers[0].answer_start"),
        (("context",), "data[0].paragraphs[0].context"),
    ],
)
def test_a_missing_key_names_the_file_and_json_path(tmp_path, drop, where):
    doc = article("a", "Lisk is a town.", [qa("a", "What?", [("a town", 8)]), qa("b", "Is?", [("town", 10)])])
    node = doc["paragraphs"][0]
    for key in drop[:-1]:
        node = node[key]
    del node[drop[-1]]
    path = write(tmp_path, [doc])
    with pytest.raises(UserError) as err:
        read_squad(path)
    assert str(err.value) == f"{path}: {where} is missing (the SQuAD format needs it)"
    del_root = write(tmp_path, [], name="empty.json")
    del_root.write_text("{}")
    with pytest.raises(UserError, match=r"empty.json: data is missing"):
        read_squad(del_root)


def test_unaligned_and_truncated_answers_are_counted_and_skipped_in_training_only(caplog):
    records = [
        SpanRecord("a", "It ended in the 1990s.", "When?", (("1990", 16),)),
        SpanRecord("b", "one two three four five six", "Six?", (("six", 24),)),
        SpanRecord("c", "one two three", "Two?", (("two", 4),)),
    ]
    with caplog.at_level(logging.WARNING):
        train = build_examples(records, split="train", max_context_len=4, max_question_len=5, lowercase=True)
        val = build_examples(records, split="val", max_context_len=4, max_question_len=5, lowercase=True)
    assert [ex.id for ex in train] == ["c"]
    assert [(ex.id, ex.start, ex.end) for ex in val] == [("a", -1, -1), ("b", -1, -1), ("c", 1, 1)]
    assert val[0].context_words == ("it", "ended", "in", "the")  # cut to 4 tokens
    messages = " | ".join(r.getMessage() for r in caplog.records)
    for expected in (
        "train split: 1 question(s) whose answer does not start and end on token edges (skipped)",
        "train split: 2 question(s) with contexts cut",
        "val split: 2 question(s) whose answer lies past",
    ):
        assert expected in messages


def test_datamodule_batches_map_back_to_the_answer_text(tmp_path):
    source = SquadFiles(train_path=str(small_file(tmp_path, 5)), val_fraction=0.2, test_fraction=0.2)
    dm = SpanDataModule(source=source, batch_size=4)
    dm.prepare_data()
    dm.setup("fit")
    assert dm.has_test and [len(dm.examples(s)) for s in ("train", "val", "test")] == [9, 3, 3]
    batch = next(iter(dm.train_dataloader()))
    assert set(batch) == {"context", "question", "start", "end", "index"}
    assert batch["context"].shape[0] == batch["question"].shape[0] == 4 and batch["start"].shape == (4,)
    for i, s, e in zip(batch["index"].tolist(), batch["start"].tolist(), batch["end"].tolist()):
        example = dm.examples("train")[i]
        assert example.span_text(s, e) == example.answers[0]
        words = [dm.data.vocab[w] for w in batch["context"][batch["index"].tolist().index(i)].tolist() if w]
        assert words == list(example.context_words)
    assert dm.dims == SpanDims(vocab_size=len(dm.data.vocab), embeddings=None)
    assert dm.data_files == [tmp_path / "squad.json"]


def test_datamodule_options_fail_fast(tmp_path):
    with pytest.raises(ValueError, match="data.source.val_fraction"):
        SquadFiles(train_path="x.json", val_fraction=1.0)
    with pytest.raises(UserError, match=r"data.source.train_path=.*missing.json: no such file"):
        SpanDataModule(source=SquadFiles(train_path=str(tmp_path / "missing.json"))).prepare_data()


def test_embeddings_from_a_glove_file(tmp_path):
    path = tmp_path / "glove.txt"
    path.write_text("lisk 1 2 3\nTown 4 5 6\nlisk 7 8 9\n")
    vectors = read_vectors(path, ["<pad>", "<unk>", "lisk", "town", "river"])
    assert vectors.dim == 3 and sorted(vectors.table) == ["lisk", "town"]  # <unk> and river have none
    assert vectors.table["lisk"].tolist() == [1, 2, 3] and vectors.table["town"].tolist() == [4, 5, 6]  # first wins
    weight = vectors.matrix(["<pad>", "<unk>", "town", "river"])
    assert weight.tolist() == [[0, 0, 0], [0, 0, 0], [4, 5, 6], [0, 0, 0]]  # no vector: zeros (Xiong et al. 2017)
    path.write_text("lisk 1 2 3\nTown 4 5 6\nriver 7 8\n")
    with pytest.raises(UserError, match=rf"^{path}:3: expected a word and 3 numbers, got 2 values$"):
        read_vectors(path, ["river"])


def val_file(tmp_path: Path) -> Path:
    """One article whose names occur in no training question of `small_file`."""
    context = "Zorbia lies on the river Quellen, near Vexmoor."
    where = qa("v1", "Where does Zorbia lie?", [("the river Quellen", context.index("the river"))])
    return write(tmp_path, [article("v", context, [where])], name="val.json")


def test_words_outside_training_with_a_vector_get_their_own_frozen_vector(tmp_path):
    glove = tmp_path / "glove.txt"
    glove.write_text("zorbia 0.5 -1 2\nQuellen 3 0.25 -4\nriver 1 1 1\n")  # vexmoor and norsemen have no vector
    source = SquadFiles(train_path=str(small_file(tmp_path)), val_path=str(val_file(tmp_path)), embeddings=str(glove))
    dm = SpanDataModule(source=source)
    dm.setup("fit")
    vocab, weight = dm.data.vocab, dm.dims.embeddings
    train_words = {w for ex in dm.examples("train") for w in (*ex.context_words, *ex.question_words)}
    assert {"zorbia", "quellen"}.isdisjoint(train_words) and {"zorbia", "quellen"} <= set(vocab)
    assert "vexmoor" not in vocab and train_words <= set(vocab)  # no vector, only in validation: <unk>
    assert weight[vocab.index("zorbia")].tolist() == [0.5, -1, 2]  # exactly the file's vectors
    assert weight[vocab.index("quellen")].tolist() == [3, 0.25, -4]
    assert weight[vocab.index("norsemen")].abs().sum() == 0 and weight[:2].abs().sum() == 0  # no vector, pad, unk: 0
    ids = dm.data.tensors["val"]["context"][0].tolist()
    assert [vocab[i] for i in ids[:2]] == ["zorbia", "lies"] and ids[7:9] == [UNK, UNK]  # near, vexmoor
    net = DCN(vocab_size=len(vocab), score=Dot, embeddings=weight, hidden_size=4, pool_size=2)
    assert not net.embedding.weight.requires_grad
    assert net.embedding(torch.tensor([vocab.index("zorbia")])).tolist() == [[0.5, -1, 2]]
    plain = SpanDataModule(source=SquadFiles(train_path=str(source.paths["train"]), val_path=str(source.paths["val"])))
    plain.setup("fit")
    assert plain.dims.embeddings is None and sorted(plain.data.vocab[2:]) == sorted(train_words)  # training words only


def test_datamodule_passes_embeddings_to_the_model(tmp_path):
    glove = tmp_path / "glove.txt"
    glove.write_text("the 0.5 0.5\nriver 1 -1\n")
    dm = SpanDataModule(
        source=SquadFiles(train_path=str(small_file(tmp_path)), val_fraction=0.25, embeddings=str(glove))
    )
    dm.setup("fit")
    weight = dm.dims.embeddings
    assert weight.shape == (len(dm.data.vocab), 2)
    assert weight[dm.data.vocab.index("river")].tolist() == [1.0, -1.0]
    assert dm.data_files[-1] == glove


@pytest.mark.skipif(not PART_A.is_file(), reason="no squad/dev-v1.1-part-a.json in $ATTNMEM_DATA_DIR")
def test_the_official_dev_part_a_file_reads():
    articles = read_squad(PART_A)
    assert len(articles) == 40 and sum(map(len, articles)) == 8981
    assert all(r.context[s : s + len(t)] == t for a in articles for r in a for t, s in r.answers)
