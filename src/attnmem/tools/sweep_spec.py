"""W&B sweep files (`sweeps/*.yaml`): read and check them, and expand them into jobs as `wandb agent` would."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import yaml
from wandb.sdk.launch.sweeps.utils import create_sweep_command_args

from attnmem.core.errors import UserError

TOP_KEYS = {
    "program",
    "method",
    "metric",
    "parameters",
    "command",
    "name",
    "description",
    "project",
    "entity",
    "run_cap",
    "early_terminate",
}
PARAM_KEYS = {"value", "values", "distribution", "min", "max", "probabilities", "mu", "sigma"}
DISTRIBUTIONS = {"uniform", "int_uniform", "log_uniform_values", "normal", "categorical", "constant"}


def load_spec(path: Path) -> dict[str, Any]:
    """Read a sweep file and check its format; a mistake stops with one line naming the file and key."""
    if not path.is_file():
        raise UserError(f"{path}: no such sweep file")
    try:
        spec = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise UserError(f"{path}: not valid YAML: {' '.join(str(err).split())}") from None
    unknown = sorted(set(spec) - TOP_KEYS)
    if unknown:
        raise UserError(f"{path}: unknown key '{unknown[0]}' (a W&B sweep file has {', '.join(sorted(TOP_KEYS))})")
    for key in ("program", "method", "metric", "parameters"):
        if key not in spec:
            raise UserError(f"{path}: missing key '{key}'")
    if spec["method"] not in ("grid", "random", "bayes"):
        raise UserError(f"{path}: method: '{spec['method']}' is not grid, random or bayes")
    if spec["method"] != "grid" and not isinstance(spec.get("run_cap"), int):
        raise UserError(f"{path}: run_cap: method {spec['method']} needs an integer run_cap (the number of runs)")
    metric = spec["metric"]
    if not isinstance(metric, dict) or "name" not in metric or metric.get("goal") not in ("minimize", "maximize"):
        raise UserError(f"{path}: metric: needs a name and goal: minimize | maximize")
    if "${args_no_hyphens}" not in spec.get("command", ["${args_no_hyphens}"]):
        raise UserError(f"{path}: command: must pass ${{args_no_hyphens}} (Hydra overrides key=value)")
    for name, param in (spec["parameters"] or {}).items():
        _check_param(path, spec["method"], name, param)
    spec.setdefault("name", path.stem)
    return spec


def _check_param(path: Path, method: str, name: str, param: Any) -> None:
    where = f"{path}: parameters.{name}"
    if not isinstance(param, dict) or not param:
        raise UserError(f"{where}: expected a mapping such as {{values: [...]}} or {{value: x}}")
    unknown = sorted(set(param) - PARAM_KEYS)
    if unknown:
        raise UserError(f"{where}: unknown key '{unknown[0]}' (one of {', '.join(sorted(PARAM_KEYS))})")
    if "values" in param and (not isinstance(param["values"], list) or not param["values"]):
        raise UserError(f"{where}.values: an empty or missing value list")
    values = param.get("values", [param.get("value")] if "value" in param else [])
    if any(v is None for v in values):
        raise UserError(f"{where}: a null value reaches Hydra as the string 'None'; write \"null\" (quoted)")
    dist = param.get("distribution")
    if dist is not None and dist not in DISTRIBUTIONS:
        raise UserError(f"{where}.distribution: '{dist}' is not one of {', '.join(sorted(DISTRIBUTIONS))}")
    if not values and dist is None:
        raise UserError(f"{where}: needs value, values, or a distribution with min and max")
    if not values and ("min" not in param or "max" not in param) and dist != "normal":
        raise UserError(f"{where}: distribution {dist} needs min and max")
    if method == "grid" and not values:
        raise UserError(f"{where}: a grid sweep takes value or values, not a distribution")


def args_no_hyphens(point: dict[str, Any]) -> list[str]:
    """The Hydra overrides `wandb agent` passes for one point of a sweep (W&B's own formatting)."""
    return create_sweep_command_args({"args": {k: {"value": v} for k, v in point.items()}})["args_no_hyphens"]


def grid_points(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Every point of the grid, the first parameter varying slowest."""
    points: list[dict[str, Any]] = [{}]
    for name, param in spec["parameters"].items():
        values = param["values"] if "values" in param else [param["value"]]
        points = [{**p, name: v} for p in points for v in values]
    return points


def random_points(spec: dict[str, Any], seed: int) -> list[dict[str, Any]]:
    """`run_cap` points drawn from the parameters' values or distributions by a generator seeded with `seed`."""
    rng = random.Random(seed)
    return [{name: _draw(rng, param) for name, param in spec["parameters"].items()} for _ in range(spec["run_cap"])]


def _draw(rng: random.Random, param: dict[str, Any]) -> Any:
    if "value" in param:
        return param["value"]
    if "values" in param:
        return rng.choices(param["values"], weights=param.get("probabilities"))[0]
    dist, low, high = param["distribution"], param.get("min"), param.get("max")
    if dist == "int_uniform":
        return rng.randint(low, high)
    if dist == "log_uniform_values":
        return math.exp(rng.uniform(math.log(low), math.log(high)))
    if dist == "normal":
        return rng.gauss(param.get("mu", 0.0), param.get("sigma", 1.0))
    return rng.uniform(low, high)


def first_point(spec: dict[str, Any]) -> dict[str, Any]:
    """Each parameter's fixed value, first value, or lower bound (to check names without drawing)."""
    return {
        k: p["value"] if "value" in p else p["values"][0] if "values" in p else p.get("min", p.get("mu", 0.0))
        for k, p in spec["parameters"].items()
    }


def optuna_overrides(spec: dict[str, Any]) -> list[str]:
    """The parameters as Hydra Optuna sweeper search-space overrides (choice / interval / tag(log, ...))."""
    found = []
    for name, param in spec["parameters"].items():
        if "value" in param:
            found += args_no_hyphens({name: param["value"]})
        elif "values" in param:
            found.append(f"{name}=choice({', '.join(str(v) for v in param['values'])})")
        else:
            low, high, dist = param.get("min"), param.get("max"), param["distribution"]
            space = {
                "uniform": f"interval({low}, {high})",
                "int_uniform": f"int(interval({low}, {high}))",
                "log_uniform_values": f"tag(log, interval({low}, {high}))",
            }.get(dist)
            if space is None:
                raise UserError(f"parameters.{name}: distribution {dist} has no Optuna counterpart here")
            found.append(f"{name}={space}")
    return found
