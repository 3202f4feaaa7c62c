"""The package as a library user meets it: `dir(attnmem)` holds only its public names, and it ships its type hints."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

import attnmem


def test_the_package_root_lists_only_its_public_names():
    assert dir(attnmem) == ["__version__", "load_model", "load_run"]
    assert callable(attnmem.load_run) and callable(attnmem.load_model)


def test_the_package_ships_py_typed():
    assert (ROOT / "src" / "attnmem" / "py.typed").is_file()
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["attnmem"]


def test_the_public_layers_import_in_a_clean_process_without_the_training_stack():
    code = (
        "import sys; import attnmem.nn as nn; from attnmem.nn import *\n"
        "missing = [n for n in nn.__all__ if not hasattr(nn, n)]\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'lightning', 'pytorch_lightning', 'hydra', "
        "'omegaconf', 'wandb', 'torchmetrics', 'matplotlib', 'rich'})\n"
        "print(missing, heavy, sorted(dir(nn)) == sorted(nn.__all__))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] [] True"
