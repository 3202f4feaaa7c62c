"""A paper protocol: the sidecar `<sweep>.protocol.yaml` of a sweep file, which says how its runs become a
scoreboard table (rows, our metric, the paper's selection rule) and which published figures go beside them
(an entry of `figures.yaml` in the same folder). The sweep file itself stays a valid W&B sweep."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from attnmem.core.errors import UserError

FIGURES_FILE = "figures.yaml"
REQUIRED = ("title", "paper", "figures", "rows", "metric", "select")
OPTIONAL = ("fail_above", "note", "percent", "digits", "capacity", "mean")


@dataclass
class Protocol:
    """What a sidecar says, with its figures entry read."""

    path: Path
    title: str
    paper: str
    metric: str  # ours, e.g. val/error
    select: list[str]  # per row, the job lowest in select[0], ties broken by the next keys; [] the mean of seeds
    rows: dict[str, Any]  # {"parameter": name}: a job per row; {"metric": "val/task{row}/error", "values": [...]}
    figures: dict[str, Any]  # source, split, metric, rows {row: figure}, summary {mean, failed, ...}
    fail_above: float | None = None  # the bAbI criterion: a row above it has failed
    note: str = ""
    percent: bool = True  # the metric is a rate, shown in %, with a binomial standard error
    digits: int = 1  # decimals shown
    capacity: float | None = None  # the summary gives the row value (a number) where the mean falls below this
    mean: bool = True  # the summary's mean over rows (tasks); false where rows are settings or models

    def row_keys(self) -> list[str]:
        """The metric keys a job must have: every row's for rows read from metrics, else `metric`."""
        if "metric" in self.rows:
            return [self.rows["metric"].format(row=r) for r in self.rows["values"]]
        return [self.metric]


def sidecar(sweep_file: Path) -> Path:
    """`sweeps/paper/x.yaml` -> `sweeps/paper/x.protocol.yaml`."""
    return sweep_file.with_name(f"{sweep_file.stem}.protocol.yaml")


def load(sweep_file: Path, parameters: dict[str, Any]) -> Protocol | None:
    """The protocol beside a sweep file (None when it has none), checked against the sweep's `parameters`."""
    path = sidecar(sweep_file)
    if not path.is_file():
        return None
    raw = _yaml(path)
    if not isinstance(raw, dict):
        raise UserError(f"{path}: a protocol file is a mapping of {', '.join(REQUIRED)}")
    unknown = sorted(set(raw) - set(REQUIRED) - set(OPTIONAL))
    missing = [k for k in REQUIRED if k not in raw]
    if unknown or missing:
        what = f"unknown key '{unknown[0]}'" if unknown else f"'{missing[0]}' is missing"
        raise UserError(f"{path}: {what} (a protocol has {', '.join(REQUIRED)}; optional {', '.join(OPTIONAL)})")
    rows = raw["rows"]
    if rows.get("parameter") is not None and rows["parameter"] not in parameters:
        raise UserError(f"{path}: rows.parameter: '{rows['parameter']}' is not a parameter of {sweep_file}")
    if "parameter" not in rows and not ("metric" in rows and "values" in rows):
        raise UserError(f"{path}: rows: give parameter: <a sweep parameter>, or metric: <key with {{row}}> and values")
    select = [raw["select"]] if isinstance(raw["select"], str) else list(raw["select"] or [])
    if raw.get("capacity") is not None and "parameter" not in rows:
        raise UserError(f"{path}: capacity: needs rows.parameter, a sweep parameter whose values are numbers")
    return Protocol(
        path,
        raw["title"],
        raw["paper"],
        raw["metric"],
        select,
        rows,
        _figures(path, raw["figures"]),
        raw.get("fail_above"),
        raw.get("note", ""),
        raw.get("percent", True),
        raw.get("digits", 1),
        raw.get("capacity"),
        raw.get("mean", raw.get("capacity") is None),
    )


def _figures(path: Path, key: str) -> dict[str, Any]:
    """The published figures named by `key` in figures.yaml beside the protocol."""
    file = path.with_name(FIGURES_FILE)
    if not file.is_file():
        raise UserError(f"{path}: figures: no {FIGURES_FILE} beside it to hold '{key}'")
    entries = _yaml(file)
    if key not in entries:
        raise UserError(f"{path}: figures: '{key}' is not an entry of {file} (it has {', '.join(entries)})")
    entry = entries[key]
    if "source" not in entry:
        raise UserError(f"{file}: {key}: no source: every published figure says where it was read")
    return {"rows": {}, "summary": {}} | entry


def _yaml(path: Path) -> Any:
    """The file's YAML; a syntax error stops in one line naming the file and line."""
    try:
        return yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(err, "problem", None) or "not valid YAML"
        raise UserError(f"{where}: {problem} (quote a value that holds ': ')") from None
