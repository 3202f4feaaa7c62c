"""Files fetched once through pooch, resuming a cut transfer, and checked by their pinned sha256 (or their size)."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import socket
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pooch
import requests
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from attnmem.core.errors import UserError

__all__ = ["Remote", "check_sha256", "fetch", "partial_path", "progress", "sha256"]

TIMEOUT = 60  # seconds to connect, and between two blocks of a transfer
BLOCK = 1 << 16  # what a broken connection may lose of the bytes it brought


@dataclass(frozen=True)
class Remote:
    """One file to fetch: where it comes from and what it must be."""

    url: str
    name: str  # the file's name in its folder
    # the pinned digest; None: none is published (then `size` is checked and the file is "unverified")
    sha256: str | None = None
    size: int | None = None  # bytes, when known


def sha256(path: Path) -> str:
    """The file's sha256, hex."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_sha256(path: Path, expected: str, origin: str) -> None:
    """One line naming `origin` when the file's sha256 is not `expected`."""
    got = sha256(path)
    if got != expected:
        raise UserError(
            f"{origin}: sha256 {got} is not the pinned {expected}: the file is damaged or another "
            f"release; delete it and download again, or pass data.source.sha256={got} if you trust it"
        )


def partial_path(remote: Remote, folder: Path) -> Path:
    """Where a partial transfer of `remote` is kept until it is complete."""
    return folder / f"{remote.name}.part"


def mismatch(remote: Remote, path: Path) -> str | None:
    """How the file differs from what `remote` says it must be (its size, then its sha256); None when it does not."""
    size = path.stat().st_size
    if remote.size is not None and size != remote.size:
        return f"{size} bytes, not the expected {remote.size}"
    if remote.sha256 is not None and (got := sha256(path)) != remote.sha256.lower():
        return f"sha256 {got} is not the pinned {remote.sha256}"
    return None


def fetch(remote: Remote, folder: Path, *, label: str | None = None) -> Path:
    """`folder / remote.name`, downloaded (resuming a partial transfer) unless it is already there and intact."""
    folder = Path(folder)
    target = folder / remote.name
    if target.is_file():
        if mismatch(remote, target) is None:
            return target
        target.unlink()  # damaged or another release; pooch would keep an unpinned one whatever it holds
    make_folder(folder)
    known = f"sha256:{remote.sha256}" if remote.sha256 else None
    transfer = Transfer(remote, folder, label or remote.name)
    try:
        with quiet(pooch.get_logger()):
            pooch.retrieve(remote.url, known_hash=known, fname=remote.name, path=folder, downloader=transfer,
                           progressbar=False)
    except ValueError as err:  # pooch's own check, after ours passed: the file changed under us
        raise UserError(f"{remote.url}: {err}".replace("\n", " ")) from None
    except OSError as err:
        raise UserError(f"{folder}: cannot write the download there ({reason(err)}): free some space or "
                        f"fix its permissions, or put {remote.name} there yourself") from None
    return target


def make_folder(folder: Path) -> None:
    """Create `folder` (and its parents); one line when it is a file or cannot be created."""
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{folder} is a file, not a folder: move it away, or fetch into another folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"cannot create the folder {folder} ({reason(err)}): fetch into another folder") from None


@contextmanager
def quiet(logger: logging.Logger) -> Iterator[None]:
    """`logger` (pooch's) at WARNING: its info lines repeat what the progress bar and the errors say."""
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


@dataclass
class Body:
    """An answer to a request from `start`: its bytes, the file's `total` size when known; `start` None: complete."""

    start: int | None
    total: int | None
    chunks: Iterable[bytes]
    close: Callable[[], None]


