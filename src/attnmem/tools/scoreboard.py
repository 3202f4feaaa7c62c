"""The scoreboard: finished paper-protocol sweeps beside the papers' figures, as `docs/scoreboard.md`.

    python -m attnmem.tools.scoreboard [SWEEP_DIR ...] [--out docs/scoreboard.md]

With no directory, each protocol of the packaged `sweeps/paper/` (`--protocols DIR`: another folder) contributes
its newest sweep under `outputs/sweeps/<name>/`; one with no sweep on this machine keeps the table the scoreboard
already had (its runs are where they ran).
A table has a row per task (or setting, or model): ours chosen by the paper's rule (e.g. the seed with the lowest
training error, or the mean of the seeds at the best learning rate), its standard error, mean ± std over seeds, the
paper's figure and the difference, and where the protocol asks the seeds that solve it and more columns; jobs
that did not finish are counted and the table is marked incomplete.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from attnmem.core import atomic, packaged
from attnmem.core.errors import UserError
from attnmem.data.catalog import locate
from attnmem.tools import protocol as protocols
from attnmem.tools.protocol import Protocol
from attnmem.tools.scoreboard_elsewhere import kept_section, not_run, title
from attnmem.tools.scoreboard_rows import Row, build_rows
from attnmem.tools.sweep_report import RATES, load_rows

OUT = Path("docs/scoreboard.md")


@dataclass
class Table:
    """A protocol's table, with what it was made from."""

    protocol: Protocol
    sweep_dir: Path
    command: str
    rows: list[Row]
    finished: int
    jobs: int
    seconds: float | None
    problems: list[str] = field(default_factory=list)
    maximize: bool = True  # the way the sweep's metric improves: `over` takes the best mean that way


def portable(override: str) -> str:
    """An override as anyone can paste it: an absolute path of this machine becomes `<data>/...` when it lies in a
    dataset's folder (`data.source.data_dir=<data>/babi/en`), else a `<name>` placeholder."""
    key, equals, value = override.partition("=")
    if not equals or not value.startswith("/"):
        return override
    found = locate(Path(value))
    if found is not None:
        return f"{key}=<data>/{Path(value).relative_to(found[1].parent).as_posix()}"
    return f"{key}=<{Path(value).name}>"


def build(sweep_dir: Path) -> Table:
    """The table of one finished (or partly finished) protocol sweep."""
    saved_path = sweep_dir / "sweep.yaml"
    if not saved_path.is_file():
        raise UserError(f"{sweep_dir}: no sweep.yaml; not a directory made by python -m attnmem.tools.sweep")
    saved = yaml.safe_load(saved_path.read_text())
    spec, jobs = load_rows(sweep_dir)
    proto = protocols.load(Path(saved["file"]), spec["parameters"])
    if proto is None:
        raise UserError(
            f"{sweep_dir}: made from {saved['file']}, which has no {protocols.sidecar(Path(saved['file']))}"
        )
    problems, usable = [], []
    for job in (j for j in jobs if j["state"] == "finished"):
        missing = [k for k in [*proto.select, *proto.row_keys()] if k not in job]
        if missing:
            problems.append(f"{sweep_dir / job['job'] / 'metrics.json'}: no '{missing[0]}' (a key of {proto.path})")
        else:
            usable.append(job)
    maximize = spec.get("metric", {}).get("goal", "maximize") != "minimize"
    rows = build_rows(proto, saved, usable, sweep_dir, maximize)
    command = " ".join(["python -m attnmem.tools.sweep", saved["file"], *map(portable, saved.get("overrides", []))])
    return Table(proto, sweep_dir, command, rows, len(usable), len(jobs), saved.get("seconds"), problems, maximize)


def _failed(proto: Protocol, value: float) -> bool:
    """Above the protocol's threshold; 5.0% is not above 5% (metrics are logged in float32: 0.05 is 0.0500000007)."""
    return proto.fail_above is not None and round(value, 6) > proto.fail_above


def _pct(value: float | None, digits: int = 1, scale: float = 100) -> str:
    return "" if value is None else f"{scale * value:.{digits}f}"


