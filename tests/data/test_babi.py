"""bAbI files as a qa source: parser, split, vectoriser, datamodule, cache and download, on handwritten files and the real data."""

import io
import re
import socket
import tarfile
from dataclasses import replace
from pathlib import Path

import lightning as L
import pytest
import torch
from conftest import REAL_DATA, one_line
from http_server import serving

from attnmem.core.dims import QADims
from attnmem.core.errors import UserError
from attnmem.data.catalog import DATASETS
from attnmem.data.qa import babi_download, babi_files
from attnmem.data.qa.babi_files import BabiFiles, find_task_files, split_stories
from attnmem.data.qa.babi_text import parse_babi
from attnmem.data.qa.datamodule import QADataModule
from attnmem.data.qa.tensors import UNK, Example, build_answers, build_vocab, vectorize

torch.set_num_threads(1)

REAL = (REAL_DATA or Path("/nonexistent")) / "babi"
QA1 = (
    "1 Mary moved to the bathroom.\n"
    "2 John went to the hallway.\n"
    "3 Where is Mary? \tbathroom\t1\n"
    "4 Daniel went back to the hallway.\n"
    "5 Sandra moved to the garden.\n"
    "6 Where is Daniel? \thallway\t4\n"
    "1 The office is east of the hallway.\n"
    "2 The kitchen is north of the office.\n"
    "3 How do you go from the hallway to the kitchen?\te,n\t1 2\n"
)


SOURCE_OPTIONS = {"val_fraction", "split_seed", "cache", "cache_dir", "download"}


def babi_module(data_dir: str, **options) -> QADataModule:
    """A qa datamodule on bAbI files: the reader's options go to its `BabiFiles` source, the rest to the datamodule."""
    source = {k: options.pop(k) for k in SOURCE_OPTIONS & set(options)}
    return QADataModule(source=BabiFiles(data_dir=data_dir, **source), **options)


def story_file(statements: int, question: str = "Where is Mary?\tkitchen\t1") -> str:
    """One story of numbered statements `Fact k.` then a question."""
    lines = [f"{k} Fact {k}." for k in range(1, statements + 1)]
    return "\n".join([*lines, f"{statements + 1} {question}"]) + "\n"


def write_babi(folder: Path, files: dict[str, str]) -> Path:
    """Write files into `folder` and return it."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch) -> Path:
    """Keep every cache ($ATTNMEM_CACHE, and ~/.cache/attnmem behind it) inside the test's folder."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ATTNMEM_CACHE", str(tmp_path / "cache"))
    return tmp_path / "home"


def test_parse_babi_stories_questions_supports():
    examples = parse_babi(QA1.splitlines(), "qa1_x_train.txt", task=1)
    assert len(examples) == 3
    first, second, third = examples
    assert first.story == (("mary", "moved", "to", "the", "bathroom"), ("john", "went", "to", "the", "hallway"))
    assert first.query == ("where", "is", "mary") and first.answer == "bathroom" and first.supports == (0,)
    assert len(second.story) == 4 and second.supports == (2,)  # line 4 is the third statement: questions take no slot
    assert second.story[2] == ("daniel", "went", "back", "to", "the", "hallway")
    assert len(third.story) == 2 and third.story[0][:2] == ("the", "office")  # ID 1 started a new story
    assert third.answer == "e,n" and third.supports == (0, 1)
    assert [ex.story_id for ex in examples] == [0, 0, 1] and {ex.task for ex in examples} == {1}


@pytest.mark.parametrize(("text", "line", "why"), [
    ("1 Mary moved.\nMary moved to the garden.\n", 2, "expected 'ID text'"),
    ("1 Mary moved.\n2 Where is Mary?\tgarden\n3 Where is Mary?\t\t1\n", 3, "expected 'ID text'"),
    ("1 Mary moved.\n3 John moved.\n", 2, "expected line ID 1 (a new story) or 2"),
    ("1 Mary moved.\n2 Where is Mary?\tgarden\t3\n", 2, "supporting id '3'"),
    ("1 Mary moved.\n2 Where is Mary?\tgarden\t1\n3 Where?\tx\t2\n", 3, "supporting id '2'"),
])
def test_malformed_line_names_file_and_line(text, line, why):
    with pytest.raises(UserError, match=rf"qa1_x_train\.txt:{line}: .*{re.escape(why)}"):
        parse_babi(text.splitlines(), "qa1_x_train.txt", task=1)


