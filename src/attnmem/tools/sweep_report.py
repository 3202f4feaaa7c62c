"""The report of a sweep: `summary.csv` (a row per job), `summary.md` (mean ± std over seeds, best of seeds
chosen by the validation metric) and `summary.png`, from a sweep directory or a W&B runs export (CSV)."""

from __future__ import annotations

import csv
import io
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf

from attnmem.core import atomic
from attnmem.core.errors import UserError
from attnmem.core.integrity import read_json
from attnmem.replicas import sweep as sweep_replicas
from attnmem.tools.sweep_spec import load_spec

RATES = ("acc", "error", "exact_match", "f1", "em")


def load_rows(source: Path, sweep_file: Path | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The sweep's spec and one row per job: `job`, `state`, its parameters, and its metrics."""
    if source.suffix == ".csv":
        if sweep_file is None:
            raise UserError(f"{source}: a CSV export needs --sweep <the sweep file> to know its parameters")
        spec = load_spec(sweep_file)
        if "metric" not in spec:  # a local sweep ranks by what its jobs monitored; an export does not say
            example = "{name: val/acc, goal: maximize}"
            raise UserError(f"{sweep_file}: metric: needed to rank a W&B export, e.g. metric: {example}")
        return spec, _csv_rows(source, spec)
    saved = source / "sweep.yaml"
    if not saved.is_file():
        raise UserError(f"{source}: no sweep.yaml; not a directory made by python -m attnmem.tools.sweep")
    meta = yaml.safe_load(saved.read_text())
    jobs = meta["jobs"] or [_overrides(d) for d in sorted(_job_dirs(source), key=lambda d: int(d.name))]
    rows = []
    for i, job in enumerate(jobs):
        params = dict(o.split("=", 1) for o in job if "=" in o)
        job_dir = source / str(i)
        done = (job_dir / "metrics.json").is_file()
        metrics = read_json(job_dir / "metrics.json", "restore it from a copy, or run the job again") if done else {}
        state = "finished" if metrics else "failed" if job_dir.is_dir() else "not run"
        row = {"job": str(i), "state": state, **{k: params.get(k, "") for k in meta["spec"]["parameters"]}}
        rows.extend(sweep_replicas.unfold(row, metrics))  # a replicas=R job: a row per replica
    return meta["spec"], rows


def _job_dirs(source: Path) -> list[Path]:
    return [d for d in source.iterdir() if d.is_dir() and d.name.isdigit()]


def _overrides(job_dir: Path) -> list[str]:
    path = job_dir / ".hydra" / "overrides.yaml"
    return list(OmegaConf.load(path)) if path.is_file() else []


def _csv_rows(path: Path, spec: dict[str, Any]) -> list[dict[str, Any]]:
    with open(path, newline="") as f:
        table = list(csv.DictReader(f))
    # a parameter fixed by the sweep file may be absent from the export; one that varies may not
    fixed = {p: str(v["value"]) for p, v in spec["parameters"].items() if "value" in v}
    missing = [p for p in spec["parameters"] if table and p not in table[0] and p not in fixed]
    if missing:
        raise UserError(f"{path}: no column '{missing[0]}' (a parameter of sweep {spec['name']})")
    rows = []
    for i, row in enumerate(table):
        metrics = {k: float(v) for k, v in row.items() if "/" in k and v not in ("", None)}
        params = {p: row.get(p, fixed.get(p)) for p in spec["parameters"]}
        job, state = row.get("Name", row.get("job", str(i))), row.get("State", row.get("state", "finished"))
        rows.append({"job": job, "state": state, **params, **metrics})
    return rows


def is_seed(name: str) -> bool:
    """Parameters that replicate a setting rather than change it: `seed`, `data.seed`, ..."""
    return name == "seed" or name.endswith(".seed")


def summarise(spec: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Group finished jobs by setting (the varying parameters except seeds); mean, std and best of seeds."""
    done = [r for r in rows if r["state"] == "finished"]
    if not done:
        raise UserError(f"sweep {spec['name']}: no finished jobs to report ({len(rows)} jobs, none has metrics)")
    varying = [p for p in spec["parameters"] if len({str(r[p]) for r in rows}) > 1]
    settings, seeds = [p for p in varying if not is_seed(p)], [p for p in varying if is_seed(p)]
    metric = spec["metric"]["name"]
    if not any(metric in r for r in done):  # e.g. test/error of a run whose data has no test split
        metric = "val/" + metric.split("/", 1)[-1]
    select = "val/" + metric.split("/", 1)[-1]
    select = select if any(select in r for r in done) else None
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in done:
        groups[tuple(str(r[p]) for p in settings)].append(r)
    sign = 1 if spec["metric"]["goal"] == "maximize" else -1
    test = "test/" + metric.split("/", 1)[-1]  # reported for the seed chosen by validation, never chosen by
    test = test if metric.startswith("val/") and any(test in r for r in done) else None
    table = []
    for key, members in groups.items():
        values = [r[metric] for r in members if metric in r]
        best = max(members, key=lambda r: sign * r.get(select, float("nan"))) if select else None
        row = {
            "setting": dict(zip(settings, key)),
            "n": len(values),
            "mean": statistics.fmean(values),
            "std": _std(values),
            "best": best[metric] if best else None,
            "best_seed": _seed_of(best, seeds),
        }
        if test:
            tests = [r[test] for r in members if test in r]
            best_test = best.get(test) if best else None  # a test figure comes with a validation one (best)
            row |= {"test_mean": statistics.fmean(tests), "test_std": _std(tests), "test_best": best_test}
        table.append(row)
    return {
        "settings": settings,
        "seeds": seeds,
        "metric": metric,
        "select": select,
        "test": test,
        "table": table,
        "failed": [r for r in rows if r["state"] != "finished"],
    }


def _std(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def _seed_of(row: dict[str, Any] | None, seeds: list[str]) -> str:
    return ", ".join(f"{s}={row[s]}" for s in seeds) if row else ""


def _fmt(metric: str, value: float | None) -> str:
    if value is None:
        return ""
    return f"{100 * value:.1f}%" if metric.rsplit("/", 1)[-1] in RATES else f"{value:.4g}"


def markdown(spec: dict[str, Any], summary: dict[str, Any]) -> str:
    """`summary.md`: one row per setting, mean ± std over seeds and the best of seeds (rule stated)."""
    m, settings = summary["metric"], summary["settings"]
    best = "highest" if spec["metric"]["goal"] == "maximize" else "lowest"
    rule = (
        f"best of seeds: the seed with the {best} `{summary['select']}` (validation), its `{m}`"
        if summary["select"]
        else "no validation metric to select by"
    )
    head = [*settings, "runs", f"{m} mean ± std", f"{m} best of seeds", "(seed)"]
    t = summary["test"]
    head += [f"{t} mean ± std", f"{t} of that seed"] if t else []
    lines = [
        f"# Sweep `{spec['name']}`",
        "",
        f"Metric `{m}`; {rule}.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for row in summary["table"]:
        cells = [row["setting"][p] for p in settings]
        cells += [
            str(row["n"]),
            f"{_fmt(m, row['mean'])} ± {_fmt(m, row['std'])}",
            _fmt(m, row["best"]),
            row["best_seed"],
        ]
        if t:
            cells += [f"{_fmt(t, row['test_mean'])} ± {_fmt(t, row['test_std'])}", _fmt(t, row["test_best"])]
        lines.append("| " + " | ".join(cells) + " |")
    if summary["failed"]:
        lines += ["", "Not finished: " + ", ".join(f"job {r['job']} ({r['state']})" for r in summary["failed"])]
    return "\n".join(lines) + "\n"


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def figure(summary: dict[str, Any]) -> Any:
    """Lines against a numeric parameter (hops, size, ...) one per other setting, else bars; std as error bars."""
    from attnmem.evaluation import plots  # noqa: PLC0415 - torch and matplotlib only to draw; it sets Agg first

    plt = plots.plt

    settings, m, table = summary["settings"], summary["metric"], summary["table"]
    numeric = next((p for p in settings if all(_number(r["setting"][p]) is not None for r in table)), None)
    fig, ax = plt.subplots(figsize=(6.0, 3.8))
    scale = 100 if m.rsplit("/", 1)[-1] in RATES else 1
    if numeric and len({r["setting"][numeric] for r in table}) > 1:
        lines: dict[str, list] = defaultdict(list)
        for r in table:
            label = ", ".join(f"{p}={r['setting'][p]}" for p in settings if p != numeric) or m
            lines[label].append((_number(r["setting"][numeric]), r["mean"] * scale, r["std"] * scale))
        for label, points in sorted(lines.items()):
            x, y, err = zip(*sorted(points))
            ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=label)
        ax.set_xticks(sorted({p[0] for points in lines.values() for p in points}))
        ax.set_xlabel(numeric)
        ax.legend(fontsize=8)
    else:
        names = [", ".join(r["setting"].values()) or m for r in table]
        ax.bar(range(len(table)), [r["mean"] * scale for r in table], yerr=[r["std"] * scale for r in table], capsize=3)
        ax.set_xticks(range(len(table)), names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(f"{m}{' (%)' if scale == 100 else ''}, mean ± std over seeds")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """`summary.csv`: job, state, parameters, then every metric (columns as in a W&B runs export)."""
    columns = list(dict.fromkeys(k for r in rows for k in r))
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    atomic.write_text(path, buffer.getvalue())


def report(source: Path, sweep_file: Path | None = None) -> Path:
    """Write summary.csv, summary.md and summary.png beside the sweep (or the CSV); print the table."""
    spec, rows = load_rows(source, sweep_file)
    summary = summarise(spec, rows)
    out = source if source.is_dir() else source.parent / source.stem
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "summary.csv", rows)
    text = markdown(spec, summary)
    atomic.write_text(out / "summary.md", text)
    from attnmem.evaluation import plots  # noqa: PLC0415 - as in `figure`

    plots.save(figure(summary), out / "summary.png")
    print(text)
    return out / "summary.md"