def _header(table: Table) -> list[str]:
    """The section's title and how its figures were made and chosen."""
    proto, figures = table.protocol, table.protocol.figures
    status = "" if table.finished == table.jobs else f" (incomplete: {table.finished} of {table.jobs} jobs finished)"
    split = proto.metric.split("/")[0]
    where = "validation carved from the training data (the test files are withheld)" if split == "val" else split
    rule = ", then ".join(f"`{key}`" for key in proto.select)
    chosen = f"per row the job lowest in {rule} (the paper's rule; never chosen by validation)" if rule else (
        "per row the mean over seeds (no selection)"
    )
    if proto.over:
        way = "highest" if table.maximize else "lowest"
        chosen += f", at the `{proto.over}` whose mean over seeds is {way} (the papers' rule: best over `{proto.over}`)"
    if proto.solved is not None:
        chosen += f"; solved: the seeds whose `{proto.metric}` is at least {proto.solved}"
    more = _more_headers(proto)
    return [
        f"## {proto.title}{status}",
        "",
        f"Paper: {proto.paper}. Published figures: {figures['source']} ({figures.get('split', 'test')} "
        f"{figures.get('metric', '')}).",
        f"Ours: `{proto.rows.get('metric', proto.metric)}`{' in %' if proto.percent else ''}, {where}; {chosen}.",
        f"Command: `{table.command}`; a row's run: `python train.py` with the sweep's overrides and those in its "
        "*run* column.",
        "",
        "| row | ours (selected) | ± SE | run | ours mean ± std over seeds | seeds | paper | ours − paper |"
        + "".join(f" {h} |" for h in more),
        "|---:|---:|---:|---|---:|---:|---:|---:|" + "---:|" * len(more),
    ]


def _more_headers(proto: Protocol) -> list[str]:
    """The headers of the columns a protocol adds: solved, the means by `over`, its `columns`."""
    solved = [f"solved (≥ {_pct(proto.solved, 0)}%)" if proto.percent else f"solved (≥ {proto.solved})"]
    return [*(solved if proto.solved is not None else []), *([f"mean by `{proto.over}`"] if proto.over else []),
            *proto.columns]


def _more_cells(proto: Protocol, row: Row) -> list[str]:
    """A row's cells under `_more_headers`: rates in the table's unit, counts whole."""
    k, d = 100 if proto.percent else 1, proto.digits
    cells = [f"{row.solved[0]}/{row.solved[1]}" if row.solved else ""] if proto.solved is not None else []
    cells += [" · ".join(f"{v}: {_pct(m, d, k)}" for v, m in row.by_over.items())] if proto.over else []
    for header, metric in proto.columns.items():
        value = row.extra.get(header)
        rate = metric.rsplit("/", 1)[-1] in RATES
        cells.append("" if value is None else _pct(value, d, k) if rate else
                     f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}")
    return cells


def markdown(table: Table) -> str:
    """One protocol's section: how it was made, the table, and its summary lines."""
    proto, rows = table.protocol, table.rows
    done = [r for r in rows if r.ours is not None]
    k, d = 100 if proto.percent else 1, proto.digits
    lines = _header(table)
    for r in rows:
        failed = " ✗" if r.ours is not None and _failed(proto, r.ours) else ""
        spread = f"{_pct(r.mean, d, k)} ± {_pct(r.std, d, k)}" if r.mean is not None else ""
        diff = f"{k * r.ours - r.paper:+.1f}" if r.ours is not None and r.paper is not None else ""
        paper = "" if r.paper is None else f"{r.paper:.1f}"
        seeds = f"{r.seeds}" if r.seeds == r.planned else f"{r.seeds} of {r.planned}"
        lines.append(
            f"| {r.label} | {_pct(r.ours, d, k)}{failed} | {_pct(r.se)} | {r.chosen} | {spread} | {seeds} | "
            f"{paper} | {diff} |" + "".join(f" {c} |" for c in _more_cells(proto, r))
        )
    lines += ["", *_summary(table, done)]
    if table.problems:
        lines += ["", "Left out:", *(f"- {p}" for p in table.problems)]
    return "\n".join(lines) + "\n"


def _summary(table: Table, done: list[Row]) -> list[str]:
    proto, figures = table.protocol, table.protocol.figures
    if not done:
        return ["No row has a finished job yet."]
    k, unit = (100, "%") if proto.percent else (1, "")
    ours_values = [r.ours for r in done if r.ours is not None]  # all of done's: done is the rows with ours
    ours = statistics.fmean(ours_values)
    ses = [r.se for r in done if r.se is not None]
    se = math.sqrt(sum(s * s for s in ses)) / len(ses) if ses else None
    spread = statistics.fmean(r.mean for r in done if r.mean is not None)  # a row with ours has a mean
    paper_rows = [r.paper for r in done if r.paper is not None]
    paper = figures["summary"].get("mean") if len(paper_rows) < len(done) else statistics.fmean(paper_rows)
    n = len(done)
    scope = f"{n} row{'s' if n > 1 else ''}" + ("" if n == len(table.rows) else f" of {len(table.rows)}")
    line = f"- Mean over {scope}: ours **{_pct(ours, scale=k)}{unit}**" + (f" (± {_pct(se)} SE)" if se else "")
    line += f", mean over seeds {_pct(spread, scale=k)}{unit}"
    if paper is not None:
        basis = "the same rows" if len(paper_rows) == n else f"the paper's {figures['summary'].get('over', 'rows')}"
        line += f"; paper {paper:.1f}{unit} ({basis}); difference {k * ours - paper:+.1f}"
    lines = [line] if proto.mean else []  # a mean over a curve's points or over models says nothing
    lines += [f"- Paper: {figures['summary']['text'].strip()}"] if "text" in figures["summary"] else []
    if proto.fail_above is not None:
        ours_failed = sum(_failed(proto, v) for v in ours_values)
        paper_failed = (
            sum(p > 100 * proto.fail_above for p in paper_rows) if paper_rows else figures["summary"].get("failed")
        )
        lines.append(
            f"- Rows above {_pct(proto.fail_above, 0)}% error (failed, as the papers count them): "
            f"ours {ours_failed} of {n}" + ("" if paper_failed is None else f", paper {paper_failed}")
        )
    if proto.capacity is not None:
        paper_capacity = figures["summary"].get("capacity")
        lines.append(
            f"- Capacity, the `{proto.rows['parameter']}` where the mean over seeds falls below {proto.capacity} "
            f"(linear between rows): ours **{capacity(done, proto.capacity)}**"
            + ("" if paper_capacity is None else f", paper {paper_capacity}")
        )
    if table.seconds:
        lines.append(f"- Wall time of the sweep: {table.seconds / 60:.0f} min.")
    if proto.note:
        lines.append(f"- {proto.note.strip()}")
    return lines


