"""The package as a library user meets it: `dir(attnmem)` holds only its public names, and it ships its type hints."""

from __future__ import annotations

import pytest
from conftest import ROOT

import attnmem


def test_the_package_root_lists_only_its_public_names():
    assert dir(attnmem) == ["__version__", "load_run"]
    assert callable(attnmem.load_run)


def test_the_package_ships_py_typed():
    assert (ROOT / "src" / "attnmem" / "py.typed").is_file()
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["attnmem"]
