"""Use a finished run: its model with the best checkpoint's weights, its datamodule and vocabulary, its config.

`load_model` rebuilds the model alone, from the run's config and the data sizes its checkpoint records, without
reading any data; `load_run` also sets the datamodule up (it reads the run's data).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import lightning as L
import torch
from hydra.utils import get_class
from omegaconf import DictConfig
from torch import Tensor, nn

from attnmem.core import dims as dims_record
from attnmem.core.dims import Dims
from attnmem.core.errors import UserError
from attnmem.data.qa.babi_text import tokenize
from attnmem.data.qa.tensors import Example, vectorize
from attnmem.runtime import checkpoint, console, legacy, manifest, run, run_dir_guard
from attnmem.tasks.hooks import DIMS_KEY


class LoadedRun(NamedTuple):
    """A finished run, ready for inference: `model, datamodule, cfg = load_run(run_dir)`."""

    model: nn.Module  # in eval mode, the best checkpoint's weights
    datamodule: L.LightningDataModule  # set up, with the checkpoint's vocabulary
    cfg: DictConfig  # the run's composed config (.hydra/config.yaml)


def load_run(run_dir: str | Path, replica: int | None = None) -> LoadedRun:
    """Rebuild a finished run's model (best checkpoint), datamodule and config from its run directory.

    Unlike `load_model`, it sets the run's datamodule up, so it reads the run's data.

    Args:
        run_dir: a run directory `train.py` completed (with `.hydra/config.yaml` and `metrics.json`).
        replica: of a `replicas=R` run, which replica (default: the one its metrics.json reports,
            `replica_selected`).

    Returns:
        `LoadedRun(model, datamodule, cfg)`; `model` is in eval mode, `datamodule` set up for `"fit"`.
    """
    run_dir = Path(run_dir)
    config = run_dir / ".hydra" / "config.yaml"
    if not config.is_file() or not (run_dir / "metrics.json").is_file():
        raise UserError(
            f"{run_dir} is not a finished run (it needs .hydra/config.yaml and metrics.json): pass the "
            "directory of a run train.py completed"
        )
    cfg = legacy.load_config(config, run_dir)
    legacy.check_config(cfg, run_dir)
    state = checkpoint.load(best_checkpoint(run_dir))
    run.check_compatible(cfg)
    datamodule = run.instantiate(cfg.data)
    datamodule.load_state_dict(state.get(type(datamodule).__qualname__, {}))
    datamodule.prepare_data()
    datamodule.setup("fit")
    model = run.build_model(cfg.model, cfg.attention, datamodule.dims)
    model.load_state_dict(_weights(state, run_dir, cfg.get("replicas", 1), replica))
    return LoadedRun(model.eval(), datamodule, cfg)


class LoadedModel(NamedTuple):
    """A trained model without its data: `model, dims, vocabulary, cfg = load_model(run_or_ckpt)`."""

    model: nn.Module  # in eval mode, the checkpoint's weights
    dims: Dims  # the data sizes it was built with (core/dims.py)
    vocabulary: dict[str, Any]  # the datamodule's saved state: its vocabularies and widths ({} where it has none)
    cfg: DictConfig  # the run's composed config (.hydra/config.yaml)


def load_model(run_or_ckpt: str | Path, replica: int | None = None) -> LoadedModel:
    """Rebuild a trained model from a run directory (its best checkpoint) or a checkpoint file, reading no data.

    Args:
        run_or_ckpt: a run directory `train.py` wrote, or a `.ckpt` file in its `checkpoints/`. A checkpoint
            of attnmem 0.2 records no data sizes: `load_run` rebuilds its model from the run's data.
        replica: of a `replicas=R` run, which replica (default: the one its metrics.json reports).

    Returns:
        `LoadedModel(model, dims, vocabulary, cfg)`; `model` is in eval mode.
    """
    path = Path(run_or_ckpt)
    if path.is_dir():
        run_dir, ckpt = path, best_checkpoint(path)
    elif path.is_file():
        run_dir, ckpt = path.parent.parent, path  # <run>/checkpoints/<name>.ckpt
    else:
        raise UserError(f"load_model: {path} does not exist: pass a run directory or a checkpoint file in one")
    config = run_dir / ".hydra" / "config.yaml"
    if not config.is_file():
        raise UserError(f"load_model: {config} is missing: {path} must be a run directory of train.py or a "
                        "checkpoint in its checkpoints/ folder (the model's options are in that config)")
    cfg = legacy.load_config(config, run_dir)
    legacy.check_config(cfg, run_dir)
    state = checkpoint.load(ckpt)
    if DIMS_KEY not in state:
        raise UserError(f"{ckpt} was saved before attnmem 0.3 and records no data sizes: "
                        f"attnmem.load_run('{run_dir}') rebuilds its model from the run's data")
    dims = dims_record.from_record(state[DIMS_KEY])
    model = run.build_model(cfg.model, cfg.attention, dims)
    model.load_state_dict(_weights(state, run_dir, cfg.get("replicas", 1), replica))
    vocabulary = state.get(get_class(cfg.data._target_).__qualname__, {})
    return LoadedModel(model.eval(), dims, vocabulary, cfg)


def _weights(state: dict[str, Any], run_dir: Path, count: int, replica: int | None) -> dict[str, Tensor]:
    # the family module holds the model as `net` (its own buffers are metric sums, not needed here); a
    # replicas run holds replica r as `members.r.net`, and each replica's best state beside them
    if count == 1 and replica in (None, 0):
        return {k.removeprefix("net."): v for k, v in state["state_dict"].items() if k.startswith("net.")}
    if replica is None:
        replica = manifest.read_metrics(run_dir).get("replica_selected", 0)
    if not isinstance(replica, int) or not 0 <= replica < count:
        raise UserError(f"load_run({run_dir}, replica={replica}): the run has {count} replica(s): pass replica=0.."
                        f"{count - 1}, or leave it out for the one its metrics.json reports")
    best = state["replicas"]["best_state"][replica]
    if best is not None:
        return best
    prefix = f"members.{replica}.net."
    return {k.removeprefix(prefix): v for k, v in state["state_dict"].items() if k.startswith(prefix)}


def best_checkpoint(run_dir: Path) -> Path:
    """The checkpoint a run's metrics.json was computed from (as it names it); for a run whose metrics.json
    names none (or an unfinished run), the best one its `last.ckpt` records, or `last.ckpt` itself when that file
    is gone. One line when the directory holds no run with a checkpoint (`run_dir_guard.check_evaluable`)."""
    run_dir_guard.check_evaluable(run_dir, str(run_dir))
    named = _named_checkpoint(run_dir)
    if named is not None:
        return named
    last = run_dir / "checkpoints" / "last.ckpt"
    callbacks: dict[str, Any] = checkpoint.load(last).get("callbacks", {})
    best = next((s["best_model_path"] for s in callbacks.values() if s.get("best_model_path")), None)
    # a moved run directory: the recorded absolute path is stale, the file name is not
    candidate = last.parent / Path(best).name if best else last
    return candidate if candidate.is_file() else last


def eval_checkpoint(cfg: DictConfig) -> Path:
    """The checkpoint eval.yaml's `run_dir` / `ckpt_path` name (a run directory: the one it reported, said in a
    note); one line when they name none, or two different runs (`run_dir_guard.check_eval_source`)."""
    run_dir_guard.check_eval_source(cfg)  # as Hydra's RunDirGuard did, for a config composed without it
    run_dir, ckpt = cfg.get("run_dir"), cfg.get("ckpt_path")
    if run_dir is not None and ckpt is not None and Path(ckpt).is_file():  # a checkpoint of run_dir's run
        console.note(f"run_dir={run_dir}: evaluating the checkpoint ckpt_path names, {ckpt}")
        return Path(ckpt)
    option, given = ("run_dir", run_dir) if run_dir is not None else ("ckpt_path", ckpt)
    if not Path(given).is_dir():
        return Path(given)
    best = best_checkpoint(Path(given))
    console.note(run_dir_guard.evaluating(Path(given), f"{option}={given}", best))
    return best


def _named_checkpoint(run_dir: Path) -> Path | None:
    metrics = run_dir / "metrics.json"
    name = manifest.read_metrics(run_dir).get("checkpoint") if metrics.is_file() else None
    if name is None:
        return None
    if not isinstance(name, str):
        raise UserError(f"{metrics}: its checkpoint is {name!r}, not a path in the run: restore the file")
    if not (run_dir / name).is_file():
        raise UserError(f"{metrics} was computed from {name}, which is gone from {run_dir}: restore that file")
    return run_dir / name


@torch.no_grad()
def qa_batch(datamodule: Any, story: Sequence[str], question: str) -> dict[str, Tensor]:
    """A story typed as sentences and its question as a batch of one, in a qa datamodule's vocabulary."""
    example = Example(
        story=tuple(tokenize(s) for s in story),
        query=tokenize(question),
        answer="",
        supports=(),
        task=0,
        story_id=0,
        story_key="",
    )
    shape = datamodule.state_dict()  # the widths the model was trained with
    tensors = vectorize(
        [example],
        datamodule.vocab,
        datamodule.answers,
        memory_size=shape["memory_size"],
        sentence_len=shape["sentence_len"],
        query_len=shape["query_len"],
    )
    return {k: v.long() for k, v in tensors.items()}
