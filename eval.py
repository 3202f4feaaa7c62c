"""Evaluate a run's checkpoint: `python eval.py ckpt_path=<run>/checkpoints/last.ckpt [data.x=...]`."""

import hydra
from omegaconf import DictConfig

from attnmem.runtime import cli


@hydra.main(version_base="1.3", config_path="conf", config_name="eval")
def main(cfg: DictConfig) -> dict | None:
    """Hydra entry point of evaluation."""
    return cli.guarded(cfg, "evaluate")


if __name__ == "__main__":
    cli.entry(main)
