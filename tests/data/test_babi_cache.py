"""The bAbI tensor cache lives in attnmem's cache folder: the user's data folder is only ever read."""

import hashlib
import logging
from pathlib import Path

import pytest
import torch

from attnmem.data.qa.babi_cache import cache_root
from attnmem.data.qa.babi_files import BabiFiles
from attnmem.data.qa.datamodule import QADataModule

torch.set_num_threads(1)

STORY = (
    "1 Mary moved to the bathroom.\n"
    "2 John went to the hallway.\n"
    "3 Where is Mary? \tbathroom\t1\n"
    "1 The office is east of the hallway.\n"
    "2 Where is the office?\thallway\t1\n"
)


@pytest.fixture(autouse=True)
def caches(tmp_path, monkeypatch) -> Path:
    """$ATTNMEM_CACHE in the test's folder, and a home there too, so nothing is written to the real ~."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ATTNMEM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    return tmp_path / "cache"


def data_folder(tmp_path: Path) -> Path:
    """A writable folder of bAbI files (train and test of tasks 1 and 2), as a user keeps them."""
    folder = tmp_path / "data" / "en"
    folder.mkdir(parents=True)
    for task in (1, 2):
        (folder / f"qa{task}_tiny_train.txt").write_text(STORY * 4 + STORY.replace("Mary", "Sandra") * 4)
        (folder / f"qa{task}_tiny_test.txt").write_text(STORY)
    return folder


def snapshot(folder: Path) -> dict[str, str]:
    """sha256 of every file under `folder` (hidden ones included), by relative path; folders as entries too."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(folder.rglob("*"))}


def set_up(folder: Path, **source) -> QADataModule:
    """A qa datamodule on `folder` (cache on, as configured by default), prepared and set up."""
    dm = QADataModule(source=BabiFiles(data_dir=str(folder), **source), tasks=[1, 2], memory_size=4, batch_size=4)
    dm.prepare_data()
    dm.setup("fit")
    return dm


def test_data_folder_is_byte_identical_after_setup(tmp_path, caches):
    folder = data_folder(tmp_path)
    before = snapshot(folder.parent)
    first = set_up(folder)
    again = set_up(folder)  # the second reads the cache
    assert snapshot(folder.parent) == before  # same files, same bytes, no new file or folder
    assert len(list((caches / "babi").glob("babi-*.pt"))) == 1
    assert again.vocab == first.vocab and torch.equal(again.qa.splits["train"]["story"],
                                                      first.qa.splits["train"]["story"])


def test_cache_folder_option_then_environment_then_home(tmp_path, monkeypatch):
    assert cache_root(str(tmp_path / "mine")) == (tmp_path / "mine", "data.source.cache_dir")
    assert cache_root(None) == (tmp_path / "cache", "ATTNMEM_CACHE")
    monkeypatch.delenv("ATTNMEM_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root(None) == (tmp_path / "xdg" / "attnmem", "XDG_CACHE_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # the XDG spec says to ignore it
    assert cache_root(None) == (tmp_path / "home" / ".cache" / "attnmem", "HOME")


def test_cache_dir_option_wins_over_the_environment(tmp_path, caches):
    folder = data_folder(tmp_path)
    before = snapshot(folder.parent)
    set_up(folder, cache_dir=str(tmp_path / "mine"))
    assert len(list((tmp_path / "mine" / "babi").glob("babi-*.pt"))) == 1
    assert not caches.exists() and snapshot(folder.parent) == before


def test_unwritable_cache_folder_costs_the_cache_not_the_run(tmp_path, caches, caplog):
    folder = data_folder(tmp_path)
    before = snapshot(folder.parent)
    caches.mkdir()
    caches.chmod(0o555)
    try:
        with caplog.at_level(logging.WARNING):
            dm = set_up(folder)
    finally:
        caches.chmod(0o755)
    assert dm.qa.splits["train"]["answer"].numel() > 0 and not any(caches.iterdir())
    warned = [r.getMessage() for r in caplog.records if "cannot be written" in r.getMessage()]
    assert len(warned) == 1 and "ATTNMEM_CACHE" in warned[0] and str(caches / "babi") in warned[0]
    assert snapshot(folder.parent) == before


@pytest.mark.parametrize("damage", ["truncated", "changed"])
def test_a_damaged_cache_is_rebuilt_never_used(tmp_path, caches, caplog, damage):
    folder = data_folder(tmp_path)
    first = set_up(folder)
    (cache,) = (caches / "babi").glob("babi-*.pt")
    data = bytearray(cache.read_bytes())
    if damage == "truncated":
        del data[len(data) // 2:]
    else:  # bytes changed inside the story tensor's record: the archive still opens, its CRC-32 does not match
        import zipfile

        with zipfile.ZipFile(cache) as archive:
            record = max((r for r in archive.infolist() if "/data/" in r.filename), key=lambda r: r.file_size)
        head = record.header_offset  # the local header: 30 bytes, the name and the extra field, then the data
        at = head + 30 + int.from_bytes(data[head + 26:head + 28], "little") + int.from_bytes(
            data[head + 28:head + 30], "little") + record.file_size // 2
        data[at] ^= 0xFF
    cache.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        again = set_up(folder)
    warned = [r.getMessage() for r in caplog.records if "is damaged" in r.getMessage()]
    assert len(warned) == 1 and str(cache) in warned[0] and "rebuilding it" in warned[0], caplog.text
    assert torch.equal(again.qa.splits["train"]["story"], first.qa.splits["train"]["story"])
    assert set_up(folder).vocab == first.vocab and cache.read_bytes() != bytes(data)  # written again, whole
