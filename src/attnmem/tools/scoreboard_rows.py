"""The rows of a scoreboard table: a protocol's finished jobs grouped per row (a parameter's value, a combination of
parameters', or a metric key), the best value of its `over` parameter by the mean over seeds (the papers' "best over
learning rates"), ours by its selection rule, the spread over seeds, the seeds that solve it and its extra columns."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from attnmem.core.integrity import read_json
from attnmem.replicas.sweep import seeds_in
from attnmem.tools.protocol import Protocol


@dataclass
class Row:
    """One row of a table: our selected figure and its spread, and the paper's."""

    label: str
    seeds: int  # finished jobs that gave this row a value
    planned: int  # jobs the sweep planned for it
    ours: float | None = None
    chosen: str = ""  # the selected job's overrides that differ between jobs (e.g. seed=4)
    se: float | None = None  # binomial standard error of `ours` (a rate over `examples` questions)
    mean: float | None = None
    std: float | None = None
    paper: float | None = None  # in the paper's unit (%)
    solved: tuple[int, int] | None = None  # (seeds at or above the protocol's `solved`, seeds)
    by_over: dict[str, float] = field(default_factory=dict)  # the mean over seeds of each value of `over`
    extra: dict[str, float | None] = field(default_factory=dict)  # the protocol's `columns`: means over seeds


def label(value: Any) -> str:
    """`[3]` -> `3`; any other parameter value as written."""
    parsed = yaml.safe_load(str(value))
    return str(parsed[0]) if isinstance(parsed, list) and len(parsed) == 1 else str(value)


def figure_key(text: str) -> Any:
    """A row label as the figures file keys it (task numbers are integers there)."""
    return int(text) if text.isdigit() else text


def _examples(job_dir: Path, split: str) -> int | None:
    path = job_dir / "manifest.json"
    if not path.is_file():
        return None
    return read_json(path, "restore it from a copy of the run").get("examples", {}).get(split)


def _value(overrides: list[str], name: str) -> str:
    return next((o.split("=", 1)[1] for o in overrides if o.startswith(f"{name}=")), "")


def _differing(saved: dict[str, Any], job: dict[str, Any], own: list[str]) -> str:
    """The selected job's overrides that differ between the sweep's jobs (its seed, ...), the row's own left out."""
    overrides = saved["jobs"][int(job["job"])]
    common = set.intersection(*(set(j) for j in saved["jobs"]))
    if "replica" in job:  # one replica of a replicas=R job: its own seed, as its own job would show
        overrides = [f"seed={job['seed']}" if o.startswith("seed=") else o for o in overrides
                     if not o.startswith(("replicas=", "replica_select="))]
        common = {o for o in common if not o.startswith("seed=")}
    return " ".join(o for o in overrides if o not in common and not o.startswith(tuple(f"{p}=" for p in own)))


def _order(value: str) -> tuple[int, float, str]:
    """Numbers in numeric order, then the rest as written."""
    try:
        return (0, float(value), value)
    except ValueError:
        return (1, 0.0, value)


def _groups(proto: Protocol, saved: dict[str, Any], jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per row label: {over value: planned seeds} and the (job, value) pairs of its finished jobs."""
    names, over = proto.row_parameters(), proto.over
    planned: dict[str, dict[str, int]] = {}
    if names:
        for overrides in saved["jobs"]:
            key = "/".join(label(_value(overrides, n)) for n in names)
            cell = planned.setdefault(key, {})
            value = label(_value(overrides, over)) if over else ""
            cell[value] = cell.get(value, 0) + seeds_in(overrides)
        members = {key: [(j, j[proto.metric]) for j in jobs if "/".join(label(j[n]) for n in names) == key]
                   for key in planned}
    else:
        labels = [str(v) for v in proto.rows["values"]]
        every: dict[str, int] = {}
        for overrides in saved["jobs"]:
            value = label(_value(overrides, over)) if over else ""
            every[value] = every.get(value, 0) + seeds_in(overrides)
        planned = {key: every for key in labels}
        members = {key: [(j, j[proto.rows["metric"].format(row=key)]) for j in jobs] for key in labels}
    return {key: (planned[key], members[key]) for key in planned}


def build_rows(proto: Protocol, saved: dict[str, Any], jobs: list[dict[str, Any]], sweep_dir: Path,
               maximize: bool = True) -> list[Row]:
    """The table's rows from the usable finished jobs; `maximize`: the way `over`'s best mean goes."""
    split = proto.metric.split("/", 1)[0]
    per_row_examples = 1 if proto.row_parameters() else len(proto.rows["values"])  # one model's questions over rows
    rows = []
    for key, (planned, members) in _groups(proto, saved, jobs).items():
        row = Row(key, len(members), sum(planned.values()), paper=proto.figures["rows"].get(figure_key(key)))
        if proto.over and members:
            by_value: dict[str, list[tuple[dict[str, Any], float]]] = {}
            for m in members:
                by_value.setdefault(label(m[0][proto.over]), []).append(m)
            row.by_over = {v: statistics.fmean(x for _, x in by_value[v]) for v in sorted(by_value, key=_order)}
            best = (max if maximize else min)(row.by_over, key=lambda v: row.by_over[v])
            members, row.seeds, row.planned = by_value[best], len(by_value[best]), planned.get(best, 0)
        if members:
            values = [v for _, v in members]
            row.mean, row.std = statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0
            if not proto.select:  # no selection rule: ours is the mean over seeds
                at = f" at {proto.over}={label(members[0][0][proto.over])}" if proto.over else ""
                row.ours, row.chosen = row.mean, f"mean of seeds{at}"
            else:
                job, value = min(members, key=lambda m: tuple(m[0][k] for k in proto.select) + (int(m[0]["job"]),))
                n = _examples(sweep_dir / job["job"], split)
                row.ours, row.chosen = value, _differing(saved, job, proto.row_parameters())
                row.se = math.sqrt(value * (1 - value) / (n / per_row_examples)) if n and proto.percent else None
            if proto.solved is not None:  # float32 logs 0.99 as 0.9900000095: compared at 6 decimals
                row.solved = (sum(round(v, 6) >= proto.solved for v in values), len(values))
            for header, metric in proto.columns.items():
                found = [j[metric] for j, _ in members if metric in j]
                row.extra[header] = statistics.fmean(found) if found else None
        rows.append(row)
    return rows
