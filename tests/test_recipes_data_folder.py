"""Every recipe (conf/experiment/*.yaml) runs one batch on tiny files in the formats it reads, the paper-size ones at
their sizes; on an empty data folder each either runs or stops in one line naming the `attnmem-data fetch` command."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import CONF
from hydra.utils import instantiate
from recipe_data import run_one_batch, write_data_folder

from attnmem.core.errors import UserError
from attnmem.data.catalog import DATASETS

# the experiments that read the data folder, by the dataset (catalog) that `attnmem-data fetch` places there
NEEDS = {recipe: name for name, d in DATASETS.items() for recipe in d.recipes if not recipe.startswith("data=")}
assert set(NEEDS) <= {p.stem for p in (CONF / "experiment").glob("*.yaml")}


@pytest.fixture(scope="module")
def data_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_data_folder(tmp_path_factory.mktemp("data"))


@pytest.mark.parametrize("name", sorted(NEEDS))
def test_every_data_folder_experiment_runs_one_batch_on_the_fixture_data(compose_cfg, tmp_path, data_folder, name):
    run_one_batch(compose_cfg, tmp_path / "run", data_folder, name)


@pytest.mark.parametrize("name", sorted(NEEDS))
def test_on_an_empty_data_folder_an_experiment_names_its_fetch_command(compose_cfg, tmp_path, monkeypatch, name):
    monkeypatch.setenv("ATTNMEM_DATA_DIR", str(tmp_path / "data"))  # the default data folder, as a user has it
    cfg = compose_cfg(f"experiment={name}")
    datamodule = instantiate(cfg.data)
    with pytest.raises(UserError) as caught:
        datamodule.prepare_data()
    message = str(caught.value)
    assert "\n" not in message and str(tmp_path / "data") in message, message
    names = " ".join(n for n, d in DATASETS.items() if name in d.recipes)
    assert f"run `attnmem-data fetch {names}` (or set data.source.download=true)" in message, message
