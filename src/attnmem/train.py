"""Train a model: `attnmem-train [model=memn2n] [data=babi_gen] [key=value ...]` (`python -m attnmem.train` too).

The configs are the package's (`pkg://attnmem.conf`); add a folder of your own with
`'hydra.searchpath=[file://my_conf]'`. Run directories go under `outputs/` in the working directory.
"""

import hydra
from omegaconf import DictConfig

from attnmem.core.packaged import CONF_PATH
from attnmem.runtime import cli


@hydra.main(version_base="1.3", config_path=CONF_PATH, config_name="train")
def main(cfg: DictConfig) -> float | None:
    """Hydra entry point of training."""
    return cli.guarded(cfg, "train")


def run() -> None:
    """Console script `attnmem-train`: Hydra's config errors as one line."""
    cli.entry(main)


if __name__ == "__main__":
    run()
