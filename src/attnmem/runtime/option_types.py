"""Config values against the type hints of the constructor they are passed to, checked before instantiation."""

from __future__ import annotations

import inspect
import types
import typing
from typing import Any

from hydra.utils import get_object
from omegaconf import DictConfig, OmegaConf

from attnmem.core import compat
from attnmem.core.errors import UserError

# the hints checked: numbers and flags, which a typo on the command line turns into a string
_NAMES = {bool: "a boolean (true or false)", int: "an integer", float: "a number"}


def check(config: Any, target: Any = None) -> None:
    """Stop with one line when an option of `config` does not fit the type hint of its constructor parameter."""
    if not isinstance(config, DictConfig):
        return
    if target is None and "_target_" in config:
        try:
            target = get_object(config._target_)
        except (ImportError, ValueError):  # hydra's own instantiation names a target that does not exist
            return
    hints = _hints(target) if target is not None else {}
    for key in config:
        # is_interpolation's hint names int | str keys; it takes any DictConfig key (as is_missing's hint says)
        if (str(key).startswith("_") or OmegaConf.is_missing(config, key)
                or OmegaConf.is_interpolation(config, key)):  # type: ignore[arg-type]
            continue
        value = config[key]
        if isinstance(value, DictConfig):
            check(value)
        elif str(key) in hints and not _fits(value, hints[str(key)]):
            name = f"{compat.full_key(config)}.{key!s}".lstrip(".")
            wanted = " or ".join(_NAMES[t] for t in hints[str(key)])
            raise UserError(f"{name}={value}: expected {wanted} ({target.__name__} takes {key!s} as such)")


def check_top_level(cfg: DictConfig, *keys: str) -> None:
    """Stop with one line when a top-level option that must be an integer is not one."""
    for key in keys:
        value = cfg.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise UserError(f"{key}={value}: expected an integer, e.g. {key}=1")


def check_max_epochs(trainer_cfg: DictConfig) -> None:
    """Stop in one line on a `trainer.max_epochs` that trains nothing (Lightning takes 0 and reports the untrained
    model as a finished run)."""
    epochs = trainer_cfg.get("max_epochs")
    if isinstance(epochs, int) and epochs < 1 and epochs != -1 and not trainer_cfg.get("fast_dev_run"):
        raise UserError(f"trainer.max_epochs={epochs} trains nothing: pass trainer.max_epochs=1 or more "
                        "(or -1 for no limit, with trainer.max_steps)")


def _hints(target: Any) -> dict[str, tuple[type, ...]]:
    # parameter name -> the numeric/flag types its hint allows; hints of other kinds are not checked
    # the signature's hints, resolved: a training adapter's signature is its model's (`tasks/adapters.py`)
    try:
        params = inspect.signature(target, eval_str=True).parameters
    except (AttributeError, NameError, TypeError, ValueError):  # no signature, or hints that do not resolve
        return {}
    found = {}
    for name, param in params.items():
        allowed = _simple_types(param.annotation)
        if allowed:
            found[name] = allowed
    return found


def _simple_types(hint: Any) -> tuple[type, ...]:
    # `int`, `float | None`, `Optional[bool]`: the types; anything else (str, Literal, lists, classes): ()
    members = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    members = tuple(m for m in members if m is not type(None))
    return members if members and all(m in _NAMES for m in members) else ()


def _fits(value: Any, allowed: tuple[type, ...]) -> bool:
    if value is None:  # a parameter left unset; its constructor decides
        return True
    if isinstance(value, bool):
        return bool in allowed
    if isinstance(value, int):
        return int in allowed or float in allowed
    return isinstance(value, float) and float in allowed
