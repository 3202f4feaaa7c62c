"""One run: instantiate data and model from the config, check they fit, train, test, report."""

from __future__ import annotations

import inspect
import logging
import time
import warnings
from pathlib import Path
from typing import Any, cast

import lightning as L
import torch
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from hydra.utils import get_class
from hydra.utils import instantiate as hydra_instantiate
from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch.callbacks import ModelCheckpoint, ProgressBar
from lightning.pytorch.loggers import WandbLogger
from omegaconf import DictConfig, OmegaConf, open_dict

from attnmem.callbacks.monitor_check import MonitorCheck
from attnmem.callbacks.predictions import PredictionsWriter
from attnmem.core.dims import Dims, kwargs
from attnmem.core.errors import UserError
from attnmem.core.integrity import write_json  # metrics.json with its sha256
from attnmem.data import catalog
from attnmem.replicas import build as replicas
from attnmem.replicas.module import Replicas
from attnmem.runtime import (
    checkpoint,
    checkpoint_fit,
    console,
    distributed,
    hardware,
    legacy,
    manifest,
    model_memory,
    option_types,
    process,
    resume,
    run_dir_guard,
    run_lock,
    wandb_run,
)
from attnmem.runtime.profiler import NoProfiler
from attnmem.tasks.family import FamilyModule, callbacks_of

# noise that says nothing about the run: per-step logging is off on purpose, and the rest is advice
warnings.filterwarnings("ignore", message=".*smaller than the logging interval.*")
warnings.filterwarnings("ignore", message=".*LeafSpec.*is deprecated.*")
# a resumed run's checkpoint folder holds its checkpoints: run_dir_guard refuses any other reuse
warnings.filterwarnings("ignore", message=".*Checkpoint directory .* exists and is not empty.*")
# evaluating a checkpoint reads its weights only: the callbacks that wrote it have nothing to restore
warnings.filterwarnings("ignore", message=".*callbacks used to create the checkpoint need to be provided.*")
# Lightning's tip about its litlogger, and its Ctrl-C notice (the run prints its own line, with the resume command)
logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(
    lambda r: "litlogger" not in r.getMessage() and "Detected KeyboardInterrupt" not in r.getMessage()
)
# under DDP: the family modules log sums already reduced across processes (torchmetrics), and
# distributed.split_batch says once what padding the evaluation splits costs
warnings.filterwarnings("ignore", message=".*sync_dist=True.*when logging on epoch level.*")
warnings.filterwarnings("ignore", message=".*Using `DistributedSampler` with the dataloaders.*")


def setup(
    cfg: DictConfig, resume_at: resume.Point | None = None
) -> tuple[L.LightningDataModule, FamilyModule | Replicas, L.Trainer]:
    """Seed, then build the datamodule (set up), the family module around the model, and the trainer (its
    loggers keeping the history before `resume_at` of a resumed run)."""
    option_types.check_run(cfg)  # before anything is built: the integers, the targets, the optimizer's partials
    process.configure(cfg.threads)
    L.seed_everything(cfg.seed, workers=True)
    check_compatible(cfg)
    count = replicas.check(cfg)
    data_cls: Any = get_class(cfg.data._target_)  # a datamodule class: its family and family module are its own
    task_cls: type[FamilyModule] = get_class(data_cls.family_module)
    with open_dict(cfg):
        cfg.monitor = cfg.monitor or task_cls.monitor
        cfg.mode = cfg.mode or task_cls.mode
        cfg.trainer.precision = hardware.check(cfg.trainer)
    datamodule = instantiate(cfg.data)
    datamodule.prepare_data()
    datamodule.setup("fit")
    option_types.check(cfg.task, task_cls)

    def family_module() -> FamilyModule:
        net = build_model(cfg.model, cfg.attention, datamodule.dims)
        scheduler = instantiate(cfg.scheduler) if cfg.scheduler else None
        optimizer = instantiate(cfg.optimizer)
        return task_cls(net, optimizer=optimizer, scheduler=scheduler, dims=datamodule.dims, **cfg.task)

    model_memory.check(lambda: build_model(cfg.model, cfg.attention, datamodule.dims), cfg.trainer)
    datamodule, module = replicas.build(cfg, count, datamodule, family_module)
    if isinstance(module, Replicas):
        console.note(module.describe())
    wandb_run.choose_mode(cfg)
    loggers = [instantiate(c, **resume.logger_options(c, resume_at)) for c in (cfg.get("logger") or {}).values() if c]
    callbacks = replicas.callbacks(count, [instantiate(c) for c in (cfg.get("callbacks") or {}).values() if c])
    if not cfg.trainer.get("enable_progress_bar", True):
        callbacks = [c for c in callbacks if not isinstance(c, ProgressBar)]
    callbacks.insert(0, MonitorCheck(cfg.monitor, data_cls.family, task_cls.monitor))
    trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False,
                          profiler=cfg.trainer.get("profiler") or NoProfiler())
    distributed.check_trainable(module, trainer.world_size)
    distributed.split_batch(datamodule, trainer.world_size)
    return datamodule, module, trainer


