"""The scoreboard's sections of protocols with no sweep on this machine: the table it already had, or what the
paper reports and the command that runs it."""

from __future__ import annotations

from pathlib import Path

import yaml

from attnmem.core import packaged
from attnmem.core.errors import UserError
from attnmem.tools import protocol as protocols
from attnmem.tools.protocol import Protocol

NOT_RUN = " (not run on this machine yet)"


def protocol(sweep_file: Path) -> Protocol:
    """The protocol of a sweep file of sweeps/paper/."""
    proto = protocols.load(sweep_file, yaml.safe_load(sweep_file.read_text())["parameters"])
    if proto is None:  # the scoreboard lists the sweep files that have one
        raise UserError(f"{sweep_file}: no {protocols.sidecar(sweep_file)}")
    return proto


def title(sweep_file: Path) -> str:
    """The title of its scoreboard section."""
    return protocol(sweep_file).title


def not_run(sweep_file: Path) -> str:
    """The section of a protocol with no run yet: what it compares with, and the command that runs it."""
    proto = protocol(sweep_file)
    lines = [
        f"## {proto.title}{NOT_RUN}",
        "",
        f"Paper: {proto.paper}. Published figures: {proto.figures['source']}.",
        f"Command: `python -m attnmem.tools.sweep {packaged.sweep_label(sweep_file)}` (the comments of the file "
        "give its data options).",
    ]
    figures = {**proto.figures["rows"], **{k: v for k, v in proto.figures["summary"].items() if k != "over"}}
    if figures:
        lines.append(
            f"The paper's figures ({proto.figures.get('metric', '')}): "
            + "; ".join(f"{k}: {v}" for k, v in figures.items())
            + "."
        )
    return "\n".join([*lines, *([f"{proto.note.strip()}"] if proto.note else [])]) + "\n"


def kept_section(old: str, title: str) -> str | None:
    """The table titled `title` (complete or not) in the scoreboard text `old`, if it has one."""
    for section in ("\n" + old).split("\n## ")[1:]:
        line = section.split("\n", 1)[0]
        if (line == title or line.startswith(f"{title} (")) and not line.endswith(NOT_RUN):
            return "## " + section.rstrip("\n") + "\n"
    return None