def test_vectorize_keeps_last_statements_left_aligned():
    (example,) = parse_babi(story_file(5).splitlines(), "s", task=1)
    vocab, answers = build_vocab([example]), build_answers([example])
    t = vectorize([example], vocab, answers, memory_size=3, sentence_len=2, query_len=4)
    assert [" ".join(vocab[i] for i in row) for row in t["story"][0].tolist()] == ["fact 3", "fact 4", "fact 5"]
    wide = vectorize([example], vocab, answers, memory_size=8, sentence_len=3, query_len=4)
    assert wide["story"][0, :5, 2].eq(0).all() and wide["story"][0, 5:].eq(0).all()  # pads after the words and slots
    assert wide["story"][0, :5, :2].ne(0).all() and vocab[wide["story"][0, 0, 1]] == "1"
    assert answers[t["answer"][0]] == "kitchen" and t["task"].tolist() == [1]
    other = parse_babi(["1 Zork moved.", "2 Where is Zork?\tmars\t1"], "s", task=1)
    unknown = vectorize(other, vocab, answers, memory_size=3, sentence_len=2, query_len=4)
    assert unknown["story"][0, 0, 0] == UNK and unknown["answer"][0] == 0  # unseen answer: class <unk>


def synthetic(task: int, texts: list[str]) -> list[Example]:
    """One two-question story per text; equal texts make equal story keys."""
    return [Example(story=(), query=("q",), answer="a", supports=(), task=task, story_id=i, story_key=text)
            for i, text in enumerate(texts) for _ in range(2)]


def test_split_keeps_equal_stories_together_and_is_seeded():
    texts = [f"s{i}" for i in range(180)] + [f"s{i}" for i in range(20)]  # 20 texts appear twice
    examples = synthetic(4, texts) + synthetic(1, [f"t{i}" for i in range(50)])
    train, val = split_stories(examples, 0.1, seed=0)
    assert sorted(train + val) == list(range(len(examples))) and not set(train) & set(val)
    val_keys = {(examples[i].task, examples[i].story_key) for i in val}
    assert all((examples[i].task, examples[i].story_key) not in val_keys for i in train)
    assert 20 <= sum(examples[i].task == 4 for i in val) / 2 <= 21  # 10% of 200 stories, +1 for a duplicate
    assert sum(examples[i].task == 1 for i in val) / 2 == 5
    assert split_stories(examples, 0.1, seed=0) == (train, val)
    assert split_stories(examples, 0.1, seed=1)[1] != val


def test_missing_tasks_are_listed_in_one_error(tmp_path):
    folder = write_babi(tmp_path / "en", {"qa1_single_train.txt": QA1, "qa10_ten_train.txt": QA1})
    with pytest.raises(UserError, match=r"task\(s\) 2, 3, 11 .*qa2_\*_train\.txt, qa3_\*_train\.txt"):
        find_task_files(folder, [1, 2, 3, 10, 11])
    train, test = find_task_files(folder, [1, 10])
    assert train == {1: folder / "qa1_single_train.txt", 10: folder / "qa10_ten_train.txt"} and test == {}


@pytest.mark.parametrize("make", [False, True])
def test_missing_data_dir_names_the_path_and_the_fix(tmp_path, make):
    folder = tmp_path / "nowhere" / "en"
    if make:
        folder.mkdir(parents=True)
    dm = babi_module(str(folder))
    with pytest.raises(UserError, match=rf"{re.escape(str(folder))}.*data\.source\.download=true"):
        dm.prepare_data()


@pytest.mark.parametrize(("option", "value"), [("memory_size", 0), ("batch_size", 0), ("source.val_fraction", 1.0),
                                                ("source.val_fraction", 0.0), ("tasks", [21]), ("tasks", "some")])
def test_bad_options_raise_value_error_naming_them(tmp_path, option, value):
    with pytest.raises(ValueError, match=f"data.{option}"):
        babi_module(str(tmp_path), **{option.removeprefix("source."): value})


def fixture_module(tmp_path: Path, **options) -> QADataModule:
    """A set-up datamodule on two small tasks with 20 stories each, and test files."""
    files = {}
    for task in (1, 2):
        text = "".join(story_file(2 + (k % 4), f"Where is Fact {k}?\tanswer{k % 3}\t1") for k in range(20))
        files[f"qa{task}_tiny_train.txt"] = text
        files[f"qa{task}_tiny_test.txt"] = story_file(7, "Where is Zork?\tanswer1\t1")
    options = {"tasks": [1, 2], "memory_size": 4, "batch_size": 8, "cache": False} | options
    dm = babi_module(str(write_babi(tmp_path / "en", files)), **options)
    dm.prepare_data()
    dm.setup("fit")
    return dm


