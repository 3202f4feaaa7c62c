"""The classify family's data: sentence splitting, the generator, JSONL/TSV files, aclImdb, SQuAD paragraphs."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
from conftest import one_line

from attnmem.core.errors import UserError
from attnmem.data.classify.aclimdb import SHA256, URL, AclImdb
from attnmem.data.classify.datamodule import ClassifyDataModule
from attnmem.data.classify.document import sentences
from attnmem.data.classify.files import ClassifyFiles
from attnmem.data.classify.generator import CUES, MARKERS, DocumentGenerator
from attnmem.data.classify.squad_topics import SquadTopics


def test_sentences_split_at_end_marks_line_breaks_and_br_tags():
    text = 'He said "Stop!" Then left.<br /><br />Don\'t go... OK?\nA last one'
    assert sentences(text) == [["he", "said", "stop"], ["then", "left"], ["don't", "go"], ["ok"], ["a", "last", "one"]]
    assert sentences("3.5 stars, e.g. fine") == [["3", "5", "stars", "e", "g"], ["fine"]]  # a rule, not a parser
    assert sentences("Keep Case.", lowercase=False) == [["Keep", "Case"]]


def test_generator_decides_each_label_by_its_one_marked_sentence():
    docs = DocumentGenerator(num_train=200, num_val=0, num_test=0, seed=3).documents("train")
    assert docs == DocumentGenerator(num_train=200, seed=3).documents("train")  # seeded
    for doc in docs:
        marked = [j for j, s in enumerate(doc.sentences) if set(s) & set(MARKERS)]
        assert marked == [doc.deciding] and set(doc.sentences[doc.deciding]) & set(CUES[doc.label])
        assert 4 <= len(doc.sentences) <= 8 and all(5 <= len(s) <= 9 for s in doc.sentences)
    # distractors carry cues of other classes: the label is not the document's most frequent cue class
    other = sum(any(set(s) & set(CUES[c]) for c in CUES if c != d.label for s in d.sentences) for d in docs)
    assert other > 150


def test_datamodule_encodes_documents_left_aligned_with_the_deciding_index():
    dm = ClassifyDataModule(source=DocumentGenerator(num_train=20, num_val=4, num_test=4, seed=0), batch_size=4,
                            max_sentences=5, max_words=6)
    dm.setup()
    doc = DocumentGenerator(num_train=20, seed=0).documents("train")[0]
    ids = dm._tensors["train"]["document"][0]  # (S, L)
    assert ids.shape == (5, 6)
    for j, words in enumerate(doc.sentences[:5]):
        assert dm.words(ids[j]) == words[:6]  # cut to max_words, left-aligned
    deciding = dm._tensors["train"]["deciding"]
    assert deciding[0] == (doc.deciding if doc.deciding < 5 else -1)  # a deciding sentence cut off is unknown
    assert dm.dims.classes == ["music", "science", "sports", "travel"] and dm.dims.vocab_size == len(dm.itos)
    assert set(next(iter(dm.train_dataloader()))) == {"document", "label", "deciding"}


def test_files_hold_out_fractions_per_label_and_read_jsonl_and_tsv(tmp_path):
    lines = [json.dumps({"label": "ab"[i % 2], "text": f"Word{i} here. Two."}) for i in range(20)]
    (tmp_path / "train.jsonl").write_text("\n".join(lines) + "\n\n")
    (tmp_path / "test.tsv").write_text("a\tone more. text\n")
    source = ClassifyFiles(train_file=str(tmp_path / "train.jsonl"), test_file=str(tmp_path / "test.tsv"),
                           val_fraction=0.2)
    splits = source.load()
    assert [len(splits[s]) for s in ("train", "val", "test")] == [16, 4, 1]
    assert sorted(d.label for d in splits["val"]) == ["a", "a", "b", "b"]  # two of each label's ten
    assert splits["test"][0].sentences == [["one", "more"], ["text"]]
    assert splits["test"][0].origin == f"{tmp_path / 'test.tsv'}:1"


@pytest.mark.parametrize(("content", "fragments"), [
    ("a\tfine\nb\t  ...  \n", [":2: empty text", "remove the line"]),
    ("a fine\n", [":1: no tab", "the label, a tab, then the text"]),
    ('{"label": "a"}\n', [":1: a JSONL line needs the keys", '"text"']),
])
def test_bad_lines_name_the_file_and_line(tmp_path, content, fragments):
    name = "docs.jsonl" if content.startswith("{") else "docs.tsv"
    (tmp_path / name).write_text(content)
    with pytest.raises(UserError) as err:
        ClassifyFiles(train_file=str(tmp_path / name)).load()
    one_line(str(err.value), str(tmp_path / name), *fragments)


def test_a_test_label_never_seen_in_training_names_the_file_and_line(tmp_path):
    (tmp_path / "train.tsv").write_text("a\tone\nb\ttwo\na\tthree\nb\tfour\n")
    (tmp_path / "test.tsv").write_text("a\tfive\nc\tsix\n")
    dm = ClassifyDataModule(source=ClassifyFiles(train_file=str(tmp_path / "train.tsv"), val_fraction=0.0,
                                                 test_file=str(tmp_path / "test.tsv")))
    with pytest.raises(UserError) as err:
        dm.setup()
    one_line(str(err.value), f"{tmp_path / 'test.tsv'}:2: label 'c' is not a training label (a, b)",
             "give the training split documents of it, or drop this document")


def _imdb_archive(path: Path) -> str:
    """A tiny archive in aclImdb v1's layout (train, test; pos, neg; an unsup review and a vocab file skipped)."""
    reviews = {"train/pos/0_9.txt": "Great film.<br />Loved it.", "train/neg/1_2.txt": "Awful. Boring!",
               "train/pos/2_8.txt": "Fine acting.", "train/neg/3_1.txt": "Bad.", "test/pos/0_10.txt": "Superb.",
               "test/neg/1_3.txt": "Dull film.", "train/unsup/4_0.txt": "Unlabelled.", "imdb.vocab": "the\n"}
    with tarfile.open(path, "w:gz") as tar:
        for name, text in reviews.items():
            info = tarfile.TarInfo(f"aclImdb/{name}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_aclimdb_downloads_checks_sha256_and_reads_the_reviews_in_place(tmp_path):
    assert URL == "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
    assert SHA256 == "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe"
    served = tmp_path / "served" / "aclImdb_v1.tar.gz"
    served.parent.mkdir()
    digest = _imdb_archive(served)
    data_dir = tmp_path / "data"
    source = AclImdb(data_dir=str(data_dir), download=True, url=served.as_uri(), sha256=digest, val_fraction=0.5)
    source.prepare()
    assert (data_dir / "aclImdb_v1.tar.gz").read_bytes() == served.read_bytes()
    splits = source.load()
    assert [len(splits[s]) for s in ("train", "val", "test")] == [2, 2, 2]
    great = next(d for d in splits["train"] + splits["val"] if d.origin.endswith("0_9.txt"))
    assert great.label == "pos" and great.sentences == [["great", "film"], ["loved", "it"]]
    with pytest.raises(UserError) as err:
        AclImdb(data_dir=str(tmp_path / "other"), download=True, url=served.as_uri(), sha256="0" * 64).prepare()
    one_line(str(err.value), "is not the pinned 0000", "the download was deleted")
    assert not (tmp_path / "other" / "aclImdb_v1.tar.gz").exists()
    with pytest.raises(UserError) as err:
        AclImdb(data_dir=str(tmp_path / "none")).prepare()
    one_line(str(err.value), f"no aclImdb_v1.tar.gz in {tmp_path / 'none'}",
             f"data.source.download=true fetches aclimdb into {tmp_path / 'none'}")
    with pytest.raises(UserError) as err:
        AclImdb(data_dir=str(tmp_path / "aclimdb")).prepare()  # where attnmem-data puts it
    one_line(str(err.value), f"no aclImdb_v1.tar.gz in {tmp_path / 'aclimdb'}", "run `attnmem-data fetch aclimdb")


def test_squad_topics_label_paragraphs_by_article_and_hold_out_each_articles_share(tmp_path):
    data = [{"title": f"T{a}", "paragraphs": [{"context": f"Para {p} of {a}. More.", "qas": []} for p in range(10)]}
            for a in range(3)]
    (tmp_path / "squad.json").write_text(json.dumps({"version": "1.1", "data": data}))
    splits = SquadTopics(path=str(tmp_path / "squad.json"), val_fraction=0.2, test_fraction=0.1).load()
    for split, per_article in (("train", 7), ("val", 2), ("test", 1)):
        assert sorted(d.label for d in splits[split]) == [f"T{a}" for a in range(3) for _ in range(per_article)]
    assert splits["test"][0].origin.startswith(f"{tmp_path / 'squad.json'}:data[")
    texts = [tuple(map(tuple, d.sentences)) for s in splits.values() for d in s]
    assert len(set(texts)) == 30  # every paragraph in exactly one split


def test_datamodule_state_keeps_the_vocabulary_for_evaluation():
    dm = ClassifyDataModule(source=DocumentGenerator(num_train=20, num_val=4, num_test=4))
    dm.setup()
    again = ClassifyDataModule(source=DocumentGenerator(num_train=5, num_val=4, num_test=4, seed=9))
    again.load_state_dict(dm.state_dict())
    again.setup()
    assert again.itos == dm.itos and again.classes == dm.classes
    assert again.dims.vocab_size == dm.dims.vocab_size  # the model's embedding fits the checkpoint's
