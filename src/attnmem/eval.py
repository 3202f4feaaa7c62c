"""Evaluate a finished run: `attnmem-eval run_dir=<run> [+data.x=...]` (its best checkpoint) or `ckpt_path=<file>`
(`python -m attnmem.eval` too); the configs are the package's (`pkg://attnmem.conf`)."""

import hydra
from omegaconf import DictConfig

from attnmem.core.packaged import CONF_PATH
from attnmem.runtime import cli


@hydra.main(version_base="1.3", config_path=CONF_PATH, config_name="eval")
def main(cfg: DictConfig) -> dict | None:
    """Hydra entry point of evaluation."""
    return cli.guarded(cfg, "evaluate")


def run() -> None:
    """Console script `attnmem-eval`: Hydra's config errors as one line."""
    cli.entry(main)


if __name__ == "__main__":
    run()
