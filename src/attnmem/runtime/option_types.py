"""Config values against the type hints of the constructor they are passed to, checked before instantiation.

`check_run` checks a training run's options before anything is built or written: the top-level integers, every
`_target_` (a misspelt class lists the near names), and the optimizer, scheduler and trainer partials (types,
finite and non-negative numbers, and a trial construction of the optimizer and scheduler on one dummy weight).
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import math
import types
import typing
import warnings
from typing import Any

from hydra.errors import InstantiationException
from hydra.utils import get_object, instantiate
from omegaconf import DictConfig, ListConfig, OmegaConf

from attnmem.core import compat
from attnmem.core.errors import UserError

# the hints checked: numbers and flags, which a typo on the command line turns into a string
_NAMES = {bool: "a boolean (true or false)", int: "an integer", float: "a number"}
# the partials a run calls with what only it knows (the parameters, the optimizer, the callbacks)
PARTIALS = ("optimizer", "scheduler", "trainer")
# options of those partials that a constructor takes below 0 without a word (Lightning's gradient_clip_val=-1 turns
# clipping off, and with task.clip_per_weight reverses the gradient), with the fix the refusal names
NON_NEGATIVE = {
    "lr": "pass a learning rate such as optimizer.lr=0.001",
    "weight_decay": "pass optimizer.weight_decay=0 for none",
    "eps": "pass a small positive number such as optimizer.eps=1e-8",
    "momentum": "pass optimizer.momentum=0 for none",
    "gradient_clip_val": "pass trainer.gradient_clip_val=null for no clipping, or a bound such as 1.0",
}
SEEDS = (0, 2**32 - 1)  # what numpy, and so Lightning's seed_everything, takes


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
        elif str(key) in hints and (not _fits(value, *hints[str(key)]) or _nan(value)):
            name = f"{compat.full_key(config)}.{key!s}".lstrip(".")
            wanted = "a finite number, not nan" if _nan(value) else _wanted(*hints[str(key)])
            raise UserError(f"{name}={value}: expected {wanted} ({target.__name__} takes {key!s} as such)")


def check_run(cfg: DictConfig) -> None:
    """Stop with one line on a training run's option that its constructor would refuse late, or take silently."""
    check_top_level(cfg, "seed", "threads")
    if not SEEDS[0] <= cfg.seed <= SEEDS[1]:
        raise UserError(f"seed={cfg.seed}: expected an integer from {SEEDS[0]} to {SEEDS[1]}, e.g. seed=1")
    check_targets(cfg)
    for key in PARTIALS:
        if isinstance(cfg.get(key), DictConfig):
            check(cfg[key])
            _check_numbers(cfg[key], key)
    _try_partials(cfg)


def check_targets(config: Any) -> None:
    """Stop with one line on a `_target_` under `config` that names no class or function, listing the near names."""
    if not isinstance(config, DictConfig):
        return
    for key in config:
        if OmegaConf.is_interpolation(config, key) or OmegaConf.is_missing(config, key):  # type: ignore[arg-type]
            continue
        value = config[key]
        if key == "_target_" and isinstance(value, str) and (why := _missing_target(value)):
            raise UserError(f"{compat.full_key(config)}._target_={value}: {why}".lstrip("."))
        check_targets(value)


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


def _hints(target: Any) -> dict[str, tuple[tuple[type, ...], int]]:
    # parameter name -> (the numeric/flag types its hint allows, 0 for one value, n for a tuple of n, -1 for a tuple
    # of any length); hints of other kinds are not checked
    # the signature's hints, resolved: a training adapter's signature is its model's (`tasks/adapters.py`)
    try:
        params = inspect.signature(target, eval_str=True).parameters
    except (AttributeError, NameError, TypeError, ValueError):  # no signature, or hints that do not resolve
        return {}
    found = {}
    for name, param in params.items():
        allowed = _simple_types(param.annotation)
        if allowed:
            found[name] = (allowed, 0)
        elif items := _tuple_items(param.annotation):
            found[name] = items
    return found


def _members(hint: Any) -> tuple[Any, ...]:
    # a union's members less None; a tensor is an alternative to a number (torch.optim's `lr: float | Tensor`)
    members = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    members = tuple(m for m in members if m is not type(None))
    numbers = tuple(m for m in members if not (isinstance(m, type) and m.__qualname__ == "Tensor"
                                               and m.__module__ == "torch"))
    return numbers if numbers else members


def _simple_types(hint: Any) -> tuple[type, ...]:
    # `int`, `float | None`, `Optional[bool]`: the types; anything else (str, Literal, lists, classes): ()
    members = _members(hint)
    return members if members and all(m in _NAMES for m in members) else ()


