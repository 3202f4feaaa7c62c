"""Training steps/s of the default experiment under Lightning vs a plain PyTorch loop.

Both sides train the same model (MemN2N, 3 hops) on the same batches of the default data
(generated bAbI task 1) with the same optimizer; the Lightning side is the composed default config
(its callbacks, logger and progress bar included), timed over its training epochs only. Runs are
interleaved (plain, Lightning, plain, ...) and the best of each is kept; target ratio >= 0.8.

`--floor` also times Lightning with no callbacks, logger, progress bar or checkpointing: what Lightning's own
loop costs beside the plain one, without what the run adds to it.

`--fx-name` instead compares, side by side, Lightning's step with the family module's `_current_fx_name` (which
Lightning sets twice around each hook it calls) stored through `nn.Module.__setattr__`'s checks and stored directly
(a `__setattr__` override on the module's class): one fit per round whose training batches each run one of the
two, drawn at random; it prints the median over the rounds of each round's ratio (medians of the sides beside it).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory

import lightning as L
import torch
import torch.nn.functional as F
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, open_dict
from torch import nn

from attnmem.core import packaged
from attnmem.runtime.run import setup

CONF = packaged.conf_dir()  # the packaged configs (src/attnmem/conf)
# Lightning's loop alone: no callbacks (but the run's monitor check), logger, progress bar or checkpointing
BARE = ["~callbacks", "~logger", "trainer.enable_progress_bar=false", "+trainer.enable_checkpointing=false"]


class EpochTimer(L.Callback):
    """Wall time of training batches: each epoch from its start to its last batch's end.

    Lightning runs validation (and the checkpoint it triggers) inside the training epoch, before
    `on_train_epoch_end`, so the epoch's own end would count work the plain loop does not do.
    """

    def __init__(self) -> None:
        self.seconds, self.steps, self._start, self._last = 0.0, 0, 0.0, 0.0

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start = self._last = time.perf_counter()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: object) -> None:
        self._last = time.perf_counter()
        self.steps += 1

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.seconds += self._last - self._start


def compose_default(out_dir: Path, epochs: int, overrides: list[str] = ()) -> DictConfig:
    """The default training config (plus `overrides`), its run directory in `out_dir`."""
    cfg = compose("train", overrides=[f"trainer.max_epochs={epochs}", *overrides], return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(out_dir)
    HydraConfig.instance().set_config(cfg)
    return cfg


def lightning_steps_per_second(cfg: DictConfig) -> float:
    """Steps/s of the training epochs of `trainer.fit` with the config's callbacks and logger."""
    dm, module, trainer = setup(cfg)
    timer = EpochTimer()
    trainer.callbacks.append(timer)
    trainer.fit(module, datamodule=dm)
    return timer.steps / timer.seconds


def _direct_fx_name(module: nn.Module, name: str, value: object) -> None:
    """`nn.Module.__setattr__`, but `_current_fx_name` (a hook's name, never a tensor or module) stored directly."""
    if name == "_current_fx_name":
        object.__setattr__(module, name, value)
    else:
        nn.Module.__setattr__(module, name, value)


class SwitchFxName(L.Callback):
    """Sets the module's class to `nn.Module.__setattr__` or `_direct_fx_name` for each training batch, drawn at
    random (seeded), and keeps the time from the previous batch's end to this one's (its fetch, hooks, step) on the
    side it ran on; an epoch's first batch (after validation and the epoch's start) is not counted. Drawn, not
    alternated: what Lightning's loop does every n batches (the progress bar every 10) would fall on one side.
    The class's own `__setattr__` is restored at the end of the fit."""

    def __init__(self, seed: int) -> None:
        self.seconds: dict[bool, list[float]] = {False: [], True: []}
        self.direct, self._last, self._cls, self._own = False, None, None, None
        self._draw = random.Random(seed)

    def _use(self, direct: bool) -> None:
        self.direct = direct
        self._cls.__setattr__ = _direct_fx_name if direct else nn.Module.__setattr__

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._cls = type(pl_module)
        self._own = self._cls.__dict__.get("__setattr__")
        self._use(False)

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._last = None

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: object) -> None:
        now = time.perf_counter()
        if self._last is not None:
            self.seconds[self.direct].append(now - self._last)
        self._use(self._draw.random() < 0.5)
        self._last = time.perf_counter()

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._own is None:
            del self._cls.__setattr__
        else:
            self._cls.__setattr__ = self._own


