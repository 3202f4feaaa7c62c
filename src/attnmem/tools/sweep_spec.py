"""W&B sweep files (`sweeps/*.yaml`): read and check them against W&B's sweep-configuration schema, and expand
them into jobs as `wandb agent` would."""

from __future__ import annotations

import math
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import yaml

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
    "controller",
    "apiVersion",
    "kind",
}
LAUNCH_KEYS = {"job", "image_uri", "scheduler", "metrics"}  # W&B Launch and custom schedulers only
# a metric's keys: the values W&B allows for each (None: any number)
METRIC_KEYS = {
    "name": None,
    "goal": ("minimize", "maximize"),
    "target": None,
    "impute": ("latest", "best", "worst"),
    "impute_while_running": ("latest", "best", "worst", "false"),
}
STRINGS = ("program", "name", "description", "project", "entity")
# each distribution W&B knows: the keys it needs, and those it may have with W&B's defaults
DISTRIBUTIONS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "constant": (("value",), {}),
    "categorical": (("values",), {}),
    "categorical_w_probabilities": (("values", "probabilities"), {}),
    "int_uniform": (("min", "max"), {}),
    "uniform": (("min", "max"), {}),
    "q_uniform": (("min", "max"), {"q": 1.0}),
    "log_uniform_values": (("min", "max"), {}),
    "inv_log_uniform_values": (("min", "max"), {}),
    "q_log_uniform_values": (("min", "max"), {"q": 1.0}),
    "normal": ((), {"mu": 0.0, "sigma": 1.0}),
    "q_normal": ((), {"mu": 0.0, "sigma": 1.0, "q": 1.0}),
    "log_normal": ((), {"mu": 0.0, "sigma": 1.0}),
    "q_log_normal": ((), {"mu": 0.0, "sigma": 1.0, "q": 1.0}),
    "beta": ((), {"a": 1.0, "b": 1.0}),
    "q_beta": ((), {"a": 1.0, "b": 1.0, "q": 1.0}),
}
PARAM_KEYS = {"distribution"} | {k for need, may in DISTRIBUTIONS.values() for k in (*need, *may)}
# W&B refuses its first log distributions (bounds given as logs) and names their successors
DEPRECATED = {k: f"{k}_values" for k in ("log_uniform", "inv_log_uniform", "q_log_uniform")}
GRID = ("constant", "categorical", "int_uniform", "q_uniform")  # W&B's grid search takes these only
OPTUNA = {  # the local bayes runner is Hydra's Optuna sweeper
    "uniform": "interval({min}, {max})",
    "int_uniform": "int(interval({min}, {max}))",
    "log_uniform_values": "tag(log, interval({min}, {max}))",
}
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")  # W&B's pattern for a parameter name
_ABSENT = object()  # the value of a key one of two compared mappings lacks


def load_spec(path: Path) -> dict[str, Any]:
    """Read a sweep file and check it as W&B does; a mistake stops with one line naming the file and key."""
    if not path.is_file():
        raise UserError(f"{path}: no such sweep file")
    try:
        spec = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise UserError(f"{path}: not valid YAML: {' '.join(str(err).split())}") from None
    if not isinstance(spec, dict):
        raise UserError(f"{path}: expected a mapping of sweep keys (program, method, parameters, ...)")
    if launch := sorted(set(spec) & LAUNCH_KEYS):
        raise UserError(f"{path}: {launch[0]}: for W&B Launch only; the local runner runs program (grid|random|bayes)")
    if unknown := sorted(set(spec) - TOP_KEYS):
        raise UserError(f"{path}: unknown key '{unknown[0]}' (a W&B sweep file has {', '.join(sorted(TOP_KEYS))})")
    for key in ("program", "method", "parameters"):
        if key not in spec:
            raise UserError(f"{path}: missing key '{key}'")
    if wrong := [k for k in STRINGS if k in spec and not isinstance(spec[k], str)]:
        raise UserError(f"{path}: {wrong[0]}: expected a string, got {spec[wrong[0]]!r}")
    if spec["method"] not in ("grid", "random", "bayes"):
        raise UserError(f"{path}: method: '{spec['method']}' is not grid, random or bayes")
    run_cap = spec.get("run_cap")
    if run_cap is not None and (not isinstance(run_cap, int) or isinstance(run_cap, bool) or run_cap < 1):
        raise UserError(f"{path}: run_cap: {run_cap!r} is not a positive integer (the most runs of the sweep)")
    if spec["method"] != "grid" and run_cap is None:
        raise UserError(f"{path}: run_cap: method {spec['method']} needs an integer run_cap (the number of runs)")
    _check_metric(path, spec)
    if "${args_no_hyphens}" not in spec.get("command", ["${args_no_hyphens}"]):
        raise UserError(f"{path}: command: must pass ${{args_no_hyphens}} (Hydra overrides key=value)")
    if not isinstance(spec["parameters"], dict) or not spec["parameters"]:
        raise UserError(f"{path}: parameters: expected a mapping of at least one parameter")
    spec["parameters"] = {k: _check_param(path, spec["method"], k, p) for k, p in spec["parameters"].items()}
    spec.setdefault("name", path.stem)
    return spec