def train(cfg: DictConfig) -> float | None:
    """Train and test the configured model; write metrics.json; return the monitored metric."""
    out_dir = Path(cfg.paths.output_dir)
    option_types.check_max_epochs(cfg.trainer)
    catalog.check_data_dir(cfg.paths.get("data_dir"))
    started_with = cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=False))
    with run_lock.held(out_dir):
        ckpt_path = _resume_path(cfg, out_dir)
        resuming = ckpt_path is not None and Path(ckpt_path).resolve().is_relative_to(out_dir.resolve())
        changed = resume.changes(out_dir, cfg, note=True) if resuming else {}
        checkpoint.allow_checkpoint_globals()
        wandb_run.continue_run(cfg, ckpt_path)
        console.print_config_tree(cfg)
        resume_at = resume.point(ckpt_path) if ckpt_path else None
        datamodule, module, trainer = setup(cfg, resume_at=resume_at)
        if trainer.is_global_zero and resuming and ckpt_path and resume_at and (out_dir / "manifest.json").is_file():
            saved = str(Path(ckpt_path).resolve().relative_to(out_dir.resolve()))
            manifest.add_resume(out_dir, saved, resume_at.step, changed)
        elif trainer.is_global_zero:
            manifest.write(out_dir, cfg, datamodule, started_with)
        for logger in trainer.loggers:
            logger.log_hyperparams(cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True)))
        metrics = _train_and_test(trainer, module, datamodule, ckpt_path, out_dir)
    return metrics.get(cfg.monitor)


def _train_and_test(
    trainer: L.Trainer, module: FamilyModule | Replicas, datamodule: Any, ckpt_path: str | None, out_dir: Path
) -> dict[str, Any]:
    try:
        start = time.perf_counter()
        _fit(trainer, module, datamodule, ckpt_path, out_dir)
        train_seconds = time.perf_counter() - start
        best = _best_checkpoint(trainer, last=isinstance(module, Replicas))
        metrics: dict[str, Any] = resume.train_metrics(trainer)
        metrics |= _evaluate_best(trainer, module, datamodule, ckpt_path=best)
        metrics |= module.report() if isinstance(module, Replicas) else {}
        metrics |= {
            "epoch": trainer.current_epoch,
            "global_step": trainer.global_step,
            "params": sum(p.numel() for p in module.net.parameters()),
            "train_seconds": train_seconds,
            # the checkpoint these figures come from, as load_run and eval.py run_dir= use it
            "checkpoint": str(Path(best).resolve().relative_to(out_dir.resolve())) if best else None,
        }
        wandb_run.log_summary(trainer, metrics)
    finally:
        _finish_wandb(trainer)
    if trainer.is_global_zero:
        write_json(out_dir / "metrics.json", metrics)
        plots = [p for c in callbacks_of(trainer) for p in getattr(c, "written", [])]
        figures = {k: v for k, v in metrics.items() if k != "checkpoint"}
        console.print_summary(figures, out_dir, plots, trainer.global_step / train_seconds, metrics["checkpoint"])
    return metrics


