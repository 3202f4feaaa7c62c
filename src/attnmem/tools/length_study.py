"""Quality against sequence length for finished runs: a table and a figure.

    python -m attnmem.tools.length_study rnn=outputs/runs/length_study/rnn_reverse_long \\
        attn_rnn=outputs/runs/length_study/attn_rnn_reverse_long --out docs/figures/length_study.png \\
        --title "reverse, trained on source lengths 1-50"
    python -m attnmem.tools.length_study ntm=<run> lstm=<run> --train-max 20 --out copy_bit_errors_by_length.png

seq2seq runs (Bahdanau et al. 2015, Fig. 2): each `metrics.json`'s `test/len{a}-{b}/token_acc` (per
source-length bucket of the main test set) and `test/len{L}/exact_match` (the extra test lengths).
sequence runs (Graves et al. 2014, §4.1's generalisation to longer copies): `test/len{L}/bit_errors`, with
the main test set's `test/bit_errors` drawn at `--train-max`, the longest training length.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from attnmem.core.errors import UserError
from attnmem.core.integrity import read_json
from attnmem.evaluation import plots

BUCKET = re.compile(r"^test/len(\d+-\d+)/token_acc$")
LENGTH = re.compile(r"^test/len(\d+)/exact_match$")
BIT_ERRORS = re.compile(r"^test/len(\d+)/bit_errors$")


def read_metrics(run_dir: Path) -> dict[str, float]:
    """A finished run's metrics.json."""
    path = run_dir / "metrics.json"
    if not path.is_file():
        raise UserError(f"{path}: no metrics.json (is the run finished?)")
    return read_json(path, "restore it from a copy of the run, or run it again")


def read_bit_errors(metrics: dict[str, float], train_max: int | None) -> dict[int, float] | None:
    """Bit errors per sequence by test length of a sequence run (the main set at `train_max`), None for other runs."""
    errors = {int(m[1]): v for k, v in metrics.items() if (m := BIT_ERRORS.match(k))}
    if not errors:
        return None
    if train_max is not None and "test/bit_errors" in metrics:
        errors[train_max] = metrics["test/bit_errors"]
    return errors


def read_run(run_dir: Path) -> tuple[dict[str, float], dict[int, float]]:
    """Token accuracy per length bucket and exact match per extra test length of one finished seq2seq run."""
    metrics = read_metrics(run_dir)
    path = run_dir / "metrics.json"
    buckets = {m[1]: v for k, v in metrics.items() if (m := BUCKET.match(k))}
    longer = {int(m[1]): v for k, v in metrics.items() if (m := LENGTH.match(k))}
    if not buckets:
        raise UserError(f"{path}: no test/len<a>-<b>/token_acc keys (task.length_bucket > 0 on a seq2seq run)")
    return buckets, longer


def table(buckets: dict[str, dict[str, float]], longer: dict[str, dict[int, float]]) -> str:
    """A Markdown table: one row per bucket / extra length, one column per run."""
    names = sorted(buckets)
    rows = [f"| source length | {' | '.join(names)} |", f"|---|{'---|' * len(names)}"]
    for label in sorted({b for run in buckets.values() for b in run}, key=lambda b: int(b.split("-")[0])):
        cells = [f"{100 * buckets[n][label]:.1f}" if label in buckets[n] else "" for n in names]
        rows.append(f"| {label} (token acc. %) | {' | '.join(cells)} |")
    for length in sorted({n for run in longer.values() for n in run}):
        cells = [f"{100 * longer[n][length]:.1f}" if length in longer[n] else "" for n in names]
        rows.append(f"| {length} (exact match %) | {' | '.join(cells)} |")
    return "\n".join(rows)


def bit_error_table(errors: dict[str, dict[int, float]]) -> str:
    """A Markdown table of bit errors per sequence: one row per test length, one column per run."""
    names = sorted(errors)
    rows = [f"| length | {' | '.join(names)} |", f"|---|{'---|' * len(names)}"]
    for length in sorted({n for run in errors.values() for n in run}):
        cells = [f"{errors[n][length]:.2f}" if length in errors[n] else "" for n in names]
        rows.append(f"| {length} | {' | '.join(cells)} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    """Print the table of `name=run_dir` runs and write the figure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="name=run_dir of a finished seq2seq run")
    parser.add_argument("--out", type=Path, default=Path("length_study.png"))
    parser.add_argument("--title", default="")
    parser.add_argument("--train-max", type=int, help="sequence runs: the longest training length")
    args = parser.parse_args(argv)
    runs = dict(spec.partition("=")[::2] for spec in args.runs)
    if bad := next((spec for spec in args.runs if "=" not in spec), None):
        parser.error(f"{bad}: expected name=run_dir")
    try:
        errors = {name: read_bit_errors(read_metrics(Path(d)), args.train_max) for name, d in runs.items()}
        found = {name: e for name, e in errors.items() if e}
        if len(found) == len(errors):  # every run has bit errors per length
            print(bit_error_table(found))
            fig = plots.bit_errors_by_length(found, args.train_max)
        else:
            read = {name: read_run(Path(run_dir)) for name, run_dir in runs.items()}
            buckets, longer = {n: r[0] for n, r in read.items()}, {n: r[1] for n, r in read.items()}
            print(table(buckets, longer))
            fig = plots.accuracy_by_length(buckets, longer, title=args.title)
    except UserError as err:
        parser.error(str(err))  # one line, no traceback
    print(f"figure: {plots.save(fig, args.out)}")


if __name__ == "__main__":
    main()
