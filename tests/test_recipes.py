"""Every recipe (conf/experiment/*.yaml) runs one batch on tiny files in the formats it reads, the paper-size ones at
their sizes; on an empty data folder each either runs or stops in one line naming the `attnmem-data fetch` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import CONF
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from recipe_data import write_data_folder

from attnmem.core.errors import UserError
from attnmem.data.catalog import DATASETS
from attnmem.runtime import run

EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))
MODELS = sorted(p.stem for p in (CONF / "model").glob("*.yaml"))
DATA = Path("/data-folder")  # where paths.data_dir points while the configs are only composed
# the experiments that read the data folder, by the dataset (catalog) that `attnmem-data fetch` places there
NEEDS = {recipe: name for name, d in DATASETS.items() for recipe in d.recipes if not recipe.startswith("data=")}


@pytest.fixture(scope="module")
def data_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_data_folder(tmp_path_factory.mktemp("data"))


def datasets_named(cfg: DictConfig, root: Path) -> set[str]:
    """The folders of the data folder `root` (their first path part) that the composed config's data options name."""
    found, stack = set(), [OmegaConf.to_container(cfg.data, resolve=True)]
    while stack:
        node = stack.pop()
        if isinstance(node, dict | list):
            stack.extend(node.values() if isinstance(node, dict) else node)
        elif isinstance(node, str) and node.startswith(f"{root}/"):
            found.add(Path(node).relative_to(root).parts[0])
    return found


@pytest.mark.parametrize("model", MODELS)
def test_every_model_trains_on_its_natural_task_with_no_data_folder(compose_cfg, model):
    cfg = compose_cfg(f"model={model}", f"paths.data_dir={DATA}")
    assert datasets_named(cfg, DATA) == set()  # and test_fdr.py runs each model on its natural task


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_runs_one_batch_on_the_fixture_data(compose_cfg, tmp_path, data_folder, name):
    cfg = compose_cfg(f"experiment={name}", "debug=fdr", "trainer.enable_progress_bar=false",
                      "callbacks.plots.num_examples=1", f"paths.data_dir={data_folder}", "threads=1")
    # what it reads of the data folder is what `attnmem-data list` says it needs
    assert datasets_named(cfg, data_folder) == {d.folder for d in DATASETS.values() if name in d.recipes}
    run.train(cfg)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["global_step"] == 1
    assert any(k.startswith("val/") for k in metrics), metrics


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