def _fit(
    trainer: L.Trainer, module: L.LightningModule, datamodule: Any, ckpt_path: str | None, out_dir: Path
) -> None:
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path, weights_only=True)
    except (MisconfigurationException, RuntimeError) as err:  # checkpointing or early stopping missed the monitor
        check = next(c for c in callbacks_of(trainer) if isinstance(c, MonitorCheck))
        if (refusal := check.refusal(err, trainer)) is None:
            raise
        raise refusal from None
    except SystemExit:  # Lightning's answer to Ctrl-C (SIGINT): a graceful stop, then exit(1)
        if not trainer.interrupted:
            raise
        console.interrupted(trainer.current_epoch, trainer.global_step, out_dir, resume.command(out_dir))
        raise SystemExit(130) from None


def evaluate(cfg: DictConfig) -> dict[str, float]:
    """Evaluate a checkpoint of a finished run on its (or overridden) data; write metrics.json."""
    option_types.check_top_level(cfg, "threads")
    process.configure(cfg.threads)
    ckpt = _eval_checkpoint(cfg)
    run_cfg_path = ckpt.parent.parent / ".hydra" / "config.yaml"
    if not run_cfg_path.is_file():
        raise UserError(f"ckpt_path={ckpt}: the run's config {run_cfg_path} is missing; was it made by train.py?")
    run_cfg = legacy.load_config(run_cfg_path, ckpt.parent.parent)
    legacy.check_config(run_cfg, ckpt.parent.parent)
    run_cfg.data = OmegaConf.merge(run_cfg.data, cfg.data)
    check_compatible(run_cfg)
    datamodule = instantiate(run_cfg.data)
    state = checkpoint.load(ckpt)
    legacy.check_checkpoint(state, ckpt)
    checkpoint_fit.check_data(state, datamodule, ckpt, run_cfg_path)
    if type(datamodule).__qualname__ in state:  # a datamodule with state saves it (Lightning skips an empty one)
        datamodule.load_state_dict(state[type(datamodule).__qualname__])
    datamodule.prepare_data()
    datamodule.setup("test")
    task_cls = get_class(type(datamodule).family_module)

    def family_module() -> FamilyModule:
        net = build_model(run_cfg.model, run_cfg.attention, datamodule.dims)
        return task_cls(net, optimizer=instantiate(run_cfg.optimizer), dims=datamodule.dims, **run_cfg.task)

    datamodule, module = replicas.build(run_cfg, replicas.check(run_cfg), datamodule, family_module)
    checkpoint_fit.check_weights(state, module, ckpt, run_cfg_path)
    trainer = L.Trainer(**cfg.trainer, logger=False, enable_model_summary=False, enable_progress_bar=False,
                        enable_checkpointing=False, callbacks=[PredictionsWriter(cfg.paths.output_dir)])
    metrics = _evaluate_best(trainer, module, datamodule, ckpt_path=str(ckpt))
    out_dir = Path(cfg.paths.output_dir)
    write_json(out_dir / "metrics.json", metrics)
    console.print_summary(metrics, out_dir, [])
    return metrics


def _eval_checkpoint(cfg: DictConfig) -> Path:
    from attnmem.runtime.load import eval_checkpoint  # load.py imports this module

    return eval_checkpoint(cfg)


def check_compatible(cfg: DictConfig) -> str:
    """Return the data family, or stop with one line when the model cannot train on that data."""
    model_cls, data_cls = cast(Any, get_class(cfg.model._target_)), cast(Any, get_class(cfg.data._target_))
    family = data_cls.family
    if family in model_cls.families:
        return family
    models = [n for n, c in _group_classes("model").items() if family in getattr(c, "families", ())]
    data = [n for n, c in _group_classes("data").items() if getattr(c, "family", None) in model_cls.families]
    raise UserError(
        f"model {model_cls.__name__} ({', '.join(model_cls.families)}) cannot train on data "
        f"{data_cls.__name__} ({family}): for this model use data={'|'.join(data) or '?'}; "
        f"for this data use model={'|'.join(models) or '?'}"
    )


def build_model(model_cfg: DictConfig, score_cfg: DictConfig, dims: Dims) -> torch.nn.Module:
    """Call the model's partial with the data sizes its constructor takes and, if it takes one, the score."""
    model_cls = get_class(model_cfg._target_)
    params = inspect.signature(model_cls).parameters
    known = {k: v for k, v in kwargs(dims).items() if k in params}
    if "score" in params:
        known["score"] = instantiate(score_cfg)
    elif (chosen := _chosen_on_command_line("attention")) is not None:
        console.note(f"attention={chosen} is ignored: {model_cls.__name__} uses no attention score (see README)")
    return instantiate(model_cfg)(**known)