def test_datamodule_contract(tmp_path):
    dm = fixture_module(tmp_path)
    assert dm.family == "qa" and dm.has_test
    assert dm.dims == QADims(vocab_size=len(dm.vocab), num_answers=4, memory_size=4, sentence_len=4,
                             query_len=4, tasks=[1, 2],
                             answer_words=[1, *(dm.vocab.index(a) for a in dm.answers[1:])], pad_id=0)  # sentence_len: one J for statements and questions
    assert dm.vocab[:2] == ["<pad>", "<unk>"] and dm.answers == ["<unk>", "answer0", "answer1", "answer2"]
    assert sorted(p.name for p in dm.data_files) == ["qa1_tiny_test.txt", "qa1_tiny_train.txt",
                                                      "qa2_tiny_test.txt", "qa2_tiny_train.txt"]
    batch = next(iter(dm.train_dataloader()))
    assert set(batch) == {"story", "query", "answer", "task"}
    # a batch keeps as many memory slots as its longest story fills (at most memory_size = 4)
    filled = int(batch["story"].ne(0).any(-1).sum(-1).max())
    assert batch["story"].shape == (8, filled, 2) and filled <= 4 and batch["query"].shape == (8, 4)
    assert batch["answer"].shape == batch["task"].shape == (8,)
    assert all(v.dtype == torch.long for v in batch.values())
    assert sum(len(b["answer"]) for b in dm.train_dataloader()) + sum(len(b["answer"]) for b in dm.val_dataloader()) == 40
    val = next(iter(dm.val_dataloader()))
    assert val["task"].tolist() == sorted(val["task"].tolist())  # unshuffled: file order
    test = next(iter(dm.test_dataloader()))
    assert dm.words(test["story"][0, 0]) == "fact 4" and dm.words(test["query"][0]) == "where is <unk>"


def test_fit_memory_sizes_the_memory_by_the_longest_training_story(tmp_path):
    # the MemN2N reference code's rule: min(memory_size, longest training story) slots (training stories
    # here have 2-5 statements; the test story has 7 and keeps its last 5)
    fitted = fixture_module(tmp_path, memory_size=50, fit_memory=True, cache=True)
    assert fitted.dims.memory_size == 5 and fitted.state_dict()["memory_size"] == 5
    test = fitted.qa.splits["test"]["story"]
    assert test.shape[1] == 5 and fitted.words(test[0, 0]) == "fact 3" and fitted.words(test[0, 4]) == "fact 7"
    assert fixture_module(tmp_path, memory_size=4, fit_memory=True).dims.memory_size == 4  # the cap still holds
    wide = fixture_module(tmp_path, memory_size=50, cache=True)  # not fitted: another cache entry, 50 slots
    assert wide.dims.memory_size == 50 and len(list((tmp_path / "cache" / "babi").glob("babi-*.pt"))) == 2
    with pytest.raises(UserError, match="trained with 5 memory slots.*data.memory_size=5 data.fit_memory=false"):
        wide.load_state_dict(fitted.state_dict())


def test_shuffle_follows_seed_everything(tmp_path):
    dm = fixture_module(tmp_path)

    def order(seed: int) -> list[int]:
        L.seed_everything(seed, verbose=False)
        return [row for b in dm.train_dataloader() for row in (b["query"][:, 3] * 10 + b["task"]).tolist()]

    assert order(3) == order(3) and order(3) != order(4)


def test_the_replacement_sampler_draws_each_batch_with_replacement(tmp_path):
    """MemN2N's reference code (train.m): floor(N / B) batches an epoch, each of B questions drawn uniformly with
    replacement, so an epoch repeats some and misses others; "shuffle" takes each question once."""

    def rows(dm: QADataModule, seed: int) -> list[list[int]]:
        L.seed_everything(seed, verbose=False)
        return [(b["query"][:, 3] * 10 + b["task"]).tolist() for b in dm.train_dataloader()]

    drawn, shuffled = fixture_module(tmp_path / "a", sampler="replacement"), fixture_module(tmp_path / "b")
    n = len(drawn.qa.splits["train"]["answer"])
    assert n == 36  # questions, in batches of 8
    epoch = rows(drawn, 0)
    assert len(epoch) == n // 8 and all(len(batch) == 8 for batch in epoch)
    flat = [row for batch in epoch for row in batch]
    assert len(set(flat)) < len(flat)  # a question drawn twice in one epoch
    assert rows(drawn, 0) == epoch and rows(drawn, 1) != epoch
    every = sorted(row for batch in rows(shuffled, 0) for row in batch)
    assert len(every) == n and len(set(every)) == n and set(flat) <= set(every)
    with pytest.raises(ValueError, match=r"data.sampler must be one of \['shuffle', 'replacement'\], got 'random'"):
        babi_module(str(tmp_path / "a" / "en"), sampler="random")


