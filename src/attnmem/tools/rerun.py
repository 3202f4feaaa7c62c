"""Repeat a finished run: `python -m attnmem.tools.rerun <run_dir> [key=value ...]` (a new run directory).

The command comes from the run's manifest (the overrides of its `.hydra/overrides.yaml`) and is composed
again from the packaged configs like `attnmem-train <overrides>`; `--config-dir <run>/.hydra` alone would lose the
`hydra:` section. Resuming overrides (`resume=`, `ckpt_path=`) are dropped: the repeat trains from the
start, which ends where the resumed run ended (random states travel in checkpoints).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from attnmem.core import packaged
from attnmem.core.errors import UserError
from attnmem.runtime import manifest
from attnmem.tools.sweep import CONFIG_NAME, train_job

DROPPED = ("resume=", "ckpt_path=")


def overrides_of(run_dir: Path) -> list[str]:
    """The overrides that made a run, from its manifest (or `.hydra/overrides.yaml`), resuming ones left out."""
    if (run_dir / "manifest.json").is_file():
        found = manifest.read(run_dir)["command"]["overrides"]
    elif (run_dir / ".hydra" / "overrides.yaml").is_file():
        found = list(OmegaConf.load(run_dir / ".hydra" / "overrides.yaml"))
    else:
        raise UserError(f"{run_dir}: no manifest.json or .hydra/overrides.yaml; is it a run directory of train.py?")
    return [o for o in found if not o.lstrip("+~").startswith(DROPPED)]


def rerun(run_dir: Path, extra: list[str] | None = None, conf_dir: Path | None = None) -> Any:
    """Train again with the run's overrides (plus `extra`), as `attnmem-train` would; return its result."""
    overrides = overrides_of(run_dir) + list(extra or [])
    conf_dir = (conf_dir or packaged.conf_dir()).resolve()
    if not (conf_dir / f"{CONFIG_NAME}.yaml").is_file():
        raise UserError(f"{conf_dir}: no {CONFIG_NAME}.yaml there; pass a config folder with {CONFIG_NAME}.yaml")
    commit = manifest.read(run_dir)["git"]["commit"] if (run_dir / "manifest.json").is_file() else None
    if commit and commit != manifest.git_state(Path.cwd())["commit"]:
        print(f"note: {run_dir} was made at commit {commit[:10]}; this checkout differs", file=sys.stderr)
    print("attnmem-train " + " ".join(overrides))
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3", job_name="train"):
        hydra = GlobalHydra.instance().hydra
        assert hydra is not None  # initialize_config_dir set it
        return hydra.run(CONFIG_NAME, train_job, overrides).return_value


def main(argv: list[str] | None = None) -> None:
    """Command line: `python -m attnmem.tools.rerun <run_dir> [key=value ...]`."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.splitlines()[0])
        raise SystemExit(0 if args else 2)
    try:
        rerun(Path(args[0]), args[1:])
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
