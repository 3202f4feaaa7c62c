"""The per-task bAbI table of multiruns: `python -m attnmem.tools.babi_table <multirun dir>... [--out FILE]`.

Each finished job (a directory with `metrics.json`) contributes its task, seed, training error and
validation error. Per task, the reported run is the seed with the lowest final training error (the
MemN2N reference code's rule, which keeps the validation figure honest; ties go to the lower final
training loss); mean ± std over seeds is shown beside it.
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

from omegaconf import OmegaConf

from attnmem.core.errors import UserError
from attnmem.core.integrity import read_json


def collect(sweep_dirs: list[Path]) -> dict[int, list[dict[str, float]]]:
    """Per task, the seed, training error and validation error of every finished single-task job."""
    runs: dict[int, list[dict[str, float]]] = defaultdict(list)
    for metrics_file in sorted(f for d in sweep_dirs for f in d.glob("*/metrics.json")):
        cfg = OmegaConf.load(metrics_file.parent / ".hydra" / "config.yaml")
        tasks = list(cfg.data.tasks)
        if len(tasks) != 1:
            continue
        metrics = read_json(metrics_file, "restore it from a copy of the run, or run the job again")
        runs[tasks[0]].append(
            {"seed": cfg.seed, "train_error": metrics["train/error"], "train_loss": metrics["train/loss"],
             "val_error": 1 - metrics["val/acc"]}
        )
    if not runs:
        raise UserError(f"{', '.join(map(str, sweep_dirs))}: no finished single-task jobs (no */metrics.json)")
    return runs


def table(runs: dict[int, list[dict[str, float]]]) -> tuple[str, float]:
    """Markdown table (validation error in %) and the mean of the selected runs' errors."""
    lines = [
        "| task | seeds | val error, seed with lowest train error (then loss) | its train error "
        "| val error, mean ± std over seeds |",
        "|---:|---:|---:|---:|---:|",
    ]
    chosen = []
    for task in sorted(runs):
        jobs = runs[task]
        best = min(jobs, key=lambda j: (j["train_error"], j["train_loss"], j["seed"]))
        errors = [j["val_error"] for j in jobs]
        spread = statistics.stdev(errors) if len(errors) > 1 else 0.0
        chosen.append(best["val_error"])
        lines.append(
            f"| {task} | {len(jobs)} | {100 * best['val_error']:.1f} (seed {best['seed']}) | "
            f"{100 * best['train_error']:.1f} | {100 * statistics.mean(errors):.1f} ± {100 * spread:.1f} |"
        )
    mean = statistics.mean(chosen)
    lines.append(f"| **mean** | | **{100 * mean:.1f}** | | |")
    return "\n".join(lines), mean


def main() -> None:
    """Print the table, or write it into a markdown file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dirs", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, help="write the table here instead of printing it")
    args = parser.parse_args()
    try:
        text, mean = table(collect(args.sweep_dirs))
    except UserError as err:
        raise SystemExit(f"error: {err}") from None
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    print(f"\nmean validation error over {text.count('(seed')} tasks: {100 * mean:.1f}%")


if __name__ == "__main__":
    main()
