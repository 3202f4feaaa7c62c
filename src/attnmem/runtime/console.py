"""What a run prints: the config tree at start, a note now and then, the summary table at the end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig, OmegaConf
from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table
from rich.tree import Tree

console = Console()

TREE_ORDER = ("data", "model", "attention", "optimizer", "scheduler", "task", "trainer", "callbacks", "logger")


@rank_zero_only
def print_config_tree(cfg: DictConfig) -> None:
    """Print the composed config as a Rich tree, one branch per group."""
    tree = Tree("config", style="bold")
    keys = [k for k in TREE_ORDER if k in cfg] + [k for k in cfg if k not in TREE_ORDER and k != "paths"]
    for key in keys:
        branch = tree.add(str(key), style="cyan")
        value = cfg[key]
        text = OmegaConf.to_yaml(value, resolve=True) if isinstance(value, DictConfig) else str(value)
        branch.add(Syntax(text.rstrip() or "{}", "yaml", theme="ansi_dark", background_color="default"))
    console.print(tree)


@rank_zero_only
def note(message: str) -> None:
    """Print one line of information."""
    console.print(f"[yellow]note:[/] {message}")


def _format(key: str, value: float) -> str:
    rates = ("acc", "error", "em", "f1", "recall", "exact_match", "overlap")
    if key.rsplit("/", 1)[-1] in rates:
        return f"{100 * value:.2f}%"
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:.4g}"


@rank_zero_only
def print_summary(
    metrics: dict[str, Any], run_dir: Path, plots: list[Path], steps_per_second: float | None = None
) -> None:
    """Print the final metrics, size, speed, run directory and plots as one Rich table."""
    table = Table(title="run summary", show_header=True, header_style="bold")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key in sorted(metrics):
        table.add_row(key, _format(key, metrics[key]))
    if steps_per_second is not None:
        table.add_row("train steps/s", f"{steps_per_second:.1f}")
    table.add_row("run directory", str(run_dir))
    for plot in plots:
        table.add_row("plot", str(plot))
    console.print(table)
