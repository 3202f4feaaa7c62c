"""Train a model: `python train.py [model=memn2n] [data=babi_gen] [attention=dot] [key=value ...]`."""

import hydra
from omegaconf import DictConfig

from attnmem.runtime import cli


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    """Hydra entry point of training."""
    return cli.guarded(cfg, "train")


if __name__ == "__main__":
    cli.entry(main)
