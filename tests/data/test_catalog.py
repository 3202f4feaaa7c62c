"""The datasets of the data folder (`data/catalog.py`) and `attnmem-data`: fetched from a local server into place,
a cut GloVe transfer resumed and unzipped, one line for each failure; the sources' fetch hints and options."""

from __future__ import annotations

import io
import json
import socket
import tarfile
import zipfile
from dataclasses import replace

import pytest
from conftest import cli_error, one_line
from http_server import serving
from recipe_data import ARTICLES, squad_json

from attnmem.core.errors import UserError
from attnmem.data.catalog import DATASETS, check_data_dir, fetch_dataset, fetch_hint
from attnmem.data.embeddings.babi_corpus import BabiCorpus
from attnmem.data.span.span_generator import SpanGenerator
from attnmem.data.span.squad_files import SquadFiles
from attnmem.tools import data as tool

GLOVE_LINES = "the 0.1 0.2\n. . . 0.3 0.4\n"


def glove_zip() -> bytes:
    """A zip holding a two-word glove.840B.300d.txt, as Stanford's archive holds the real one."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("glove.840B.300d.txt", GLOVE_LINES * 200)
    return buffer.getvalue()


def served(monkeypatch: pytest.MonkeyPatch, name: str, url: str, **fields) -> None:
    """The catalog's dataset `name` fetched from `url` (and with `fields` of its file changed) for this test."""
    remote = replace(DATASETS[name].remotes[0], url=url, **fields)
    monkeypatch.setitem(DATASETS, name, replace(DATASETS[name], remotes=(remote,)))


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_cut_glove_transfer_resumes_and_is_unzipped_into_place(tmp_path, monkeypatch):
    archive, folder = glove_zip(), tmp_path / "data" / "glove"
    with serving(archive, cut_after=len(archive) // 3, name="glove.840B.300d.zip") as (url, seen):
        served(monkeypatch, "glove.840B.300d", url, size=len(archive))
        with pytest.raises(UserError) as err:
            tool.fetch(["glove.840B.300d"], tmp_path / "data")
        one_line(str(err.value), "run the same command again to resume")
        assert [p.name for p in folder.iterdir()] == ["glove.840B.300d.zip.part"]  # nothing looks complete
        assert "partial transfer" in tool.status(DATASETS["glove.840B.300d"], tmp_path / "data")
        tool.fetch(["glove.840B.300d"], tmp_path / "data")
    assert seen == [None, f"bytes={len(archive) // 3}-"]
    assert [p.name for p in folder.iterdir()] == ["glove.840B.300d.txt"]  # the archive and its .part are gone
    assert (folder / "glove.840B.300d.txt").read_text() == GLOVE_LINES * 200
    assert tool.status(DATASETS["glove.840B.300d"], tmp_path / "data") == "present"


def test_a_wrong_size_or_an_unreachable_host_ends_in_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    with serving(glove_zip(), name="glove.840B.300d.zip") as (url, _):
        served(monkeypatch, "glove.840B.300d", url, size=123)
        with pytest.raises(UserError) as err:
            fetch_dataset(DATASETS["glove.840B.300d"], tmp_path / "glove")
    one_line(str(err.value), url, "123")
    served(monkeypatch, "squad", f"http://127.0.0.1:{free_port()}/train-v1.1.json")
    with pytest.raises(UserError) as err:
        fetch_dataset(DATASETS["squad"], tmp_path / "squad")
    one_line(str(err.value), "could not download", "connection refused")
    assert not list(tmp_path.rglob("*.*"))


def test_a_wrong_checksum_ends_in_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    with serving(b'{"data": []}', name="train-v1.1.json") as (url, _):
        served(monkeypatch, "squad", url, size=None)  # the pinned sha256 of the real file, checked
        with pytest.raises(UserError) as err:
            fetch_dataset(DATASETS["squad"], tmp_path / "squad")
    one_line(str(err.value), url, DATASETS["squad"].remotes[0].sha256)
    assert not list(tmp_path.rglob("*.*"))


def test_download_true_fetches_squad_through_the_same_code(tmp_path, monkeypatch):
    text = json.dumps(squad_json(SpanGenerator(num_train=ARTICLES).records("train"), ARTICLES)).encode()
    with serving(text, name="dev-v1.1.json") as (url, seen):
        remote = replace(DATASETS["squad"].remotes[1], url=url, sha256=None, size=len(text))
        monkeypatch.setitem(DATASETS, "squad", replace(DATASETS["squad"], remotes=(remote,), members=(remote.name,)))
        source = SquadFiles(train_path=str(tmp_path / "squad" / "dev-v1.1.json"), first_articles=40, download=True)
        source.prepare_data()
        splits = source.splits()
    assert seen == [None] and (tmp_path / "squad" / "dev-v1.1.json").read_bytes() == text
    assert len({r.context for r in splits["train"] + splits["val"]}) == 40  # one paragraph an article, 40 kept


def test_download_true_fetches_babi_for_the_embeddings_corpus(tmp_path, monkeypatch):
    story = b"1 Mary moved to the bathroom.\n2 Where is Mary? \tbathroom\t1\n"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("tasks_1-20_v1-2/en-10k/qa1_x_train.txt")
        info.size = len(story)
        tar.addfile(info, io.BytesIO(story))
    with serving(buffer.getvalue(), name="tasks_1-20_v1-2.tar.gz") as (url, seen):
        served(monkeypatch, "babi", url)
        corpus = BabiCorpus(data_dir=str(tmp_path / "babi" / "en-10k"), download=True)
        corpus.prepare_data()
    assert seen == [None] and list(corpus.all_documents()) == ["Mary moved to the bathroom. Where is Mary? "]


def test_first_articles_beyond_the_file_is_one_line(tmp_path):
    path = tmp_path / "four.json"
    path.write_text(json.dumps(squad_json(SpanGenerator(num_train=8).records("train"), 4)))
    with pytest.raises(UserError) as err:
        SquadFiles(train_path=str(path), first_articles=40).splits()
    one_line(str(err.value), str(path), "has 4 articles", "data.source.first_articles=40 must be in [1, 4]")


def test_missing_files_name_one_command_for_every_dataset_they_need(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNMEM_DATA_DIR", str(tmp_path))
    squad, glove = tmp_path / "squad" / "train-v1.1.json", tmp_path / "glove" / "glove.840B.300d.txt"
    assert fetch_hint(squad, glove) == ": run `attnmem-data fetch squad glove.840B.300d` (or set data.source.download=true)"
    assert fetch_hint(tmp_path / "other" / "squad" / "dev-v1.1.json").startswith(
        f": run `attnmem-data fetch squad --data-dir {tmp_path / 'other'}`")
    assert fetch_hint(tmp_path / "mine.json") == ""


def test_a_data_folder_that_is_a_file_is_one_line(tmp_path, monkeypatch, capsys):
    afile = tmp_path / "data"
    afile.write_text("")
    monkeypatch.setenv("ATTNMEM_DATA_DIR", str(afile))
    with pytest.raises(UserError) as err:
        check_data_dir(str(afile))
    one_line(str(err.value), f"ATTNMEM_DATA_DIR={afile} is a file, not a folder", "unset it for ./data")
    with pytest.raises(SystemExit) as done:
        tool.main(["fetch", "squad"])
    assert done.value.code == 1
    one_line(capsys.readouterr().err, f"error: ATTNMEM_DATA_DIR={afile} is a file")


def test_train_py_with_a_data_folder_that_is_a_file_stops_in_one_line(tmp_path, monkeypatch):
    afile = tmp_path / "data.txt"
    afile.write_text("")
    monkeypatch.setenv("ATTNMEM_DATA_DIR", str(afile))
    one_line(cli_error(tmp_path, "data=babi"), f"error: ATTNMEM_DATA_DIR={afile} is a file, not a folder")


def test_list_shows_every_dataset_its_state_and_checksum(tmp_path, capsys):
    (tmp_path / "squad").mkdir()
    (tmp_path / "squad" / "dev-v1.1.json").write_text("{}")
    tool.main(["--data-dir", str(tmp_path), "list"])
    out = capsys.readouterr().out
    for name in DATASETS:
        assert name in out, out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 3}
    assert "missing train-v1.1.json" in rows["squad"] and "sha256" in rows["squad"]
    assert "size only" in rows["glove.6B"] and "missing" in rows["babi"]


def test_an_unknown_dataset_lists_the_names(tmp_path, capsys):
    with pytest.raises(SystemExit):
        tool.main(["--data-dir", str(tmp_path), "fetch", "glove"])
    one_line(capsys.readouterr().err, "error: no dataset named glove", "glove.6B, glove.840B.300d")
