"""The capacity frontier: accuracy against model width and against state size, one line per mixer or model.

    python -m attnmem.tools.frontier SWEEP_DIR [SWEEP_DIR ...] [--out docs/figures/frontier.png] [--metric test/acc]
        [--solved 0.99] [--wandb] [--project attnmem]

It reads the finished runs of the sweep directories (`sweep_report.load_rows`: a row per job, a replicas=R job
unfolded per seed) and draws two panels: the metric's mean over seeds (± std) against `model.d_model` (log2 axis)
and against `model/state_size` (log axis), the numbers of recurrent state one sequence holds, which the recall
family logs for a `StateSized` model. A line is a value of `model.mixer` where the sweeps vary it, else of
`experiment`, and of any other parameter that differs between the runs (a cell's length and pairs, a learning rate);
a model without a width (the classic memories) has its line in the state-size panel only. `--wandb` logs the figure
and a table of the points to W&B (WANDB_MODE=offline keeps it on this machine).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from attnmem.core.errors import UserError
from attnmem.tools.scoreboard_rows import label
from attnmem.tools.sweep_report import RATES, is_seed, load_rows

OUT = Path("docs/figures/frontier.png")
WIDTH = "model.d_model"
STATE = "model/state_size"
LINE_PARAMETERS = ("model.mixer", "experiment")  # the first that a run sets names its line


@dataclass(frozen=True)
class Point:
    """One point of a line: the runs of one width and state size, their metric over seeds."""

    width: int | None  # model.d_model; None for a model that has none
    state_size: int
    mean: float
    std: float
    seeds: int
    solved: int  # seeds at or above the solving threshold


def _width(sweep_dir: Path, run: dict[str, Any]) -> int | None:
    """model.d_model: the sweep's parameter, else the job's composed config (None where the model has no width)."""
    if str(run.get(WIDTH, "")):
        return int(label(run[WIDTH]))
    config = sweep_dir / run["job"] / ".hydra" / "config.yaml"
    model = (yaml.safe_load(config.read_text()) or {}).get("model", {}) if config.is_file() else {}
    return int(model["d_model"]) if isinstance(model, dict) and "d_model" in model else None


def _runs(sweep_dirs: list[Path], metric: str) -> list[tuple[dict[str, str], int | None, int, float]]:
    """Every finished run as (its parameters, width, state size, metric); one-line errors for what cannot be drawn."""
    runs: list[tuple[dict[str, str], int | None, int, Any, Path]] = []  # the metric: None where a run lacks it
    reported: set[str] = set()
    for sweep_dir in sweep_dirs:
        spec, rows = load_rows(sweep_dir)
        for run in (r for r in rows if r["state"] == "finished"):
            reported |= {k for k, v in run.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            where = sweep_dir / run["job"] / "metrics.json"
            if STATE not in run:
                raise UserError(f"{where}: no '{STATE}': the frontier needs runs whose model declares its state size "
                                "(attnmem.models.contract.StateSized), trained since the recall family logs it")
            params = {p: label(run[p]) for p in spec["parameters"] if str(run.get(p, "")) and not is_seed(p)}
            runs.append((params, _width(sweep_dir, run), int(run[STATE]), run.get(metric), where))
    if not runs:
        raise UserError(f"no finished run in {', '.join(map(str, sweep_dirs))}: run the sweeps first (a run is "
                        "finished when its metrics.json exists)")
    if metric not in reported:
        raise UserError(f"--metric {metric}: no finished run reports it (they report: {', '.join(sorted(reported))})")
    missing = next((where for *_, value, where in runs if value is None), None)
    if missing is not None:
        raise UserError(f"{missing}: no '{metric}' (--metric: a key every run reports)")
    return [(params, width, state, float(value)) for params, width, state, value, _ in runs]


def points(sweep_dirs: list[Path], metric: str = "test/acc", solved: float = 0.99) -> dict[str, list[Point]]:
    """The lines of the frontier: per line its points, in the order of state size (then width)."""
    runs = _runs(sweep_dirs, metric)
    named = [p for p in LINE_PARAMETERS if any(p in params for params, *_ in runs)]
    others = sorted({p for params, *_ in runs for p in params if p not in (*LINE_PARAMETERS, WIDTH)
                     and len({r[0][p] for r in runs if p in r[0]}) > 1})  # differs between the runs that set it
    groups: dict[tuple[str, int | None, int], list[float]] = defaultdict(list)
    for params, width, state, value in runs:
        line = next((params[p] for p in named if p in params), "runs")
        line = ", ".join([line, *(f"{p}={params[p]}" for p in others if p in params)])
        groups[(line, width, state)].append(value)
    lines: dict[str, list[Point]] = defaultdict(list)
    for (line, width, state), values in sorted(groups.items(), key=lambda g: (g[0][0], g[0][2], g[0][1] or 0)):
        std = statistics.stdev(values) if len(values) > 1 else 0.0
        solving = sum(round(v, 6) >= solved for v in values)  # float32 logs 0.99 as 0.9900000095
        lines[line].append(Point(width, state, statistics.fmean(values), std, len(values), solving))
    return dict(lines)


def figure(lines: dict[str, list[Point]], metric: str) -> Any:
    """Two panels: the metric (a rate in %; mean ± std over seeds) against width (log2) and against state size
    (log)."""
    from attnmem.evaluation import plots  # noqa: PLC0415 - torch and matplotlib only to draw; it sets Agg first

    k = 100 if metric.rsplit("/", 1)[-1] in RATES else 1
    fig, (by_width, by_state) = plots.plt.subplots(1, 2, figsize=(11.0, 4.2), sharey=True)
    for i, (line, pts) in enumerate(lines.items()):
        wide = sorted((p for p in pts if p.width is not None), key=lambda p: p.width or 0)
        style: dict[str, Any] = {"marker": "o" if wide else "s", "capsize": 3, "label": line, "color": f"C{i % 10}"}
        if wide:
            by_width.errorbar([p.width for p in wide], [k * p.mean for p in wide], yerr=[k * p.std for p in wide],
                              **style)
        by_state.errorbar([p.state_size for p in pts], [k * p.mean for p in pts], yerr=[k * p.std for p in pts],
                          linestyle="-" if wide else "--", **style)
    widths = sorted({p.width for pts in lines.values() for p in pts if p.width is not None})
    by_width.set_xscale("log", base=2)
    by_width.set_xticks(widths, [str(w) for w in widths])
    by_width.set_xlabel(f"model width ({WIDTH})")
    by_state.set_xscale("log")
    by_state.set_xlabel(f"state size ({STATE}, numbers per sequence)")
    by_width.set_ylabel(f"{metric}{' (%)' if k == 100 else ''}, mean ± std over seeds")
    for ax in (by_width, by_state):
        ax.grid(alpha=0.3)
    by_state.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


def log_wandb(lines: dict[str, list[Point]], image: Path, project: str) -> None:
    """Log the figure and a table of the points to W&B (offline where WANDB_MODE=offline)."""
    import wandb  # noqa: PLC0415 - only with --wandb

    run = wandb.init(project=project, job_type="frontier", name=image.stem)
    columns: list[str | int] = ["line", *(f.name for f in fields(Point))]
    table = wandb.Table(columns=columns, data=[[line, *astuple(p)] for line, pts in lines.items() for p in pts])
    run.log({"frontier": wandb.Image(str(image)), "frontier/points": table})
    run.finish()


def write(sweep_dirs: list[Path], out: Path = OUT, metric: str = "test/acc",
          solved: float = 0.99) -> dict[str, list[Point]]:
    """Draw the frontier of the sweeps into `out` (PNG, written atomically); return its lines."""
    from attnmem.evaluation import plots  # noqa: PLC0415 - as in `figure`

    lines = points(sweep_dirs, metric, solved)
    plots.save(figure(lines, metric), out)
    return lines


def main(argv: list[str] | None = None) -> None:
    """Command line: draw the frontier of the given sweep directories."""
    parser = argparse.ArgumentParser(prog="python -m attnmem.tools.frontier", description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dirs", type=Path, nargs="+", help="sweep directories (python -m attnmem.tools.sweep)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--metric", default="test/acc", help="the metric on the y axis (default test/acc)")
    parser.add_argument("--solved", type=float, default=0.99, help="a seed at or above it solves (the W&B table)")
    parser.add_argument("--wandb", action="store_true", help="also log the figure and its points to W&B")
    parser.add_argument("--project", default="attnmem", help="the W&B project (with --wandb)")
    args = parser.parse_args(argv)
    try:
        lines = write(args.sweep_dirs, args.out, args.metric, args.solved)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(1) from None
    for line, pts in lines.items():
        print(f"{line}: " + ", ".join(f"{p.width or '-'}/{p.state_size}: {100 * p.mean:.1f}%" for p in pts))
    if args.wandb:
        log_wandb(lines, args.out, args.project)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
