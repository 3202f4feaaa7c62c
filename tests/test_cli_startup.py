"""The command line answers without its heavy imports: `--help`, `--cfg job` and the errors Hydra finds itself
import neither torch, Lightning, W&B nor matplotlib, and neither do an evaluation of a missing run, the tools' `--help`
and a missing sweep file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "lightning", "wandb", "matplotlib")
# runs a script or module as the command line would, then prints the heavy modules it imported
PROBE = """
import runpy, sys
target, sys.argv = sys.argv[1], sys.argv[1:]
try:
    runpy.run_module(target, run_name="__main__", alter_sys=True) if not target.endswith(".py") else \\
        runpy.run_path(target, run_name="__main__")
except SystemExit as done:  # a message instead of a code exits 1, as the interpreter does
    code = 1 if isinstance(done.code, str) else done.code
else:
    code = 0
print("exit", code, "imported", sorted(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)
"""


def probe(*argv: str) -> str:
    """The probe's last line: the command's exit code and the heavy modules it imported."""
    done = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    return done.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["train.py", "--help"], 0),
        (["train.py", "model=ntm", "--cfg", "job"], 0),
        (["train.py", "model=nope"], 1),
        (["train.py", "model.hops=(1"], 1),
        (["eval.py", "--help"], 0),
        (["eval.py", "run_dir=no_such_run"], 1),
        (["attnmem.tools.sweep", "--help"], 0),
        (["attnmem.tools.sweep", "no_such_sweep.yaml"], 1),
        (["attnmem.tools.scoreboard", "--help"], 0),
        (["attnmem.tools.rerun", "--help"], 0),
    ],
)
def test_the_command_line_answers_without_heavy_imports(argv: list[str], code: int) -> None:
    assert probe(*argv) == f"exit {code} imported []"
