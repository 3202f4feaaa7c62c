"""Archives fetched once and checked against a pinned sha256 (Cora, the Large Movie Review Dataset)."""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.request
from pathlib import Path

from attnmem.core.atomic import replacing
from attnmem.core.errors import UserError

__all__ = ["check_sha256", "download", "sha256"]


def sha256(path: Path) -> str:
    """The file's sha256, hex."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(url: str, archive: Path, expected: str) -> None:
    """Fetch `url` to `archive` through a temporary name, kept only when its sha256 is `expected`."""
    with replacing(archive) as tmp:
        try:
            with urllib.request.urlopen(url, timeout=60) as response, tmp.open("wb") as out:
                while block := response.read(1 << 20):
                    out.write(block)
        except (urllib.error.URLError, OSError) as err:
            raise UserError(
                f"could not download {url} ({err}): put {archive.name} in {archive.parent} yourself"
            ) from None
        check_sha256(tmp, expected, url)


def check_sha256(path: Path, expected: str, origin: str) -> None:
    """One line naming `origin` when the file's sha256 is not `expected`."""
    got = sha256(path)
    if got != expected:
        raise UserError(
            f"{origin}: sha256 {got} is not the pinned {expected}: the file is damaged or another "
            f"release; delete it and download again, or pass data.source.sha256={got} if you trust it"
        )