def _tuple_items(hint: Any) -> tuple[tuple[type, ...], int] | None:
    # `tuple[float, float]`, `tuple[int, ...]` (or None): the items' types and count (-1: any); else None
    members = _members(hint)
    if len(members) != 1 or typing.get_origin(members[0]) is not tuple:
        return None
    args = typing.get_args(members[0])
    count = -1 if len(args) == 2 and args[1] is Ellipsis else len(args)
    kinds = {_simple_types(a) for a in (args[:1] if count == -1 else args)}
    return (kinds.pop(), count) if len(kinds) == 1 and () not in kinds else None


def _wanted(allowed: tuple[type, ...], count: int) -> str:
    each = " or ".join(_NAMES[t] for t in allowed)
    return each if count == 0 else f"a list of {count if count > 0 else 'any number of'} items, each {each}"


def _fits(value: Any, allowed: tuple[type, ...], count: int = 0) -> bool:
    if value is None:  # a parameter left unset; its constructor decides
        return True
    if count:
        return isinstance(value, ListConfig) and count in (-1, len(value)) and all(_fits(v, allowed) for v in value)
    if isinstance(value, bool):
        return bool in allowed
    if isinstance(value, int):
        return int in allowed or float in allowed
    return isinstance(value, float) and float in allowed

def _missing_target(path: str) -> str | None:
    # what in `path` does not exist, with the near names where it should be; None when it resolves, or when a
    # module fails on a dependency of its own (an extra that is not installed: `extras` says which)
    parts = path.split(".")
    found: Any = None
    for i, part in enumerate(parts):
        prefix = ".".join(parts[: i + 1])
        inner = getattr(found, part, None) if i else None  # a module's attribute, or a class's
        if inner is None and (i == 0 or isinstance(found, types.ModuleType)):
            try:
                inner = importlib.import_module(prefix)
            except ModuleNotFoundError as err:
                if err.name != prefix:
                    return None
            except (ImportError, ValueError):
                return None
        if inner is None:
            where = ".".join(parts[:i])
            names = [n for n in dir(found) if not n.startswith("_")] if i else []
            near = [f"{where}.{n}" for n in difflib.get_close_matches(part, names, n=3, cutoff=0.6)]
            hint = f"did you mean {' or '.join(near)}?" if near else "check the spelling"
            return f"{where} has no {part}; {hint}" if i else f"no module named {part}; {hint}"
        found = inner
    return None


def _nan(value: Any) -> bool:
    # nan passes every comparison a constructor makes (`lr < 0` is False) and then poisons every step
    values = list(value) if isinstance(value, ListConfig) else [value]
    return any(isinstance(v, float) and math.isnan(v) for v in values)


def _check_numbers(config: DictConfig, key: str) -> None:
    # non-finite numbers mean nothing to an optimizer, scheduler or trainer; some options must not be negative
    for option in config:
        name = str(option)
        if name.startswith("_") or OmegaConf.is_interpolation(config, name):
            continue
        value = config[name]
        values = list(value) if isinstance(value, ListConfig) else [value]
        numbers = [v for v in values if isinstance(v, float | int) and not isinstance(v, bool)]
        if any(not math.isfinite(v) for v in numbers):
            raise UserError(f"{key}.{name}={value}: expected a finite number, not nan or inf")
        if name in NON_NEGATIVE and any(v < 0 for v in numbers):
            raise ValueError(f"{key}.{name} must be >= 0, got {value}: {NON_NEGATIVE[name]}")


def _try_partials(cfg: DictConfig) -> None:
    # the optimizer and scheduler are built only once training starts, after the run's files are written: build
    # them now on one dummy weight, so that what their constructors refuse stops the run before anything is written
    import torch  # here: the type checks above stay importable without torch

    optimizer = _call(cfg, "optimizer", params=[torch.nn.Parameter(torch.zeros(1))])
    if optimizer is not None:
        _call(cfg, "scheduler", optimizer=optimizer)


def _call(cfg: DictConfig, key: str, **given: Any) -> Any:
    # the partial `cfg[key]` called with `given`; None when it is not a partial
    if not isinstance(cfg.get(key), DictConfig) or not cfg[key].get("_partial_"):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return instantiate(cfg[key])(**given)
    except InstantiationException as err:
        raise UserError(f"{key} ({cfg[key]._target_}): {_one_line(err.__cause__ or err)}") from None
    except (TypeError, ValueError) as err:
        raise UserError(f"{key} ({cfg[key]._target_}): {_one_line(err)}") from None


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())