class Transfer:
    """pooch's downloader: `remote` streamed into its `.part` file, resumed where it stopped, then handed to pooch."""

    def __init__(self, remote: Remote, folder: Path, label: str) -> None:
        self.remote, self.folder, self.label = remote, folder, label
        self.part = partial_path(remote, folder)

    def __call__(self, url: str, output_file: str, pooch: object, check_only: bool = False) -> bool | None:
        """Fetch `url` into `output_file` (pooch's temporary name); with `check_only`, whether `url` answers."""
        if check_only:
            return available(url)
        offset = self.part.stat().st_size if self.part.is_file() else 0
        try:
            body = opened(url, offset, self.remote.size)
        except (requests.RequestException, OSError) as err:
            raise UserError(f"could not download {url} ({reason(err)}): check the connection and run it again, "
                            f"or put {self.remote.name} in {self.folder} yourself") from None
        try:
            if body.start is not None:
                self.receive(url, body)
        finally:
            body.close()
        self.check(url)
        os.replace(self.part, output_file)
        return None

    def receive(self, url: str, body: Body) -> None:
        """Write the body's bytes into the `.part` file (appended from a resumed offset), with a progress bar."""
        done = body.start or 0
        with self.part.open("ab" if done else "wb") as out, progress(self.label, body.total, done) as advance:
            try:
                for chunk in body.chunks:
                    out.write(chunk)
                    done += len(chunk)
                    advance(len(chunk))
            except (requests.RequestException, OSError) as err:  # a broken connection, a full disk
                raise self.cut(url, done, body.total, reason(err)) from None
        if body.total is not None and done < body.total:
            raise self.cut(url, done, body.total, "the connection closed early")

    def cut(self, url: str, done: int, total: int | None, why: str) -> UserError:
        """The error of a transfer that stopped short: its `.part` is kept for the next call to resume."""
        of = f" of {total}" if total is not None else ""
        return UserError(f"could not download {url}: the transfer stopped after {done}{of} bytes ({why}); "
                         f"{self.part} is kept: run the same command again to resume")

    def check(self, url: str) -> None:
        """One line, and the downloaded bytes deleted, when they are not what the remote says."""
        problem = mismatch(self.remote, self.part)
        if problem is not None:
            self.part.unlink()
            raise UserError(f"{url}: {problem}: the file is damaged or another release; the download was deleted: "
                            f"run the same command again, or put {self.remote.name} in {self.folder} yourself")


def opened(url: str, offset: int, size: int | None) -> Body:
    """`url` from byte `offset` (a `file:` URL is read in place; http(s) asks for a Range when `offset` > 0)."""
    parts = urllib.parse.urlparse(url)
    if parts.scheme == "file":
        source = Path(urllib.request.url2pathname(parts.path))
        total = source.stat().st_size
        if offset and offset >= total:  # as a server's 416
            return Body(None, total, (), lambda: None)
        f = source.open("rb")
        f.seek(offset)
        return Body(offset, total, iter(lambda: f.read(BLOCK), b""), f.close)
    headers = {"Accept-Encoding": "identity"} | ({"Range": f"bytes={offset}-"} if offset else {})
    response = requests.get(url, headers=headers, stream=True, timeout=TIMEOUT)
    if response.status_code == 416:  # the range starts at the end: the `.part` holds the whole file
        response.close()
        return Body(None, offset, (), lambda: None)
    if not response.ok:
        response.close()
    response.raise_for_status()
    length = int(response.headers["Content-Length"]) if "Content-Length" in response.headers else None
    start = offset if response.status_code == 206 else 0  # a 200 is the whole file: start over
    whole = re.fullmatch(r"bytes \d+-\d+/(\d+)", response.headers.get("Content-Range", ""))
    known = int(whole.group(1)) if whole else (start + length if length is not None else size)  # None: unknown
    response.raw.enforce_content_length = False  # else a cut loses the block it was reading; `receive` counts
    return Body(start, known, response.iter_content(BLOCK), response.close)


def available(url: str) -> bool:
    """Whether `url` answers (a `file:` URL: whether its file is there)."""
    parts = urllib.parse.urlparse(url)
    if parts.scheme == "file":
        return Path(urllib.request.url2pathname(parts.path)).is_file()
    try:
        with requests.head(url, allow_redirects=True, timeout=TIMEOUT) as response:
            return response.ok
    except requests.RequestException:
        return False


@contextmanager
def progress(label: str, total: int | None, done: int) -> Iterator[Callable[[int], None]]:
    """A Rich progress bar of a transfer from `done` bytes; yields the function that advances it."""
    columns = (TextColumn("{task.description}", markup=False), BarColumn(), DownloadColumn(),
               TransferSpeedColumn(), TimeRemainingColumn())
    with Progress(*columns) as bar:
        task = bar.add_task(label, total=total, completed=done)
        yield lambda n: bar.advance(task, n)


def reason(err: BaseException) -> str:
    """Why a transfer failed, in a few words ('connection refused', 'HTTP 404 Not Found', 'timed out')."""
    if isinstance(err, requests.HTTPError) and err.response is not None:
        return f"HTTP {err.response.status_code} {err.response.reason or ''}".strip()
    if isinstance(err, requests.Timeout):
        return "timed out"
    seen, todo = set(), [err]
    while todo:  # requests wraps urllib3's errors, which wrap the socket's: the innermost one says it best
        cause = todo.pop(0)
        if id(cause) in seen:
            continue
        seen.add(id(cause))
        if isinstance(cause, socket.gaierror):
            return "host not found"
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror.lower()
        nested = [getattr(cause, "reason", None), cause.__cause__, cause.__context__, *cause.args]
        todo += [c for c in nested if isinstance(c, BaseException)]
    if isinstance(err, requests.ConnectionError):
        return "connection broken"
    return str(err).splitlines()[0][:80] if str(err) else type(err).__name__
