"""No tracked file names the workspace's shared folder (only .ci/run may), and no document, config, sweep or
benchmark holds an absolute path of a machine: what the project ships must work on a stranger's clone. Every test
file a tracked file names exists (tests/ mirrors src/: a test that moves takes its mentions with it)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from conftest import ROOT

SHARED = re.compile(r"shared/(data|papers)|\.\./shared")
MACHINE = re.compile(r"(?<![\w.])/(work|home|Users|root|tmp|mnt|scratch)/")  # an absolute path of some machine
SHIPPED = ("README.md", "docs/", "benchmarks/", "src/")  # src/attnmem/conf/, src/attnmem/sweeps/ too
TEST_FILE = re.compile(r"(?<![\w/])tests/[\w/]+\.py\b")


def tracked() -> list[str]:
    """The repository's tracked files (text only)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [n for n in names if not n.endswith((".png", ".ckpt", ".pt"))]


def offending_lines(names: list[str], pattern: re.Pattern[str]) -> list[str]:
    """`file:line: text` of every line that matches."""
    found = []
    for name in names:
        try:
            text = (ROOT / name).read_text()
        except UnicodeDecodeError:
            continue
        found += [f"{name}:{n}: {line.strip()[:120]}" for n, line in enumerate(text.splitlines(), 1)
                  if pattern.search(line)]
    return found


def test_no_tracked_file_but_the_ci_script_names_the_shared_folder():
    names = [n for n in tracked() if not n.startswith(".ci/") and n != "tests/test_tracked_paths.py"]
    assert offending_lines(names, SHARED) == []


def test_no_shipped_file_holds_an_absolute_machine_path():
    names = [n for n in tracked() if n.startswith(SHIPPED)]
    assert offending_lines(names, MACHINE) == []


def test_every_test_file_a_tracked_file_names_exists():
    missing = []
    for name in tracked():
        if name == "CHANGELOG.md":  # the changelog names files as they were
            continue
        try:
            text = (ROOT / name).read_text()
        except UnicodeDecodeError:
            continue
        missing += [f"{name}:{n}: {path}" for n, line in enumerate(text.splitlines(), 1)
                    for path in TEST_FILE.findall(line) if not (ROOT / path).is_file()]
    assert missing == []