def _check_metric(path: Path, spec: dict[str, Any]) -> None:
    if "metric" not in spec:
        if spec["method"] == "bayes":
            raise UserError(f"{path}: metric: method bayes needs a metric: {{name: val/acc, goal: maximize}}")
        return  # grid and random: the report ranks by the metric the jobs monitor (attnmem.tools.sweep)
    metric = spec["metric"]
    if not isinstance(metric, dict) or not isinstance(metric.get("name"), str):
        raise UserError(f"{path}: metric: needs a name, e.g. {{name: val/acc, goal: maximize}}")
    if unknown := sorted(set(metric) - set(METRIC_KEYS)):
        raise UserError(f"{path}: metric: unknown key '{unknown[0]}' (one of {', '.join(METRIC_KEYS)})")
    metric.setdefault("goal", "minimize")  # W&B's default
    if "target" in metric and not _is_number(metric["target"]):
        raise UserError(f"{path}: metric.target: {metric['target']!r} is not a number")
    for key, allowed in METRIC_KEYS.items():
        if allowed and key in metric and metric[key] not in allowed:
            raise UserError(f"{path}: metric.{key}: '{metric[key]}' is not {' or '.join(allowed)}")


def _check_param(path: Path, method: str, name: str, param: Any) -> dict[str, Any]:
    where = f"{path}: parameters.{name}"
    if not NAME.fullmatch(str(name)):
        raise UserError(f"{where}: W&B takes names of letters, digits, _ . - (not starting with a digit, + or ~)")
    if not isinstance(param, dict) or not param:
        raise UserError(f"{where}: expected a mapping such as {{values: [...]}} or {{value: x}}")
    if "parameters" in param:
        raise UserError(f"{where}: nested parameters reach Hydra as one dict; write each as parameters.{name}.<key>")
    if unknown := sorted(set(param) - PARAM_KEYS):
        raise UserError(f"{where}: unknown key '{unknown[0]}' (one of {', '.join(sorted(PARAM_KEYS))})")
    if "values" in param and (not isinstance(param["values"], list) or not param["values"]):
        raise UserError(f"{where}.values: an empty or missing value list")
    if any(v is None for v in param.get("values", [param.get("value", "")])):
        raise UserError(f"{where}: a null value reaches Hydra as the string 'None'; write \"null\" (quoted)")
    dist = _distribution(where, param)
    need, may = DISTRIBUTIONS[dist]
    if missing := [k for k in need if k not in param]:
        raise UserError(f"{where}: distribution {dist} needs {' and '.join(need)} (missing {missing[0]})")
    if extra := sorted(set(param) - {"distribution", *need, *may}):
        takes = ", ".join([*need, *may])
        raise UserError(f"{where}: '{extra[0]}' does not go with distribution {dist} (it takes {takes})")
    filled = {**may, **param, "distribution": dist}
    _check_numbers(where, dist, filled)
    if method == "grid" and dist not in GRID:
        raise UserError(f"{where}: a grid sweep takes value, values, or int_uniform/q_uniform bounds, not {dist}")
    if method == "bayes" and dist not in ("constant", "categorical", *OPTUNA):
        raise UserError(f"{where}: distribution {dist} has no Optuna counterpart (the local bayes runner)")
    return filled