def fx_name_rounds(cfg_of: Callable[[str], DictConfig], rounds: int) -> list[tuple[float, float]]:
    """(ms a step with `nn.Module.__setattr__`, ms a step with `_current_fx_name` stored directly) per round, each the
    median of its steps: one fit a round, each of its batches on one of the two drawn at random (`SwitchFxName`),
    so both see the same machine load; a step another process preempted moves the median little."""
    pairs = []
    for r in range(rounds):
        dm, module, trainer = setup(cfg_of(f"fx{r}"))
        timer = SwitchFxName(seed=r)
        trainer.callbacks.append(timer)
        trainer.fit(module, datamodule=dm)
        pairs.append(tuple(1e3 * statistics.median(timer.seconds[d]) for d in (False, True)))
    return pairs


def report_fx_name(pairs: list[tuple[float, float]]) -> None:
    """Print the medians of both sides and of the paired ratios (nn.Module's ms a step / direct's)."""
    ratios = [module / direct for module, direct in pairs]
    print(f"  _current_fx_name through nn.Module.__setattr__  {statistics.median(m for m, _ in pairs):.3f} ms/step")
    print(f"  _current_fx_name stored directly               {statistics.median(d for _, d in pairs):.3f} ms/step")
    print(f"  paired speed-up of storing directly (ms/step ratio): median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}; {' '.join(f'{x:.3f}' for x in ratios)})")


def plain_steps_per_second(cfg: DictConfig) -> float:
    """Steps/s of a hand-written loop over the same batches, model and optimizer."""
    dm, module, _ = setup(cfg)
    net = module.net
    optimizer = instantiate(cfg.optimizer)(params=net.parameters())
    reduction = cfg.task.get("loss_reduction", "mean")
    net.train()
    steps, start = 0, time.perf_counter()
    for _ in range(cfg.trainer.max_epochs):
        for batch in dm.train_dataloader():
            loss = F.cross_entropy(net(batch).pred, batch["answer"], reduction=reduction)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            steps += 1
    return steps / (time.perf_counter() - start)


def main() -> None:
    """Print both throughputs and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--floor", action="store_true", help="also time Lightning without callbacks and logger")
    parser.add_argument("--fx-name", action="store_true",
                        help="only compare, paired, _current_fx_name stored through nn.Module.__setattr__ or directly")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the default config, e.g. data.batch_size=32")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    best = {"plain": 0.0, "lightning": 0.0, "floor": 0.0}
    with TemporaryDirectory() as tmp, initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        if args.fx_name:
            pairs = fx_name_rounds(lambda name: compose_default(Path(tmp) / name, args.epochs, args.overrides),
                                   args.rounds)
            print(f"default experiment {' '.join(args.overrides)}, {args.epochs} epochs, threads={args.threads}, "
                  f"{args.rounds} paired rounds (one fit each, its batches' sides drawn at random)")
            report_fx_name(pairs)
            return
        for r in range(args.rounds):
            cfg = compose_default(Path(tmp) / f"run{r}", args.epochs, args.overrides)
            best["plain"] = max(best["plain"], plain_steps_per_second(cfg))
            best["lightning"] = max(best["lightning"], lightning_steps_per_second(cfg))
            if args.floor:
                cfg = compose_default(Path(tmp) / f"floor{r}", args.epochs, [*args.overrides, *BARE])
                best["floor"] = max(best["floor"], lightning_steps_per_second(cfg))
    print(f"default experiment {' '.join(args.overrides)}, {args.epochs} epochs, threads={args.threads}, "
          f"best of {args.rounds} interleaved runs")
    print(f"  plain PyTorch loop   {best['plain']:8.1f} steps/s  ({1e3 / best['plain']:.2f} ms/step)")
    print(f"  Lightning            {best['lightning']:8.1f} steps/s  ({1e3 / best['lightning']:.2f} ms/step)")
    print(f"  ratio Lightning / plain = {best['lightning'] / best['plain']:.2f}  (target >= 0.8)")
    if args.floor:
        print(f"  Lightning, bare       {best['floor']:8.1f} steps/s  ({1e3 / best['floor']:.2f} ms/step): "
              f"ratio {best['floor'] / best['plain']:.2f}, the most the run's own callbacks and logger could leave")


if __name__ == "__main__":
    main()
