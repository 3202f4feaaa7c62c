"""The capacity frontier: accuracy against model width and against state size, one line per mixer or model.

    python -m attnmem.tools.frontier SWEEP_DIR [SWEEP_DIR ...] [--out docs/figures/frontier.png] [--metric test/acc]
        [--solved 0.99] [--curves curves.png] [--curve-metric val/acc] [--wandb] [--project attnmem]

It reads the finished runs of the sweep directories (`sweep_report.load_rows`: a row per job, a replicas=R job
unfolded per seed) and draws two panels: the metric's mean over seeds (± std) against `model.d_model` (log2 axis)
and against `model/state_size` (log axis), the numbers of recurrent state one sequence holds, which the recall
family logs for a `StateSized` model. A line is a value of `model.mixer` where the sweeps vary it, else of
`experiment`, and of any other parameter that differs between the runs (a cell's length and pairs, a learning rate);
a model without a width (the classic memories) has its line in the state-size panel only. `--wandb` logs the figure
and a table of the points to W&B (WANDB_MODE=offline keeps it on this machine).

`--curves PNG` also draws, in one panel, each job's validation curve (`--curve-metric`, default `--metric` on the
val split: `val/acc`) against training step, from its `csv/metrics.csv`, with `--solved` dashed: whether and when
a run solves within its step cap. A line per job, or per replica of a replicas=R job (its `replicas/<r>/` column,
its seed advanced by r), named by the parameters that differ between them (`mqar_dnc seed=0`); a job without
metrics.json yet is drawn from the log it has so far, "(running)". `--curves` without `--out` draws the curves
only (a running sweep may have no finished run for the frontier).
"""

from __future__ import annotations

import argparse
import csv
import re
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
REPLICA = re.compile(r"replicas/(\d+)/(.+)")  # a replicas=R run's column of replica r


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
    # ticks at 1, 2 and 5 × 10^k as plain numbers: a state-size range rarely spans more than two decades
    by_state.xaxis.set_major_locator(plots.plt.LogLocator(subs=(1.0, 2.0, 5.0)))
    by_state.xaxis.set_major_formatter(plots.plt.FuncFormatter(lambda x, _: f"{x:,.0f}"))
    by_state.xaxis.set_minor_formatter(plots.plt.NullFormatter())
    by_state.set_xlabel(f"state size ({STATE}, numbers per sequence)")
    by_width.set_ylabel(f"{metric}{' (%)' if k == 100 else ''}, mean ± std over seeds")
    for ax in (by_width, by_state):
        ax.grid(alpha=0.3)
    by_state.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


@dataclass(frozen=True)
class Curve:
    """One line of the curves: a run's (or one replica's) validation metric by training step, as its CSV log holds
    it."""

    steps: tuple[int, ...]
    values: tuple[float, ...]
    running: bool  # the job has no metrics.json yet


def _job_curves(log: Path, metric: str, params: dict[str, str], running: bool) -> list[tuple[dict[str, str], Curve]]:
    """The curves of one job's `csv/metrics.csv`: one per replica of a replicas=R run, else one."""
    with open(log, newline="") as f:
        reader = csv.DictReader(f)
        table, header = list(reader), list(reader.fieldnames or [])
    replicas = sorted(int(m[1]) for m in map(REPLICA.fullmatch, header) if m and m[2] == metric)
    if not replicas and metric not in header:
        if running:
            return []  # not logged yet
        raise UserError(f"{log}: no column '{metric}' (--curve-metric: a metric the runs log each validation, e.g. "
                        "val/acc)")
    seed = params.get("seed", "")
    columns = [(f"replicas/{r}/{metric}", params | ({"seed": str(int(seed) + r)} if seed.lstrip("-").isdigit()
                                                      else {"replica": str(r)})) for r in replicas]
    curves = []
    for column, own in columns or [(metric, params)]:
        rows = [row for row in table if row.get(column)]
        steps, values = tuple(int(row["step"]) for row in rows), tuple(float(row[column]) for row in rows)
        curves.append((own, Curve(steps, values, running)))
    return curves


