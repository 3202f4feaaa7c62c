"""A paper protocol: the sidecar `<sweep>.protocol.yaml` of a sweep file, which says how its runs become a
scoreboard table (rows, our metric, the paper's selection rule) and which published figures go beside them
(an entry of `figures.yaml` in the same folder). The sweep file itself stays a valid W&B sweep."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from attnmem.core.errors import UserError

FIGURES_FILE = "figures.yaml"
REQUIRED = ("title", "paper", "figures", "rows", "metric", "select")
OPTIONAL = ("fail_above", "note", "percent", "digits", "capacity", "mean", "over", "solved", "columns")


@dataclass
class Protocol:
    """What a sidecar says, with its figures entry read."""

    path: Path
    title: str
    paper: str
    metric: str  # ours, e.g. val/error
    select: list[str]  # per row, the job lowest in select[0], ties broken by the next keys; [] the mean of seeds
    # {"parameter": name} or {"parameters": [names]} (a row per combination, labelled "a/b"): the jobs with the
    # row's values; {"metric": "val/task{row}/error", "values": [...]}: a row per metric key of every job
    rows: dict[str, Any]
    figures: dict[str, Any]  # source, split, metric, rows {row: figure}, summary {mean, failed, ...}
    fail_above: float | None = None  # the bAbI criterion: a row above it has failed
    note: str = ""
    percent: bool = True  # the metric is a rate, shown in %, with a binomial standard error
    digits: int = 1  # decimals shown
    capacity: float | None = None  # the summary gives the row value (a number) where the mean falls below this
    mean: bool = True  # the summary's mean over rows (tasks); false where rows are settings or models
    over: str | None = None  # a parameter (optimizer.lr): per row its value with the best mean over seeds is taken
    solved: float | None = None  # a row's seeds (of the chosen `over` value) at or above it are counted as solved
    columns: dict[str, str] = field(default_factory=dict)  # {header: metric key}: more columns, means over seeds

    def row_parameters(self) -> list[str]:
        """The sweep parameters whose values make a row ([] where rows are metric keys)."""
        return list(self.rows.get("parameters", [self.rows["parameter"]] if "parameter" in self.rows else []))

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
    _check(path, raw, parameters, sweep_file)
    select = [raw["select"]] if isinstance(raw["select"], str) else list(raw["select"] or [])
    return Protocol(
        path,
        raw["title"],
        raw["paper"],
        raw["metric"],
        select,
        raw["rows"],
        _figures(path, raw["figures"]),
        raw.get("fail_above"),
        raw.get("note", ""),
        raw.get("percent", True),
        raw.get("digits", 1),
        raw.get("capacity"),
        raw.get("mean", raw.get("capacity") is None),
        raw.get("over"),
        raw.get("solved"),
        dict(raw.get("columns") or {}),
    )


def _check(path: Path, raw: dict[str, Any], parameters: dict[str, Any], sweep_file: Path) -> None:
    """Stop in one line on a `rows`, `capacity`, `over`, `solved` or `columns` that cannot work with the sweep."""
    rows = raw["rows"]
    if not isinstance(rows, dict) or not ({"parameter", "parameters"} & set(rows) or {"metric", "values"} <= set(rows)):
        raise UserError(f"{path}: rows: give parameter: <a sweep parameter>, parameters: [<sweep parameters>], "
                        "or metric: <key with {row}> and values")
    named = [rows["parameter"]] if "parameter" in rows else rows.get("parameters", [])
    if "parameters" in rows and (not isinstance(named, list) or not named):
        raise UserError(f"{path}: rows.parameters: expected a list of sweep parameters, e.g. [experiment, seed]")
    for name in [*named, *([raw["over"]] if raw.get("over") is not None else [])]:
        if name not in parameters:
            key = "over" if name == raw.get("over") else "rows.parameter" + ("s" if "parameters" in rows else "")
            raise UserError(f"{path}: {key}: '{name}' is not a parameter of {sweep_file}")
    if raw.get("over") in named:
        raise UserError(f"{path}: over: '{raw['over']}' is also a row parameter; take it out of rows to pick its best")
    if raw.get("capacity") is not None and "parameter" not in rows:
        raise UserError(f"{path}: capacity: needs rows.parameter, a sweep parameter whose values are numbers")
    solved = raw.get("solved")
    if solved is not None and (isinstance(solved, bool) or not isinstance(solved, (int, float))):
        raise UserError(f"{path}: solved: expected a number, the metric's threshold a solving seed reaches "
                        f"(e.g. 0.99), got {solved!r}")
    columns = raw.get("columns")
    if columns is not None and not (isinstance(columns, dict) and all(isinstance(v, str) for v in columns.values())):
        raise UserError(f"{path}: columns: expected a mapping of header to metric key, e.g. {{steps: global_step}}")


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
