"""Every recipe on generated data (conf/experiment/*.yaml, those reading no data folder) runs one batch, and every
model composes on its natural task with no data folder. The recipes that read the data folder:
`test_recipes_data_folder.py` (a file of its own, so the two run on two workers)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import CONF
from recipe_data import datasets_named, run_one_batch

from attnmem.data.catalog import DATASETS

EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))
MODELS = sorted(p.stem for p in (CONF / "model").glob("*.yaml"))
DATA = Path("/data-folder")  # where paths.data_dir points while the configs are only composed
# the experiments that read the data folder, by the dataset (catalog) that `attnmem-data fetch` places there
NEEDS = {recipe: name for name, d in DATASETS.items() for recipe in d.recipes if not recipe.startswith("data=")}


@pytest.mark.parametrize("model", MODELS)
def test_every_model_trains_on_its_natural_task_with_no_data_folder(compose_cfg, model):
    cfg = compose_cfg(f"model={model}", f"paths.data_dir={DATA}")
    assert datasets_named(cfg, DATA) == set()  # and test_fdr.py runs each model on its natural task


@pytest.mark.parametrize("name", [e for e in EXPERIMENTS if e not in NEEDS])
def test_every_generated_data_experiment_runs_one_batch_with_an_empty_data_folder(compose_cfg, tmp_path, name):
    run_one_batch(compose_cfg, tmp_path / "run", tmp_path / "empty", name)