def _distribution(where: str, param: dict[str, Any]) -> str:
    """The parameter's distribution, given or inferred as W&B infers it."""
    dist = param.get("distribution")
    if dist is not None and str(dist) in DEPRECATED:
        raise UserError(f"{where}.distribution: W&B refuses {dist} (bounds as logs): use {DEPRECATED[dist]}")
    if dist is not None and str(dist) not in DISTRIBUTIONS:
        raise UserError(f"{where}.distribution: '{dist}' is not one of {', '.join(DISTRIBUTIONS)}")
    if dist is not None:
        return str(dist)
    if "value" in param:
        return "constant"
    if "values" in param:
        return "categorical_w_probabilities" if "probabilities" in param else "categorical"
    if "min" not in param or "max" not in param:
        raise UserError(f"{where}: needs value, values, min and max, or a distribution")
    return "int_uniform" if all(_is_int(param[k]) for k in ("min", "max")) else "uniform"


def _check_numbers(where: str, dist: str, param: dict[str, Any]) -> None:
    for key in ("min", "max", "q", "mu", "sigma", "a", "b"):
        if key in param and not _is_number(param[key]):
            raise UserError(f"{where}.{key}: {param[key]!r} is not a number")
    if dist == "int_uniform" and not all(_is_int(param[k]) for k in ("min", "max")):
        raise UserError(f"{where}: int_uniform takes integer min and max, got {param['min']!r} and {param['max']!r}")
    low, high = param.get("min"), param.get("max")
    if low is not None and low >= high:
        fix = f"for one value write value: {low}" if low == high else "swap them"
        raise UserError(f"{where}: min ({low}) {'=' if low == high else '>'} max ({high}): W&B needs min < max; {fix}")
    if "log" in dist and low is not None and low <= 0:
        raise UserError(f"{where}.min: {dist} takes values > 0, got {low}")
    for key in ("q", "sigma", "a", "b"):
        if key in param and (param[key] < 0 or param[key] == 0 and key != "sigma"):
            raise UserError(f"{where}.{key}: must be {'>= 0' if key == 'sigma' else '> 0'}, got {param[key]}")
    if dist == "categorical_w_probabilities":
        probs = param["probabilities"]
        if not isinstance(probs, list) or len(probs) != len(param["values"]) or not all(map(_is_number, probs)):
            raise UserError(f"{where}.probabilities: one number per value ({len(param['values'])})")
        if min(probs) < 0 or not math.isclose(sum(probs), 1.0):
            raise UserError(f"{where}.probabilities: {probs} are not >= 0 with sum 1")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def args_no_hyphens(point: dict[str, Any]) -> list[str]:
    """The Hydra overrides `wandb agent` passes for one point of a sweep: `key=value` with Python's str() of the
    value, as W&B's `create_sweep_command_args` writes them (tests/tools/test_sweep_files.py compares the two), so the
    runner needs no W&B."""
    return [f"{key}={value}" for key, value in point.items()]


def grid_values(param: dict[str, Any]) -> list[Any]:
    """A grid parameter's values: its value(s), or its int_uniform / q_uniform bounds stepped as W&B's grid."""
    if "value" in param:
        return [param["value"]]
    if "values" in param:
        return param["values"]
    if param["distribution"] == "int_uniform":
        return list(range(param["min"], param["max"] + 1))
    return np.arange(param["min"], param["max"], param["q"]).tolist()


