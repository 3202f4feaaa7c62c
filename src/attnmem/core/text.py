"""Text files read as UTF-8, with one line naming the file, line and byte where they are not."""

from __future__ import annotations

import codecs
from pathlib import Path

from attnmem.core.errors import UserError


def read_utf8(path: Path, kind: str) -> str:
    """The file's text (a UTF-8 byte-order mark dropped); `kind` names the format in the error, e.g. "bAbI files"."""
    data = path.read_bytes()
    bom = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[bom:].decode("utf-8")
    except UnicodeDecodeError as err:
        at = bom + err.start
        line = data.count(b"\n", 0, at) + 1
        raise UserError(
            f"{path}:{line}: not UTF-8 text (byte {at} is {data[at : at + 1]!r}): {kind} are UTF-8; "
            "re-save the file as UTF-8"
        ) from None
