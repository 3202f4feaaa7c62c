"""A missing optional dependency as one line naming the extra of attnmem that installs it (`pip install attnmem`
holds the layers only; the command line is `attnmem[train]`, the rest comes with further extras)."""

from __future__ import annotations

import importlib.util
import re

from attnmem.core.errors import UserError

# an importable top-level module -> (the extra that installs it, what needs it)
MODULES = {
    "wandb": ("wandb", "logger=wandb"),
    "tensorboard": ("tensorboard", "logger=tensorboard"),
    "tensorboardX": ("tensorboard", "logger=tensorboard"),
    "sklearn": ("vision", "the caption data (data=digits)"),
    "PIL": ("vision", "the caption data"),
    "optuna": ("sweeps", "the Optuna sweeper (hparams_search=, bayes sweeps)"),
}
# Hydra's plugins, named in its "Unknown plugin class" error -> (the extra, the option that picks them)
PLUGINS = {
    "hydra_joblib_launcher": ("sweeps", "hydra/launcher=joblib (--launcher joblib)"),
    "hydra_submitit_launcher": ("sweeps", "hydra/launcher=submitit_local|submitit_slurm"),
    "hydra_optuna_sweeper": ("sweeps", "hydra/sweeper=optuna (hparams_search=, bayes sweeps)"),
}


def _line(module: str, extra: str, use: str) -> str:
    name = module.replace("_", "-") if module.startswith("hydra_") else module  # a plugin by its distribution
    return f"{use} needs {name}, which is not installed: pip install 'attnmem[{extra}]'"


def missing(err: BaseException) -> str | None:
    """The one line for `err` (or an exception it was raised from) when it is a missing module of an extra."""
    seen: BaseException | None = err
    while seen is not None:
        text = str(seen)
        if isinstance(seen, ImportError):
            name = (seen.name or "").split(".")[0]
            for module, (extra, use) in MODULES.items():
                if name == module or (not name and re.search(rf"[`']{module}[`']", text)):
                    return _line(module, extra, use)
        plugin = re.search(r"Unknown plugin class : 'hydra_plugins\.(\w+)\.", text)
        if plugin and plugin.group(1) in PLUGINS:
            return _line(plugin.group(1), *PLUGINS[plugin.group(1)])
        seen = seen.__cause__ or seen.__context__
    return None


def option(group: str, name: str) -> str | None:
    """The one line for a Hydra option that only a plugin of an extra brings (`hydra/sweeper=optuna`), when the
    plugin is not installed."""
    plugin = {"hydra/sweeper/optuna": "hydra_optuna_sweeper"}.get(f"{group}/{name}")
    return _line(plugin, *PLUGINS[plugin]) if plugin else None


def require(plugin: str) -> None:
    """Stop in one line when the Hydra plugin `plugin` (`hydra_joblib_launcher`) of an extra is not installed."""
    try:
        found = importlib.util.find_spec(f"hydra_plugins.{plugin}") is not None
    except ModuleNotFoundError:  # no Hydra plugin at all
        found = False
    if not found:
        raise UserError(_line(plugin, *PLUGINS[plugin]))