def _chosen_on_command_line(group: str) -> str | None:
    # the option of `group` that the command line (not a yaml's defaults) picked, or None
    if not HydraConfig.initialized():
        return None
    for override in HydraConfig.get().overrides.task:
        key, _, value = override.partition("=")
        if key.lstrip("+") == group:
            return value
    return None


def _best_checkpoint(trainer: L.Trainer, *, last: bool) -> str | None:
    # the checkpoint the run reports: the best by the monitor (none under fast_dev_run: the current weights);
    # replicas: the last, which holds each replica's own best state
    ckpt_cb = next((c for c in trainer.checkpoint_callbacks if isinstance(c, ModelCheckpoint)), None)
    path = (ckpt_cb.last_model_path if last else ckpt_cb.best_model_path) if ckpt_cb else None
    return path or None


def _evaluate_best(
    trainer: L.Trainer, module: L.LightningModule, datamodule: Any, ckpt_path: str | None
) -> dict[str, float]:
    # validation and test both use the same checkpoint (the current weights when it is None)
    loading: dict[str, Any] = {"ckpt_path": ckpt_path, "weights_only": True, "verbose": False}
    metrics = dict(trainer.validate(module, datamodule=datamodule, **loading)[0])
    if getattr(datamodule, "has_test", True):
        metrics |= trainer.test(module, datamodule=datamodule, **loading)[0]
    else:
        console.note(f"{type(datamodule).__name__} has no test split: test skipped (validation metrics only)")
    return {k: float(v) for k, v in metrics.items()}


def instantiate(config: Any, *args: Any, **kwargs: Any) -> Any:
    """`hydra.utils.instantiate` after a type check of the options; a constructor's ValueError or UserError
    comes through unwrapped."""
    option_types.check(config)
    try:
        return hydra_instantiate(config, *args, **kwargs)
    except InstantiationException as err:
        if isinstance(err.__cause__, (ValueError, UserError)):
            raise err.__cause__ from None
        raise


def _resume_path(cfg: DictConfig, out_dir: Path) -> str | None:
    if cfg.resume not in (None, "auto"):
        raise UserError(f"resume={cfg.resume}: the only value is 'auto' (resume this run directory's last checkpoint)")
    run_dir_guard.check_run_dir(out_dir, cfg)  # as Hydra's RunDirGuard did, for a config composed without it
    if cfg.resume is None and cfg.ckpt_path is None and (requeued := distributed.requeued_checkpoint(out_dir)):
        return str(requeued)
    if cfg.resume == "auto" or cfg.ckpt_path == "last":  # last.ckpt, or the newest intact checkpoint
        return str(resume.checkpoint_to_resume(out_dir))
    if cfg.ckpt_path is not None and not Path(cfg.ckpt_path).is_file():
        raise UserError(f"ckpt_path={cfg.ckpt_path}: no such checkpoint file")
    if cfg.ckpt_path is not None:
        # a file that is not a checkpoint, or not a safe one, stops here in one line; so does one of attnmem 0.1
        legacy.check_manifest(Path(cfg.ckpt_path).resolve().parent.parent)
        legacy.check_checkpoint(checkpoint.load(cfg.ckpt_path), Path(cfg.ckpt_path))
    return cfg.ckpt_path


def _group_classes(group: str) -> dict[str, type]:
    repo = cast(Any, GlobalHydra.instance().config_loader()).repository  # Hydra's loader's (not its interface's)
    found = {}
    for name in repo.get_group_options(group):
        loaded = repo.load_config(f"{group}/{name}")
        target = loaded.config.get("_target_") if loaded else None
        if target:
            found[name] = get_class(target)
    return found


def _finish_wandb(trainer: L.Trainer) -> None:
    # a raising run must still be closed, or the next job of a multirun inherits it
    if any(isinstance(logger, WandbLogger) for logger in trainer.loggers):
        import wandb

        wandb.finish()
