"""The model × data compatibility table, from the classes' families: `python -m attnmem.tools.compat [--update FILE]`.

A model class declares `families`, a datamodule class its `family`; a model trains on data of its families.
A model whose constructor takes a `score` uses the `attention=` option; the others ignore it.
It reads the packaged `conf/model/*.yaml` and `conf/data/*.yaml` (`--conf DIR` another config folder).
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path
from typing import Any

from hydra.utils import get_class
from omegaconf import OmegaConf

from attnmem.core import packaged
from attnmem.core.atomic import write_text
from attnmem.core.errors import UserError

START, END = "<!-- compat:start -->", "<!-- compat:end -->"


def _classes(conf: Path, group: str) -> dict[str, Any]:
    """Option name -> the class its yaml's `_target_` names (with `family` or `families`); one line when none."""
    files = sorted((conf / group).glob("*.yaml"))
    if not files:
        raise UserError(f"--conf {conf}: no {group}/*.yaml there; pass a config folder with model/ and data/ "
                        "(or no --conf: attnmem's own)")
    return {p.stem: get_class(OmegaConf.load(p)._target_) for p in files}


def table(conf: Path | None = None) -> str:
    """A markdown table: each model option, its families, the data options it serves, whether it uses `attention=`."""
    conf = conf or packaged.conf_dir()
    models, data = _classes(conf, "model"), _classes(conf, "data")
    lines = ["| model | families | data | `attention=` |", "|---|---|---|---|"]
    for name, cls in models.items():
        fits = [f"`{d}`" for d, c in data.items() if c.family in cls.families]
        score = "used" if uses_attention(cls) else "ignored"
        lines.append(f"| `{name}` | {', '.join(cls.families)} | {', '.join(fits)} | {score} |")
    return "\n".join(lines)


def uses_attention(model_cls: type) -> bool:
    """Whether the model's constructor takes the attention score (the `attention=` option)."""
    return "score" in inspect.signature(model_cls).parameters


def update(path: Path, conf: Path | None = None) -> None:
    """Replace the table between the compat markers in `path` with the current one."""
    text = path.read_text()
    head, start, rest = text.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise SystemExit(f"{path}: no {START} ... {END} markers to put the table between")
    write_text(path, f"{head}{START}\n{table(conf)}\n{END}{tail}")


def main() -> None:
    """Print the table, or write it into a markdown file between the compat markers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", type=Path, help="markdown file to update in place (e.g. README.md)")
    parser.add_argument("--conf", type=Path, help="config folder (default: attnmem's own, attnmem/conf)")
    args = parser.parse_args()
    try:
        if args.update:
            update(args.update, args.conf)
        else:
            print(table(args.conf))
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
