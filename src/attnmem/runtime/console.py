"""What a run prints: the config tree at start, a note now and then, the summary table at the end."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig, OmegaConf
from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table
from rich.tree import Tree

console = Console()

TREE_ORDER = ("data", "model", "attention", "optimizer", "scheduler", "task", "trainer", "callbacks", "logger")
PRINT_CONFIG = ("collapsed", "full", "none")
# the last part of a metric's name: a fraction, shown as a percentage; a count, shown as an integer
RATES = frozenset(
    "acc token_acc error em f1 recall exact_match overlap overlap_min energy_monotone bleu bit_accuracy "
    "deciding_sentence_top".split()
)
COUNTS = ("epoch", "global_step", "params")


@rank_zero_only
def print_config_tree(cfg: DictConfig) -> None:
    """Print the composed config as `print_config` asks: collapsed (groups and options), full (a tree), none."""
    how = cfg.get("print_config", "collapsed")
    if how not in PRINT_CONFIG:
        raise ValueError(f"print_config={how}: choose print_config={'|'.join(PRINT_CONFIG)}")
    if how == "none":
        return
    keys = [k for k in TREE_ORDER if k in cfg] + [str(k) for k in cfg if k not in TREE_ORDER and k != "paths"]
    if how == "collapsed":
        console.print(collapsed_config(cfg, keys), soft_wrap=True, highlight=False, markup=False)
        return
    tree = Tree("config", style="bold")
    for key in keys:
        branch = tree.add(str(key), style="cyan")
        value = cfg[key]
        text = OmegaConf.to_yaml(value, resolve=True) if isinstance(value, DictConfig) else str(value)
        branch.add(Syntax(text.rstrip() or "{}", "yaml", theme="ansi_dark", background_color="default"))
    console.print(tree)


def collapsed_config(cfg: DictConfig, keys: list[str]) -> str:
    """One line per config group (its chosen option, class and first values), the plain values on one line."""
    choices = dict(HydraConfig.get().runtime.choices) if HydraConfig.initialized() else {}
    lines = ["config (print_config=full shows every value):"]
    for key in (k for k in keys if isinstance(cfg[k], DictConfig)):
        value, choice = cfg[key], choices.get(key)
        target = str(value.get("_target_", "")).rsplit(".", 1)[-1]
        names = ", ".join(map(str, value)) if key in ("callbacks", "logger") else _scalars(value)
        head = " ".join(filter(None, [choice, f"({target})" if choice and target else target]))
        lines.append(f"  {key}: {': '.join(filter(None, [head, names])) or '{}'}")
    if experiment := choices.get("experiment"):
        lines.append(f"  experiment: {experiment}")
    if plain := [f"{k}={cfg[k]}" for k in keys if not isinstance(cfg[k], DictConfig)]:
        lines.append("  " + " ".join(plain))
    return "\n".join(lines)


def _scalars(value: DictConfig, most: int = 6) -> str:
    found = [f"{k!s}={v}" for k, v in value.items() if not str(k).startswith("_") and not isinstance(v, DictConfig)]
    return " ".join(found[:most]) + (" …" if len(found) > most else "")


@rank_zero_only
def note(message: str) -> None:
    """Print one line of information."""
    console.print(f"[yellow]note:[/] {message}", soft_wrap=True)


def format_value(key: str, value: float | str) -> str:
    """A summary value: a rate as a percentage (2 decimals), a count as an integer, the rest to 4 digits; text (how a
    replica stopped) as it is."""
    if isinstance(value, str):
        return value
    name = key.rsplit("/", 1)[-1]
    if name in RATES:
        return f"{100 * value:.2f}%"
    if name in COUNTS or isinstance(value, int) or float(value).is_integer():
        return f"{round(value):,}"
    return f"{value:.4g}"


@rank_zero_only
def print_summary(
    metrics: dict[str, Any],
    run_dir: Path,
    plots: list[Path],
    steps_per_second: float | None = None,
    checkpoint: str | None = None,
) -> None:
    """Print the final metrics, size and speed as one Rich table, then the plots, the checkpoint the metrics
    come from, and the run directory in full."""
    table = Table(title="run summary", show_header=True, header_style="bold")
    table.add_column("metric", overflow="fold")
    table.add_column("value", justify="right", overflow="fold")
    for key in sorted(metrics):
        table.add_row(key, format_value(key, metrics[key]))
    if steps_per_second is not None:
        table.add_row("train steps/s", format_value("steps/s", steps_per_second))
    console.print(table)
    root = run_dir.resolve()
    for plot in plots:
        shown = plot.resolve().relative_to(root) if plot.resolve().is_relative_to(root) else plot
        console.print(f"plot: {shown}", soft_wrap=True, highlight=False, markup=False)
    if checkpoint is not None:
        console.print(f"checkpoint: {checkpoint}", soft_wrap=True, highlight=False, markup=False)
    console.print(f"run directory: {run_dir}", soft_wrap=True, highlight=False, markup=False)


@rank_zero_only
def interrupted(epoch: int, step: int, run_dir: Path, resume_command: str) -> None:
    """The one line a run stopped by Ctrl-C prints: where it stopped and the command that continues it."""
    last = run_dir / "checkpoints" / "last.ckpt"
    how = f"to continue from its last checkpoint, {resume_command}" if last.is_file() else (
        "it saved no checkpoint yet, so there is nothing to resume: train again in a new hydra.run.dir")
    print(f"interrupted at epoch {epoch}, step {step}; the run is unfinished: {how}", file=sys.stderr)