def curves(sweep_dirs: list[Path], metric: str = "val/acc") -> dict[str, Curve]:
    """The validation curves of the sweeps' jobs, finished or running, named by the parameters that differ between
    them (the experiment or mixer as it is, the others as `name=value`)."""
    found: list[tuple[dict[str, str], Curve, str]] = []
    for sweep_dir in sweep_dirs:
        spec, rows = load_rows(sweep_dir)
        for job in dict.fromkeys(r["job"] for r in rows if r["state"] != "not run"):
            row = next(r for r in rows if r["job"] == job)  # a replicas=R run: its first replica's (first seed)
            log, running = sweep_dir / job / "csv" / "metrics.csv", row["state"] != "finished"
            if not log.is_file() and running:
                continue  # started, nothing logged yet
            if not log.is_file():
                raise UserError(f"{sweep_dir / job}: no csv/metrics.csv: --curves reads each run's CSV log "
                                "(Lightning's CSVLogger, written by every training run); rerun the job")
            params = {p: label(row[p]) for p in spec["parameters"] if str(row.get(p, ""))}
            found += [(own, curve, f"{sweep_dir.name}/{job}") for own, curve in _job_curves(log, metric, params,
                                                                                             running)]
    if not found:
        raise UserError(f"--curves: no run in {', '.join(map(str, sweep_dirs))} has logged '{metric}' yet")
    differ = [p for p in dict.fromkeys(p for params, *_ in found for p in params)
              if len({params.get(p) for params, *_ in found}) > 1]
    lines: dict[str, Curve] = {}
    for params, curve, where in found:
        name = " ".join(params[p] if p in LINE_PARAMETERS else f"{p}={params[p]}" for p in differ if p in params)
        name = name or "run"
        lines[f"{name} ({where})" if name in lines else name] = curve
    return lines


def curves_figure(lines: dict[str, Curve], metric: str, solved: float) -> Any:
    """One panel: each curve's metric (a rate in %) against training step, and the solving threshold dashed."""
    from attnmem.evaluation import plots  # noqa: PLC0415 - as in `figure`

    k = 100 if metric.rsplit("/", 1)[-1] in RATES else 1
    fig, ax = plots.plt.subplots(figsize=(8.0, 4.5))
    for i, (name, curve) in enumerate(lines.items()):
        ax.plot(curve.steps, [k * v for v in curve.values], marker=".", color=f"C{i % 10}",
                linestyle=("-", ":", "-.")[i // 10 % 3], label=name + (" (running)" if curve.running else ""))
    ax.axhline(k * solved, color="black", linestyle="--", label=f"solved: {k * solved:g}")
    ax.set_xlabel("training step")
    ax.set_ylabel(f"{metric}{' (%)' if k == 100 else ''}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


def val_metric(metric: str) -> str:
    """The validation split's name of a metric: `test/acc` -> `val/acc`."""
    return f"val/{metric.split('/', 1)[1]}" if "/" in metric else metric


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


def write_curves(sweep_dirs: list[Path], out: Path, metric: str = "val/acc", solved: float = 0.99) -> dict[str, Curve]:
    """Draw the sweeps' validation curves into `out` (PNG, written atomically); return them."""
    from attnmem.evaluation import plots  # noqa: PLC0415 - as in `figure`

    lines = curves(sweep_dirs, metric)
    plots.save(curves_figure(lines, metric, solved), out)
    return lines


def _draw(args: argparse.Namespace) -> None:
    """What the command line asks: the frontier (--out, the default without --curves), the curves (--curves)."""
    out = args.out or (None if args.curves else OUT)
    if args.wandb and out is None:
        raise UserError("--wandb logs the frontier: give --out too")
    if out is not None:
        lines = write(args.sweep_dirs, out, args.metric, args.solved)
        for line, pts in lines.items():
            print(f"{line}: " + ", ".join(f"{p.width or '-'}/{p.state_size}: {100 * p.mean:.1f}%" for p in pts))
        if args.wandb:
            log_wandb(lines, out, args.project)
        print(f"wrote {out}")
    if args.curves is not None:
        metric = args.curve_metric or val_metric(args.metric)
        for name, curve in write_curves(args.sweep_dirs, args.curves, metric, args.solved).items():
            last = f"{curve.values[-1]:.4g} at step {curve.steps[-1]}" if curve.steps else "nothing logged"
            print(f"{name}: {metric} {last}{' (running)' if curve.running else ''}")
        print(f"wrote {args.curves}")


def main(argv: list[str] | None = None) -> None:
    """Command line: draw the frontier of the given sweep directories, and/or their validation curves."""
    parser = argparse.ArgumentParser(prog="python -m attnmem.tools.frontier", description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dirs", type=Path, nargs="+", help="sweep directories (python -m attnmem.tools.sweep)")
    parser.add_argument("--out", type=Path, help=f"the frontier PNG (default {OUT}, unless only --curves is given)")
    parser.add_argument("--metric", default="test/acc", help="the metric on the y axis (default test/acc)")
    parser.add_argument("--solved", type=float, default=0.99, help="a seed at or above it solves (the W&B table)")
    parser.add_argument("--curves", type=Path, help="also draw each job's validation curve into this PNG")
    parser.add_argument("--curve-metric", help="the curves' metric (default: --metric on the val split, val/acc)")
    parser.add_argument("--wandb", action="store_true", help="also log the figure and its points to W&B")
    parser.add_argument("--project", default="attnmem", help="the W&B project (with --wandb)")
    args = parser.parse_args(argv)
    try:
        _draw(args)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
