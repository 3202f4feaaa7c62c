"""Run directories of attnmem 0.1, made before the layered layout of 0.2: refused in one line, never half-loaded.

Their `.hydra/config.yaml` names classes by the old module paths (`attnmem.data.babi_gen.BabiGenDataModule`)
and their checkpoints keep the datamodule's vocabularies under the old class name, so loading one would
either fail deep inside Hydra or, worse, resume with a fresh vocabulary. docs/architecture.md lists the renames.

Runs of 0.2 whose model moved behind a training adapter in 0.3 (`MOVED`: `attnmem.models.ntm.NTM`, now a tensor
model, is trained as `attnmem.tasks.sequence_nets.NTMSequence`) still load, for one release, with a
DeprecationWarning: their config's target is read as the new one, and their weights load into the adapter
(`tasks/adapters.nest_old_keys`).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from hydra.errors import InstantiationException
from hydra.utils import get_class
from omegaconf import DictConfig, ListConfig, OmegaConf

from attnmem.core.errors import UserError
from attnmem.core.integrity import read_json

# the datamodules of 0.1 that 0.2 replaced: a checkpoint keeps its datamodule's state under the class name
RENAMED_DATAMODULES = (
    "BabiDataModule", "BabiGenDataModule", "SquadDataModule", "SpanGenDataModule", "GeneratedDataModule",
    "ParallelTextDataModule",
)
# model targets of runs made before 0.3 -> the training adapters that replaced them in the model yamls
MOVED = {
    "attnmem.models.ntm.NTM": "attnmem.tasks.sequence_nets.NTMSequence",
    "attnmem.models.dnc.DNC": "attnmem.tasks.sequence_nets.DNCSequence",
    "attnmem.models.memn2n.MemN2N": "attnmem.tasks.qa_nets.MemN2NQA",
}
HINT = (
    "it was made by attnmem 0.1, before the module layout of 0.2 (docs/architecture.md lists the renames): "
    "evaluate or resume it with attnmem 0.1 (git checkout f1db268), or train it again"
)


def _targets(node: Any) -> Iterator[str]:
    """Every `_target_` string in a plain (unresolved) config container, depth first."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "_target_" and isinstance(value, str):
                yield value
            else:
                yield from _targets(value)
    elif isinstance(node, list):
        for item in node:
            yield from _targets(item)


def check_config(cfg: DictConfig, run_dir: Path) -> None:
    """Stop with one line when a run's config names a class this version does not have."""
    for target in _targets(OmegaConf.to_container(cfg, resolve=False)):
        if not target.startswith("attnmem."):
            continue
        try:
            get_class(target)
        except (ImportError, AttributeError, InstantiationException, ValueError):
            raise UserError(f"{run_dir}: its config names {target}, which no longer exists: {HINT}") from None


def check_manifest(run_dir: Path) -> None:
    """Stop with one line when a run directory's manifest says an attnmem before 0.2 made it."""
    path = run_dir / "manifest.json"
    recorded = read_json(path, "restore it from a copy of the run, or delete it") if path.is_file() else {}
    packages = recorded.get("packages")
    version = packages.get("attnmem") if isinstance(packages, dict) else None
    if isinstance(version, str) and version and tuple(int(p) for p in re.findall(r"\d+", version)[:2]) < (0, 2):
        raise UserError(f"{run_dir}: its manifest.json says attnmem {version}: {HINT}")


def check_checkpoint(state: dict[str, Any], path: Path) -> None:
    """Stop with one line when a checkpoint keeps its data's vocabularies under a datamodule class 0.2 replaced."""
    old = next((k for k in state if k in RENAMED_DATAMODULES), None)
    if old is not None:
        raise UserError(f"{path}: its data state belongs to {old}, a datamodule that no longer exists: {HINT}")


def moved_target(target: Any, run_dir: Path) -> Any:
    """The target a run's config names, or what replaced it (`MOVED`), with a DeprecationWarning naming it."""
    if target not in MOVED:
        return target
    warnings.warn(f"{run_dir}: its config names the model {target}, which training now builds as {MOVED[target]} "
                  f"({target} takes tensors); such runs load until attnmem 0.4", DeprecationWarning, stacklevel=3)
    return MOVED[target]


def apply_moved(cfg: DictConfig | ListConfig, run_dir: Path) -> DictConfig:
    """`cfg` (a run's saved config, as `OmegaConf.load` reads it) with its model's target replaced where it moved
    (`MOVED`), in place; one line when it is not a mapping."""
    if not isinstance(cfg, DictConfig):
        raise UserError(f"{run_dir}: its saved config is a list, not a run's config (a mapping of options)")
    if OmegaConf.select(cfg, "model._target_") in MOVED:
        cfg.model._target_ = moved_target(cfg.model._target_, run_dir)
    return cfg


def load_config(path: Path, run_dir: Path) -> DictConfig:
    """A run's saved config (`.hydra/config.yaml`, `read_config`), its moved targets applied (`apply_moved`)."""
    return apply_moved(read_config(path), run_dir)


def read_config(path: Path) -> DictConfig | ListConfig:
    """A YAML config file as OmegaConf reads it; YAML that does not parse stops in one line with file:line:column."""
    try:
        return OmegaConf.load(path)
    except yaml.YAMLError as error:
        mark: Any = None  # yaml's Mark: the 0-based line and column it stopped at
        problem = " ".join(str(error).split())
        if isinstance(error, yaml.MarkedYAMLError):
            mark, problem = error.problem_mark or error.context_mark, error.problem or problem
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        raise UserError(f"{where}: not valid YAML ({problem}): fix that line of the run's saved config (Hydra "
                        "wrote it; its copy as the run started is the manifest.json's config)") from None
    except UnicodeDecodeError as error:
        raise UserError(f"{path}: not UTF-8 text at byte {error.start}: fix the run's saved config") from None
