"""The package as a library user meets it: `dir(attnmem)` holds only its public names, and it ships its type hints."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import CONF, ROOT, SWEEPS
from hydra.utils import get_method

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


def test_the_wheel_carries_every_config_and_sweep_file():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["attnmem"]
    assert {"py.typed", "conf/**/*.yaml", "sweeps/**/*.yaml"} <= set(globs)
    for folder in (CONF, SWEEPS):
        others = [p for p in folder.rglob("*") if p.is_file() and p.suffix != ".yaml" and p.name != "__init__.py"
                  and "__pycache__" not in p.parts]
        assert others == [], f"{others}: not .yaml, so not in the wheel; add their pattern to package-data"


def test_the_core_install_is_torch_and_numpy_and_the_command_line_an_extra():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert sorted(d.split(">")[0] for d in project["dependencies"]) == ["numpy", "torch"]
    extras = project["optional-dependencies"]
    assert {"train", "wandb", "tensorboard", "sweeps", "vision", "dev"} <= set(extras)
    assert any(d.startswith("lightning") for d in extras["train"]) and any("hydra-core" in d for d in extras["train"])
    assert extras["dev"][0] == "attnmem[train,wandb,tensorboard,sweeps,vision]"
    for name in ("attnmem-train", "attnmem-eval", "attnmem-sweep", "attnmem-compat", "attnmem-rerun"):
        assert callable(get_method(project["scripts"][name].replace(":", ".")))
