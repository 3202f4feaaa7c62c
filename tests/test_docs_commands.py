"""Every command in README.md and docs/ still runs as written.

Commands are the lines of the fenced (```) and indented code blocks that start with `python `, `make `,
`attnmem-train ` or `attnmem-eval `,
joined across a trailing `\\`, with `# comments` and a trailing `&` dropped. The rules for what they hold:
- `python train.py ...` / `python eval.py ...` (and `python -m attnmem.train|eval ...`, `attnmem-train|eval ...`)
  are composed through Hydra's compose API (nothing trains);
  under `-m`, jobs that take every value of every swept key at least once; `--help` and `--cfg job` are dropped.
- A placeholder `<...>` inside a value stands for a value of the user's (`<run>` -> `placeholder`); a bare
  `...` argument stands for more options and is dropped; a value `...` (`data.source.data_dir=...`) is kept.
- `key=a | b | c` lists alternatives: the command is composed once with each.
- A `file://` search path names a folder of the user's: the test writes one with a `model/` and an
  `experiment/` yaml for the names the command uses.
- `python -m attnmem.tools.sweep <sweep> key=value ...` (a packaged sweep's name or path, `memn2n_hops`,
  `sweeps/memn2n_hops.yaml`) runs with `--dry-run` added (every job composed with the command's overrides; the
  files alone are tests/tools/test_sweep_files.py's); `sweeps/X.yaml` stands for any sweep file.
- Any other `python -m <module>` or `python <script>.py` runs with `--help` only (in-process; it must exit 0),
  a `report` subcommand with `report --help`; `python -m pytest` is this suite itself; `make <target>` runs as
  `make -n <target>` (a dry run).
"""

from __future__ import annotations

import importlib
import re
import runpy
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CONF, ROOT
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser

