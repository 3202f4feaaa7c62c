"""The datasets of the recipes in your data folder: `attnmem-data list` and `attnmem-data fetch NAME [NAME ...]`.

The data folder is `--data-dir`, else `$ATTNMEM_DATA_DIR`, else `data/` in the working directory: the one
`paths.data_dir` gives every recipe. `python -m attnmem.tools.data` runs the same.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from attnmem.core.download import partial_path
from attnmem.core.errors import UserError
from attnmem.data.catalog import DATASETS, Dataset, check_data_dir, data_dir, fetch_dataset


def _size(sizes: list[int | None]) -> str:
    """The download size, e.g. '2.2 GB'; '?' when a file's size is not known."""
    if any(s is None for s in sizes):
        return "?"
    total = sum(s for s in sizes if s is not None)
    return f"{total / 1e9:.1f} GB" if total >= 1e9 else f"{total / 1e6:.1f} MB"


def status(dataset: Dataset, root: Path) -> str:
    """'present', 'missing', or what a partial transfer or a partial set of files leaves."""
    folder = root / dataset.folder
    missing = dataset.missing(folder)
    if not missing:
        return "present"
    partial = [p for p in (partial_path(r, folder) for r in dataset.remotes) if p.is_file()]
    if partial:
        got = sum(p.stat().st_size for p in partial)
        return f"partial transfer ({got / 1e6:.0f} MB): fetch again to resume"
    if len(missing) < len(dataset.members):
        return f"missing {', '.join(missing)}"
    return "missing"


def table(root: Path) -> Table:
    """Every dataset: where it goes, its size and state, how it is checked, its licence and the recipes using it."""
    grid = Table(title=f"datasets in {root}", title_justify="left")
    for column in ("name", "folder", "download", "state", "checked by", "licence", "used by"):
        grid.add_column(column, overflow="fold")
    for d in DATASETS.values():
        grid.add_row(d.name, f"{d.folder}/", _size([r.size for r in d.remotes]), status(d, root), d.checked_by,
                     d.licence, ", ".join(d.recipes))
    return grid


def fetch(names: list[str], root: Path) -> None:
    """Fetch the named datasets into the data folder, one after the other; each one already there is left alone."""
    unknown = [n for n in names if n not in DATASETS]
    if unknown:
        raise UserError(f"no dataset named {', '.join(unknown)}: choose from {', '.join(DATASETS)} "
                        "(attnmem-data list)")
    for name in names:
        fetched = fetch_dataset(DATASETS[name], root / DATASETS[name].folder)
        print(f"{name}: {'fetched ' + ', '.join(fetched) if fetched else 'already present'} in "
              f"{root / DATASETS[name].folder}")


def main(argv: list[str] | None = None) -> None:
    """Command line: `attnmem-data list` or `attnmem-data fetch NAME [NAME ...]`, with `--data-dir`."""
    parser = argparse.ArgumentParser(prog="attnmem-data", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="the data folder (default: $ATTNMEM_DATA_DIR, else ./data)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="each dataset: where it goes, size, state, checksum, licence, recipes")
    fetch_parser = commands.add_parser("fetch", help="download and check datasets into the data folder")
    fetch_parser.add_argument("names", nargs="+", metavar="NAME", help=f"one of: {', '.join(DATASETS)}")
    args = parser.parse_args(argv)
    root = args.data_dir or data_dir()
    try:
        check_data_dir(str(root), "--data-dir" if args.data_dir else None)
        if args.command == "list":
            console = Console()
            (console if console.is_terminal else Console(width=240)).print(table(root))  # a pipe: one line a row
        else:
            fetch(args.names, root)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        print("error: interrupted; a partial transfer is kept: run the same command again to resume", file=sys.stderr)
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
