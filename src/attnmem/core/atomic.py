"""Files written under a temporary name and renamed, so a partial file never looks complete."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_text(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary name in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write `data` as JSON to `path` through a temporary name and a rename."""
    write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
