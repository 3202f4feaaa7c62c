"""`core.download.fetch` against a local HTTP server: placed and checked once, resumed after a cut, one-line errors."""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path

import pytest
from conftest import one_line
from http_server import NAME, serving

from attnmem.core.download import Remote, fetch, partial_path
from attnmem.core.errors import UserError

DATA = bytes(range(256)) * 40  # 10240 bytes
DIGEST = hashlib.sha256(DATA).hexdigest()


def test_a_good_file_is_fetched_checked_and_placed_once(tmp_path: Path) -> None:
    folder = tmp_path / "data" / "cora"
    with serving(DATA) as (url, seen):
        remote = Remote(url=url, name=NAME, sha256=DIGEST, size=len(DATA))
        path = fetch(remote, folder, label="test: archive")
        assert path == folder / NAME and path.read_bytes() == DATA
        assert sorted(p.name for p in folder.iterdir()) == [NAME]  # no .part, no temporary file of pooch's
        assert fetch(remote, folder) == path and seen == [None]  # already there and intact: no request


def test_a_cut_transfer_keeps_its_part_and_the_next_call_resumes_it(tmp_path: Path) -> None:
    cut = 3000
    with serving(DATA, cut_after=cut) as (url, seen):
        remote = Remote(url, NAME, DIGEST)
        with pytest.raises(UserError) as err:
            fetch(remote, tmp_path)
        one_line(str(err.value), url, f"after {cut} of {len(DATA)} bytes", str(partial_path(remote, tmp_path)),
                 "run the same command again to resume")
        assert partial_path(remote, tmp_path).read_bytes() == DATA[:cut] and not (tmp_path / NAME).exists()
        assert fetch(remote, tmp_path).read_bytes() == DATA
        assert seen == [None, f"bytes={cut}-"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [NAME]


def test_a_server_without_ranges_starts_over(tmp_path: Path) -> None:
    remote = Remote("", NAME, DIGEST)
    partial_path(remote, tmp_path).write_bytes(b"stale bytes")
    with serving(DATA, ranges=False) as (url, seen):
        assert fetch(Remote(url, NAME, DIGEST), tmp_path).read_bytes() == DATA
        assert seen == ["bytes=11-"]  # asked to resume, answered 200 with the whole file
    assert sorted(p.name for p in tmp_path.iterdir()) == [NAME]


def test_a_complete_part_is_placed_on_416(tmp_path: Path) -> None:
    remote = Remote("", NAME, DIGEST)
    partial_path(remote, tmp_path).write_bytes(DATA)
    with serving(DATA) as (url, seen):
        assert fetch(Remote(url, NAME, DIGEST), tmp_path).read_bytes() == DATA
        assert seen == [f"bytes={len(DATA)}-"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [NAME]


def test_a_wrong_sha256_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    with serving(DATA) as (url, _), pytest.raises(UserError) as err:
        fetch(Remote(url, NAME, "0" * 64), tmp_path)
    one_line(str(err.value), url, f"sha256 {DIGEST} is not the pinned {'0' * 64}", "damaged or another release",
             "the download was deleted")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("status", [None, 404])
def test_an_unreachable_host_or_an_http_error_is_one_line_and_leaves_nothing(tmp_path: Path, status: int | None) -> None:
    if status is None:
        with socket.socket() as bound:  # bound, never listening: the connection is refused
            bound.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{bound.getsockname()[1]}/{NAME}"
            with pytest.raises(UserError) as err:
                fetch(Remote(url, NAME, DIGEST), tmp_path / "data")
        why = "connection refused"
    else:
        with serving(DATA, status=status) as (url, _), pytest.raises(UserError) as err:
            fetch(Remote(url, NAME, DIGEST), tmp_path / "data")
        why = "HTTP 404 Not Found"
    one_line(str(err.value), f"could not download {url} ({why})", "check the connection and run it again",
             f"put {NAME} in {tmp_path / 'data'} yourself")
    assert list((tmp_path / "data").iterdir()) == []


def test_an_unverified_file_is_checked_by_its_size(tmp_path: Path) -> None:
    with serving(DATA) as (url, _):
        assert fetch(Remote(url, NAME, None, len(DATA)), tmp_path / "right").read_bytes() == DATA
        with pytest.raises(UserError) as err:
            fetch(Remote(url, NAME, None, len(DATA) + 1), tmp_path / "wrong")
    one_line(str(err.value), url, f"{len(DATA)} bytes, not the expected {len(DATA) + 1}", "damaged or another release")
    assert list((tmp_path / "wrong").iterdir()) == []


def test_a_folder_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.write_text("not a folder")
    with pytest.raises(UserError) as err:
        fetch(Remote("http://127.0.0.1:9/x", NAME, DIGEST), folder)
    one_line(str(err.value), f"{folder} is a file, not a folder")
