"""An optional dependency that is not installed stops a run in one line naming the extra that installs it
(`pip install attnmem` holds the layers only; `attnmem[train]` the command line; wandb, tensorboard, sweeps,
vision the rest)."""

from __future__ import annotations

import sys

import pytest
from conftest import FAST
from hydra.errors import InstantiationException, MissingConfigException

from attnmem.core.errors import UserError
from attnmem.runtime import cli, extras


def raised_from(outer: BaseException, inner: BaseException) -> BaseException:
    """`outer` raised from `inner`, as Hydra's instantiate wraps what a target raises."""
    try:
        try:
            raise inner
        except BaseException as err:
            raise outer from err
    except BaseException as wrapped:
        return wrapped


def test_a_missing_module_is_named_with_its_extra_through_hydras_wrapping():
    err = raised_from(InstantiationException("Error in call to target"), ModuleNotFoundError("no", name="wandb.sdk"))
    assert extras.missing(err) == "logger=wandb needs wandb, which is not installed: pip install 'attnmem[wandb]'"
    lightning = ModuleNotFoundError("Neither `tensorboard` nor `tensorboardX` is available. Try `pip install`ing either.")
    assert extras.missing(lightning) == (
        "logger=tensorboard needs tensorboard, which is not installed: pip install 'attnmem[tensorboard]'"
    )
    plugin = RuntimeError("Unknown plugin class : 'hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher'")
    assert extras.missing(plugin) == ("hydra/launcher=joblib (--launcher joblib) needs hydra-joblib-launcher, which is "
                                      "not installed: pip install 'attnmem[sweeps]'")
    assert extras.missing(ModuleNotFoundError("x", name="something_else")) is None
    assert extras.missing(ValueError("wandb")) is None


def test_an_option_only_a_missing_plugin_brings_names_the_extra():
    err = MissingConfigException("missing", missing_cfg_file="hydra/sweeper/optuna", options=["basic"])
    assert cli.one_line(err) == ("hydra/sweeper=optuna (hparams_search=, bayes sweeps) needs hydra-optuna-sweeper, "
                                 "which is not installed: pip install 'attnmem[sweeps]'")
    assert extras.option("model", "optuna") is None


def test_logger_wandb_without_wandb_is_one_line(compose_cfg, monkeypatch, capsys):
    cfg = compose_cfg(*FAST, "logger=wandb", "debug=fdr", "print_config=none")
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ModuleNotFoundError, as when missing
    monkeypatch.setenv("WANDB_MODE", "offline")  # a local mode, as an earlier test may leave it, changes nothing
    with pytest.raises(SystemExit) as info:
        cli.guarded(cfg, "train")
    err = capsys.readouterr().err.strip().splitlines()
    assert info.value.code == 1 and err[-1] == (
        "error: logger=wandb needs wandb, which is not installed: pip install 'attnmem[wandb]'"
    ), err


def test_the_sweep_runner_checks_its_plugin_before_any_job(monkeypatch):
    extras.require("hydra_joblib_launcher")  # installed with the dev extra
    monkeypatch.setattr(extras.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UserError, match=r"^hydra/launcher=joblib \(--launcher joblib\) needs hydra-joblib-launcher, "
                                        r"which is not installed: pip install 'attnmem\[sweeps\]'$"):
        extras.require("hydra_joblib_launcher")
