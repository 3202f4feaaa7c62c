"""Quality against source length for finished seq2seq runs: a table and the figure of Bahdanau et al. 2015, Fig. 2.

    python -m attnmem.tools.length_study rnn=outputs/runs/length_study/rnn_reverse_long \\
        attn_rnn=outputs/runs/length_study/attn_rnn_reverse_long --out docs/figures/length_study.png \\
        --title "reverse, trained on source lengths 1-50"

Reads each run's `metrics.json`: `test/len{a}-{b}/token_acc` (per source-length bucket of the main test
set) and `test/len{L}/exact_match` (the extra test lengths).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from attnmem.core.errors import UserError
from attnmem.evaluation import plots

BUCKET = re.compile(r"^test/len(\d+-\d+)/token_acc$")
LENGTH = re.compile(r"^test/len(\d+)/exact_match$")


def read_run(run_dir: Path) -> tuple[dict[str, float], dict[int, float]]:
    """Token accuracy per length bucket and exact match per extra test length of one finished run."""
    path = run_dir / "metrics.json"
    if not path.is_file():
        raise UserError(f"{path}: no metrics.json (is the run finished?)")
    metrics = json.loads(path.read_text())
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


def main(argv: list[str] | None = None) -> None:
    """Print the table of `name=run_dir` runs and write the figure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="name=run_dir of a finished seq2seq run")
    parser.add_argument("--out", type=Path, default=Path("length_study.png"))
    parser.add_argument("--title", default="")
    args = parser.parse_args(argv)
    buckets, longer = {}, {}
    for spec in args.runs:
        name, sep, run_dir = spec.partition("=")
        if not sep:
            parser.error(f"{spec}: expected name=run_dir")
        try:
            buckets[name], longer[name] = read_run(Path(run_dir))
        except UserError as err:
            parser.error(str(err))  # one line, no traceback
    print(table(buckets, longer))
    fig = plots.accuracy_by_length(buckets, longer, title=args.title)
    print(f"figure: {plots.save(fig, args.out)}")


if __name__ == "__main__":
    main()