def test_no_test_files_means_no_test(tmp_path):
    folder = write_babi(tmp_path / "en", {"qa1_tiny_train.txt": QA1 * 5})
    dm = babi_module(str(folder), cache=False)
    dm.setup()
    assert not dm.has_test and dm.test_dataloader() == [] and len(dm.data_files) == 1


def test_checkpoint_vocabulary_is_kept_on_other_data(tmp_path):
    trained = fixture_module(tmp_path / "a")
    state = trained.state_dict()
    for before_setup in (True, False):
        other = babi_module(str(write_babi(tmp_path / "b", {"qa1_t_train.txt": QA1 * 3})), cache=False,
                               memory_size=4)
        if before_setup:
            other.load_state_dict(state)
        other.setup()
        if not before_setup:
            other.load_state_dict(state)
        assert other.vocab == trained.vocab and other.answers == trained.answers and other.dims.sentence_len == trained.dims.sentence_len
        batch = next(iter(other.val_dataloader()))
        assert batch["story"].eq(UNK).any() and batch["answer"].eq(0).all()  # mary, bathroom... are unknown there
        assert other.state_dict() == state


def test_cache_hit_returns_identical_tensors(tmp_path, monkeypatch):
    built = fixture_module(tmp_path, cache=True)
    assert len(list((tmp_path / "cache" / "babi").glob("babi-*.pt"))) == 1  # $ATTNMEM_CACHE, not beside the data
    assert not (tmp_path / "en" / ".attnmem_cache").exists()
    def not_built(*args):
        raise AssertionError("the cache was not used")

    monkeypatch.setattr(BabiFiles, "_build", not_built)
    again = babi_module(str(tmp_path / "en"), tasks=[1, 2], memory_size=4, batch_size=8)
    again.setup()
    assert again.vocab == built.vocab and again.answers == built.answers
    for split, tensors in built.qa.splits.items():
        assert all(torch.equal(t, again.qa.splits[split][k]) for k, t in tensors.items())
    with pytest.raises(AssertionError, match="cache was not used"):  # other options, other key
        babi_module(str(tmp_path / "en"), tasks=[1, 2], memory_size=5).setup()


def test_read_only_data_dir_caches_under_home(tmp_path, home, monkeypatch):
    monkeypatch.delenv("ATTNMEM_CACHE")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    folder = write_babi(tmp_path / "en", {"qa1_tiny_train.txt": QA1 * 5})
    folder.chmod(0o555)
    try:
        babi_module(str(folder)).setup()
    finally:
        folder.chmod(0o755)
    assert not (folder / ".attnmem_cache").exists()
    assert len(list((home / ".cache/attnmem/babi").glob("babi-*.pt"))) == 1


def fake_archive(path: Path, members: dict[str, bytes]) -> Path:
    """A tar.gz holding `members`."""
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_extract_refuses_path_traversal_and_wrong_hashes(tmp_path):
    root = tmp_path / "babi"
    evil = fake_archive(tmp_path / "evil.tar.gz", {"tasks_1-20_v1-2/en/../../../evil.txt": b"x"})
    with pytest.raises(UserError, match="unsafe path"):
        babi_download.extract_babi(evil, root)
    wrong = fake_archive(tmp_path / "wrong.tar.gz", {
        "tasks_1-20_v1-2/en/qa21_fresh_train.txt": QA1.encode(),
        "tasks_1-20_v1-2/en/qa1_single-supporting-fact_train.txt": QA1.encode(),
    })
    with pytest.raises(UserError, match=r"en/qa1_single-supporting-fact_train\.txt has sha256 .*expected c64ba9b1"):
        babi_download.extract_babi(wrong, root)
    assert not (tmp_path / "evil.txt").exists() and not root.exists()  # nothing half-written


def test_download_extracts_english_folders_and_prints_licence(tmp_path, monkeypatch, capsys):
    members = {"tasks_1-20_v1-2/en/qa1_fresh_train.txt": QA1.encode(), "tasks_1-20_v1-2/hn/qa1_h_train.txt": b"x",
               "tasks_1-20_v1-2/en-10k/qa1_fresh_train.txt": QA1.encode()}
    archive = fake_archive(tmp_path / "served.tar.gz", members).read_bytes()
    with serving(archive, name="tasks_1-20_v1-2.tar.gz") as (url, seen):
        remote = replace(DATASETS["babi"].remotes[0], url=url)
        monkeypatch.setitem(DATASETS, "babi", replace(DATASETS["babi"], remotes=(remote,)))
        dm = babi_module(str(tmp_path / "babi" / "en"), download=True, cache=False)
        dm.prepare_data()
    assert "CC BY 3.0" in capsys.readouterr().out and seen == [None]
    assert sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "babi").rglob("*.txt")) == [
        "babi/en-10k/qa1_fresh_train.txt", "babi/en/qa1_fresh_train.txt"]
    assert sorted(p.name for p in (tmp_path / "babi").iterdir()) == ["en", "en-10k"]  # no archive, no .part
    dm.setup()
    assert dm.dims.tasks == [1]


