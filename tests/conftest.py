"""Shared fixtures: configs composed in-process through Hydra's compose API (no subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf, open_dict

from attnmem.blocks import selective_scan

ROOT = Path(__file__).resolve().parents[1]
# the packaged configs and sweep files (attnmem/conf: `pkg://attnmem.conf`; attnmem/sweeps)
CONF = ROOT / "src" / "attnmem" / "conf"
SWEEPS = ROOT / "src" / "attnmem" / "sweeps"
# Real data files reach only the tests that opt in through this (ATTNMEM_DATA_DIR, which .ci/run sets when it has
# them); every other test, and every process a test starts, sees an empty data folder of the test session's.
REAL_DATA = Path(os.environ["ATTNMEM_DATA_DIR"]) if os.environ.get("ATTNMEM_DATA_DIR") else None

torch.set_num_threads(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the tests marked `gpu` on a machine without a CUDA GPU."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _cache_and_data_in_temp_folders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """attnmem's cache ($ATTNMEM_CACHE) and data folder ($ATTNMEM_DATA_DIR) in folders of this test session, never
    the user's ~/.cache or data: no test reads real data or downloads into it by accident."""
    previous = {name: os.environ.get(name) for name in ("ATTNMEM_CACHE", "ATTNMEM_DATA_DIR")}
    os.environ["ATTNMEM_CACHE"] = str(tmp_path_factory.mktemp("attnmem_cache"))
    os.environ["ATTNMEM_DATA_DIR"] = str(tmp_path_factory.mktemp("attnmem_data"))
    yield
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


# tiny, fast settings for tests that train: no progress bar, no early stop, csv logger only
FAST = [
    "trainer.enable_progress_bar=false",
    "~callbacks.early_stopping",
]


def compose_into(out: Path, *overrides: str, config_name: str = "train") -> DictConfig:
    """Compose `config_name` with overrides, its run directory `out` (config saved there), as Hydra's command
    line would; Hydra must be initialised."""
    cfg = compose(config_name, overrides=list(overrides), return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(out)
        cfg.hydra.job.num = 0
    HydraConfig.instance().set_config(cfg)
    out.mkdir(parents=True, exist_ok=True)
    (out / ".hydra").mkdir(exist_ok=True)
    job_cfg = cfg.copy()
    with open_dict(job_cfg):
        del job_cfg["hydra"]
    OmegaConf.save(job_cfg, out / ".hydra" / "config.yaml")
    return job_cfg


def train_once(tmp_path_factory: pytest.TempPathFactory, name: str, *overrides: str) -> Path:
    """Train `train.yaml` with overrides into a fresh run directory (for a module-scoped fixture); its path."""
    from attnmem.runtime import run  # torch and Lightning, for the tests that train

    out = tmp_path_factory.mktemp(name) / "run"
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        run.train(compose_into(out, *overrides))
    GlobalHydra.instance().clear()
    return out


@pytest.fixture
def compose_cfg(tmp_path: Path) -> Iterator[Callable[..., DictConfig]]:
    """Compose `train.yaml` with overrides, its run directory in tmp_path; Hydra stays initialised."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):

        def _compose(*overrides: str, config_name: str = "train", run_dir: Path | None = None) -> DictConfig:
            return compose_into(run_dir or tmp_path / "run", *overrides, config_name=config_name)

        yield _compose
    GlobalHydra.instance().clear()


def one_line(message: str, *fragments: str) -> None:
    """`message` is one line holding every fragment."""
    assert "\n" not in message.strip(), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def cli_error(tmp_path: Path, *overrides: str) -> str:
    """Run train.py; it must fail with exit code 1 and one `error:` line, no traceback; return that line."""
    done = subprocess.run(
        [
            sys.executable,
            "train.py",
            *overrides,
            f"hydra.run.dir={tmp_path / 'cli'}",
            "trainer.enable_progress_bar=false",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, done.stderr[-2000:]
    assert not (tmp_path / "cli" / "metrics.json").exists()
    return errors[0]


@pytest.fixture
def chunk_numbers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int | None:
    """`blocks.selective_scan.CHUNK_NUMBERS` set to the test's parameter (indirect; None: the default) for the test."""
    if request.param is not None:
        monkeypatch.setattr(selective_scan, "CHUNK_NUMBERS", request.param)
    return request.param
