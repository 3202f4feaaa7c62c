"""Evaluate a finished run: `python eval.py run_dir=<run> [+data.x=...]` (its best checkpoint) or `ckpt_path=<file>`."""

import hydra
from omegaconf import DictConfig

from attnmem.runtime import cli


@hydra.main(version_base="1.3", config_path="conf", config_name="eval")
def main(cfg: DictConfig) -> dict | None:
    """Hydra entry point of evaluation."""
    return cli.guarded(cfg, "evaluate")


if __name__ == "__main__":
    cli.entry(main)