def test_offline_download_says_what_failed_and_leaves_nothing(tmp_path, monkeypatch):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    remote = replace(DATASETS["babi"].remotes[0], url=f"http://127.0.0.1:{port}/tasks_1-20_v1-2.tar.gz")
    monkeypatch.setitem(DATASETS, "babi", replace(DATASETS["babi"], remotes=(remote,)))
    folder = tmp_path / "babi" / "en-10k"
    with pytest.raises(UserError) as err:
        babi_module(str(folder), download=True).prepare_data()
    one_line(str(err.value), "could not download", remote.url, "connection refused")
    assert not folder.exists() and not list((tmp_path / "babi").glob("*"))


def test_a_missing_folder_names_the_fetch_command(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNMEM_DATA_DIR", str(tmp_path / "data"))
    with pytest.raises(UserError) as err:
        babi_module(str(tmp_path / "data" / "babi" / "en")).prepare_data()
    one_line(str(err.value), "no bAbI files", "run `attnmem-data fetch babi` (or set data.source.download=true)")
    with pytest.raises(UserError) as err:
        babi_module(str(tmp_path / "elsewhere")).prepare_data()
    one_line(str(err.value), "no bAbI files", "an en/ or en-10k/ folder", "`attnmem-data fetch babi`")


needs_real = pytest.mark.skipif(not (REAL / "en").is_dir(), reason="no bAbI files in $ATTNMEM_DATA_DIR/babi")


@needs_real
def test_pinned_hashes_match_the_shared_files():
    sums = dict(line.split()[::-1] for line in (REAL / "SHA256SUMS").read_text().splitlines())
    pinned = {name: digest for name, digest in sums.items() if name.startswith("en")}
    assert len(pinned) == 39 and all(babi_download.pinned_sha256(n) == d for n, d in pinned.items())
    assert babi_download.pinned_sha256("en-10k/qa3_three-supporting-facts_train.txt") is None


@needs_real
def test_real_tasks_1_and_4():
    dm = babi_module(str(REAL / "en"), tasks=[1, 4], cache=False)
    dm.setup()
    tasks = {split: dm.qa.splits[split]["task"] for split in ("train", "val")}
    assert [int((tasks["train"] == t).sum() + (tasks["val"] == t).sum()) for t in (1, 4)] == [1000, 1000]
    assert int((tasks["val"] == 1).sum()) == 100 and 100 <= int((tasks["val"] == 4).sum()) <= 105
    assert not dm.has_test and dm.dims.sentence_len == 7 and dm.dims.query_len == 6  # "what is the garden east of"
    examples = parse_babi(next((REAL / "en").glob("qa4_*_train.txt")).read_text().splitlines(), "qa4", task=4)
    assert len({ex.story_key for ex in examples}) == 919  # README: 81 of the 1000 stories are repeats
    train, val = split_stories(examples, 0.1, seed=0)
    assert not {examples[i].story_key for i in train} & {examples[i].story_key for i in val}


@needs_real
def test_real_fitted_memory_sizes_are_the_reference_codes():
    # min(50, longest training story): task 19 gets 5 slots, task 1 10, task 6 26, task 3 the cap
    sizes = {t: babi_module(str(REAL / "en"), tasks=[t], fit_memory=True, cache=False) for t in (1, 3, 6, 19)}
    for dm in sizes.values():
        dm.setup()
    assert {t: dm.dims.memory_size for t, dm in sizes.items()} == {1: 10, 3: 50, 6: 26, 19: 5}


@needs_real
def test_missing_10k_task_3_is_reported():
    with pytest.raises(UserError, match=r"en-10k: no training file for task\(s\) 3 "):
        babi_module(str(REAL / "en-10k"), tasks=[1, 3]).setup()


def test_unknown_task_pattern_does_not_match_longer_numbers(tmp_path):
    folder = write_babi(tmp_path / "en", {"qa12_x_train.txt": QA1})
    with pytest.raises(UserError, match=r"task\(s\) 1 "):
        find_task_files(folder, [1])
    assert babi_files.ALL_TASKS == list(range(1, 21))