def capacity(rows: list[Row], threshold: float) -> str:
    """Where the rows' mean, in the order of their numeric labels, first falls below `threshold`, interpolated."""
    points = sorted((float(r.label), r.mean) for r in rows if r.mean is not None)
    for i, (x, mean) in enumerate(points):
        if mean < threshold:
            if i == 0:
                return f"below {x:g}"
            x0, m0 = points[i - 1]
            return f"{x0 + (x - x0) * (m0 - threshold) / (m0 - mean):.3f}"
    return f"above {points[-1][0]:g}"


def newest_runs(root: Path, log_dir: Path) -> list[tuple[Path, Path | None]]:
    """Every protocol's sweep file under `root` with its newest sweep directory under `log_dir/sweeps/<name>/`
    (None when it has not run)."""
    found = []
    for path in sorted(root.glob("*.protocol.yaml")):
        sweep_file = path.with_name(path.name.replace(".protocol.yaml", ".yaml"))
        if not sweep_file.is_file():
            raise UserError(f"{path}: no sweep file {sweep_file.name} beside it")
        runs = sorted((log_dir / "sweeps" / yaml.safe_load(sweep_file.read_text())["name"]).glob("*/sweep.yaml"))
        found.append((sweep_file, runs[-1].parent if runs else None))
    return found


def write(entries: list[tuple[Path, Path | None]], out: Path) -> str:
    """Build every table and write the scoreboard; return its text.

    A protocol whose sweep is not on this machine keeps its table from the scoreboard at `out` (the run directories
    stay where they ran); one that has no table anywhere gets a section with the paper's figures and its command.
    """
    tables = [build(d) for _, d in entries if d is not None]
    previous = out.read_text() if out.is_file() else ""
    titles = {f: title(f) for f, d in entries if d is None}
    old = {f: kept_section(previous, t) or "" for f, t in titles.items()}
    if not tables and not any(old.values()):
        raise UserError(
            f"no protocol run to put on the scoreboard ({len(entries)} protocols, none has a sweep "
            "directory): run a paper sweep first (python -m attnmem.tools.sweep paper/<name>)"
        )
    head = (
        "# Scoreboard\n\nGenerated by `python -m attnmem.tools.scoreboard` from the run directories; do not "
        "edit by hand.\n✗: a row above the protocol's failure threshold. SE: the binomial standard error of "
        "the selected figure, √(p(1 − p)/n) over its n validation questions.\n"
    )
    built = iter(tables)
    sections = [markdown(next(built)) if d is not None else old[f] for f, d in entries if d is not None or old[f]]
    text = head + "".join("\n" + s for s in sections)
    text += "".join("\n" + not_run(f) for f, d in entries if d is None and not old[f])
    atomic.write_text(out, text)
    for f, section in old.items():
        if section:
            print(f"kept: {titles[f]}: no sweep of {packaged.sweep_label(f)} on this machine, its table is the one "
                  f"{out} had", file=sys.stderr)
    for t in tables:
        for problem in t.problems:
            print(f"warning: {problem}", file=sys.stderr)
    return text


def main(argv: list[str] | None = None) -> None:
    """Command line: write the scoreboard from the given (or the newest) protocol sweeps."""
    parser = argparse.ArgumentParser(prog="python -m attnmem.tools.scoreboard", description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dirs", type=Path, nargs="*", help="sweep directories of sweeps/paper/ files")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--log-dir", type=Path, default=Path("outputs"), help="where sweeps are looked for")
    parser.add_argument("--protocols", type=Path, help="a folder of sweep files and protocols (default: paper/ of "
                        "attnmem's sweeps)")
    args = parser.parse_args(argv)
    try:
        protocols_dir = args.protocols or packaged.sweeps_dir() / "paper"
        entries = [(Path(), d) for d in args.sweep_dirs] or newest_runs(protocols_dir, args.log_dir)
        text = write(entries, args.out)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(1) from None
    print(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