def grid_points(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Every point of the grid, the first parameter varying slowest."""
    points: list[dict[str, Any]] = [{}]
    for name, param in spec["parameters"].items():
        points = [{**p, name: v} for p in points for v in grid_values(param)]
    return points


def random_points(spec: dict[str, Any], seed: int) -> list[dict[str, Any]]:
    """`run_cap` points drawn from the parameters' values or distributions by a generator seeded with `seed`."""
    rng = random.Random(seed)
    return [{name: _draw(rng, param) for name, param in spec["parameters"].items()} for _ in range(spec["run_cap"])]


def _draw(rng: random.Random, param: dict[str, Any]) -> Any:
    # W&B's sampling (sweeps/params.py): q_ rounds to a multiple of q, an integer when q is one
    if "value" in param:
        return param["value"]
    if "values" in param:
        return rng.choices(param["values"], weights=param.get("probabilities"))[0]
    dist = param["distribution"].removeprefix("q_")
    if dist == "int_uniform":
        return rng.randint(param["min"], param["max"])
    draw = {  # min and max: checked present for the distributions that take them
        "uniform": lambda: rng.uniform(param["min"], param["max"]),
        "log_uniform_values": lambda: math.exp(rng.uniform(math.log(param["min"]), math.log(param["max"]))),
        "inv_log_uniform_values": lambda: math.exp(-rng.uniform(-math.log(param["max"]), -math.log(param["min"]))),
        "normal": lambda: rng.gauss(param["mu"], param["sigma"]),
        "log_normal": lambda: rng.lognormvariate(param["mu"], param["sigma"]),
        "beta": lambda: rng.betavariate(param["a"], param["b"]),
    }[dist]()
    if "q" not in param:
        return draw
    q = param["q"]
    return int(round(draw / q) * q) if isinstance(q, int) else round(draw / q) * q


def first_point(spec: dict[str, Any]) -> dict[str, Any]:
    """Each parameter's fixed or first value, or a value of its distribution (to check names without the jobs)."""
    rng = random.Random(0)
    params = spec["parameters"]
    return {k: grid_values(p)[0] if "value" in p or "values" in p else _draw(rng, p) for k, p in params.items()}


def optuna_overrides(spec: dict[str, Any]) -> list[str]:
    """The parameters as Hydra Optuna sweeper search-space overrides (choice / interval / tag(log, ...))."""
    found = []
    for name, param in spec["parameters"].items():
        if "value" in param:
            found += args_no_hyphens({name: param["value"]})
        elif "values" in param:
            found.append(f"{name}=choice({', '.join(str(v) for v in param['values'])})")
        else:
            found.append(f"{name}={OPTUNA[param['distribution']].format(**param)}")
    return found


def check_resume(
    out: Path, path: Path, saved: dict[str, Any], spec: dict[str, Any], extra: list[str], flags: dict[str, int | None]
) -> None:
    """Stop with one line when a `--resume out` command would change the sweep it resumes (`saved`, its
    `sweep.yaml`): the sweep file `path` edited since (the keys named), other overrides, another --seed or --replicas
    (`flags`: those given, else None)."""
    before = dict(saved["spec"])
    if "metric" not in spec:  # the runner filled it in from what the first job monitors
        before.pop("metric", None)
    changed = changed_keys(before, spec)
    if extra and extra != saved["overrides"]:
        changed.append(f"overrides {' '.join(extra)} (it ran with {' '.join(saved['overrides']) or 'none'})")
    given = {flag: value for flag, value in flags.items() if value is not None}
    for flag, value in given.items():
        if value != saved.get(flag.removeprefix("--"), value):  # a sweep.yaml older than the record of --replicas
            changed.append(f"{flag} {value} (it ran with {flag} {saved[flag.removeprefix('--')]})")
    if changed:
        new = " ".join([str(path), *extra, *(f"{flag} {value}" for flag, value in given.items())])
        raise UserError(
            f"--resume {out}: this command changes the sweep it resumes ({'; '.join(changed)}), and a resumed sweep "
            f"runs only the jobs saved in its sweep.yaml: to resume it, give {saved['file']} as it was, without other "
            f"overrides, --seed or --replicas; to run the change, start a new sweep: python -m attnmem.tools.sweep "
            f"{new} (without --resume)"
        )


def changed_keys(before: Any, after: Any, prefix: str = "") -> list[str]:
    """The dotted keys whose values differ between two nested mappings (a key in one of them only counts)."""
    if not (isinstance(before, dict) and isinstance(after, dict)):
        return [prefix.removesuffix(".") or "the whole file"] if before != after else []
    keys = [*before, *(k for k in after if k not in before)]
    return [c for k in keys for c in changed_keys(before.get(k, _ABSENT), after.get(k, _ABSENT), f"{prefix}{k}.")]