from attnmem.core import packaged
from attnmem.core.errors import UserError

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```")


def documented_commands() -> list[tuple[str, str]]:
    """(file:line, command) of every documented command."""
    found = []
    for doc in DOCS:
        lines, in_fence, pending, start = doc.read_text().splitlines(), False, "", 0
        for number, line in enumerate(lines, 1):
            if FENCE.match(line.strip()):
                in_fence = not in_fence
                continue
            code = line.strip() if in_fence else line[4:] if line.startswith("    ") else None
            if code is None:
                continue
            text = code.strip().removeprefix("$ ")
            if not pending and not text.startswith(("python ", "make ", "attnmem-train ", "attnmem-eval ")):
                continue
            start = start if pending else number
            pending = f"{pending} {text}".strip()
            if pending.endswith("\\"):
                pending = pending[:-1]
                continue
            found.append((f"{doc.relative_to(ROOT)}:{start}", pending))
            pending = ""
    return found


def arguments(command: str) -> list[list[str]]:
    """The command's words, comments and `&` dropped, once per alternative of a `key=a | b` list."""
    words = shlex.split(command, comments=True)
    words = [w for w in words if w not in ("&", "...")]
    while "|" in words:
        bar = words.index("|")
        key = words[bar - 1].partition("=")[0]
        alternatives = [words[bar - 1]]
        while bar < len(words) and words[bar] == "|":
            alternatives.append(f"{key}={words[bar + 1]}")
            del words[bar : bar + 2]
        head = words.index(alternatives[0])
        return [w for alt in alternatives for w in arguments(shlex.join([*words[:head], alt, *words[head + 1 :]]))]
    return [[re.sub(r"<[^>]*>", "placeholder", w) for w in words]]


COMMANDS = [(where, words) for where, command in documented_commands() for words in arguments(command)]


def compose_all(config_name: str, overrides: list[str], tmp_path: Path) -> int:
    """Compose every job of the command (one, or a -m grid); return how many."""
    multirun = "-m" in overrides
    overrides = [o for o in overrides if o not in ("-m", "--help", "--cfg", "job")]
    for i, override in enumerate(overrides):
        if "file://" in override:
            overrides[i] = re.sub(r"file://[^\],]+", f"file://{user_conf(tmp_path, overrides)}", override)
    jobs = grid_cover(overrides) if multirun else [overrides]
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        for job in jobs:
            cfg = compose(config_name, overrides=list(job), return_hydra_config=True)
            assert "trainer" in cfg and (config_name == "eval" or cfg.model._target_)
    GlobalHydra.instance().clear()
    return len(jobs)


def grid_cover(overrides: list[str]) -> list[list[str]]:
    """Jobs of a -m grid that take every value of every swept key at least once (not the whole product)."""
    values = []
    for override in OverridesParser.create().parse_overrides(overrides):
        key = override.get_key_element()
        choices = list(override.sweep_string_iterator()) if override.is_sweep_override() else [override.get_value_element_as_str()]
        values.append([f"{key}={v}" for v in choices])
    return [[options[k % len(options)] for options in values] for k in range(max(map(len, values)))]


def user_conf(tmp_path: Path, overrides: list[str]) -> Path:
    """A search-path folder with the model and experiment yaml files the overrides name."""
    folder = tmp_path / "my_conf"
    for override in overrides:
        group, _, name = override.partition("=")
        if group == "model":
            (folder / "model").mkdir(parents=True, exist_ok=True)
            (folder / "model" / f"{name}.yaml").write_text("defaults:\n  - memn2n\n  - _self_\nhops: 2\n")
        elif group == "experiment":
            (folder / "experiment").mkdir(parents=True, exist_ok=True)
            (folder / "experiment" / f"{name}.yaml").write_text("# @package _global_\nseed: 1\n")
    return folder


def is_sweep(name: str) -> bool:
    """Whether a sweep command's first argument names a sweep file (a path, or a packaged sweep's name)."""
    try:
        return packaged.sweep_file(name).is_file()
    except UserError:
        return False


def run_help(words: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Run a module or script with `--help` (a sweep file with `--dry-run`) in this process."""
    target = words[2] if words[1] == "-m" else words[1]
    rest = words[3:] if words[1] == "-m" else words[2:]
    argv = [target, *(["report"] if rest[:1] == ["report"] else []), "--help"]
    # a sweep file with overrides of the command's own: every job composed (tests/tools/test_sweep_files.py covers the files)
    if target == "attnmem.tools.sweep" and is_sweep(rest[0]) and "--resume" not in rest and "=" in "".join(rest):
        argv = [target, *rest, "--dry-run"]
    monkeypatch.setattr(sys, "argv", argv)
    try:
        if words[1] == "-m":
            importlib.import_module(target).main()
        else:
            runpy.run_path(str(ROOT / target), run_name="__main__")
    except SystemExit as exit_:
        assert exit_.code in (0, None), f"{shlex.join(argv)} exited with {exit_.code}"


def test_the_docs_have_commands() -> None:
    scripts = {words[1] for _, words in COMMANDS}
    assert {"train.py", "eval.py", "-m", "benchmarks/ntm_throughput.py"} <= scripts and len(COMMANDS) > 50
    assert {"attnmem-train", "attnmem-eval"} <= {words[0] for _, words in COMMANDS}


@pytest.mark.parametrize(("where", "words"), COMMANDS, ids=[f"{w} {' '.join(c[1:4])}" for w, c in COMMANDS])
def test_documented_command_runs_as_written(where: str, words: list[str], tmp_path: Path, monkeypatch) -> None:
    if words[0] in ("attnmem-train", "attnmem-eval"):
        assert compose_all(words[0].removeprefix("attnmem-"), words[1:], tmp_path) >= 1, where
    elif words[0] == "make":
        done = subprocess.run(["make", "-n", *words[1:]], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, f"{where}: {done.stderr}"
    elif words[1] in ("train.py", "eval.py"):
        assert compose_all(words[1].removesuffix(".py"), words[2:], tmp_path) >= 1, where
    elif words[1:3] in (["-m", "attnmem.train"], ["-m", "attnmem.eval"]):
        assert compose_all(words[2].removeprefix("attnmem."), words[3:], tmp_path) >= 1, where
    elif words[1:3] != ["-m", "pytest"]:
        run_help(words, monkeypatch)
