"""The command-line guard: user mistakes end a run with one line, not a traceback.

Importing this module stays light (no torch, no Lightning): `--help`, `--cfg job` and the errors Hydra finds
while composing print without them; `guarded` imports the run when there is one to run.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.errors import CompactHydraException, InstantiationException, MissingConfigException, OverrideParseException
from hydra.types import RunMode
from omegaconf import DictConfig
from omegaconf.errors import MissingMandatoryValue

from attnmem.core.atomic import disk_fault
from attnmem.core.errors import UserError
from attnmem.runtime import extras, run_dir_guard

# the user's HYDRA_FULL_ERROR=1 asks for tracebacks; `entry` sets that variable for Hydra, so this one keeps theirs
FULL_ERROR = "ATTNMEM_FULL_ERROR"
# conf/hydra/launcher/*.yaml set this project's defaults on the launcher plugins' configs of the same names;
# Hydra checks them against the plugins' schemas (wanted: a typo fails) and warns that it does so
warnings.filterwarnings("ignore", message=r"\s*'hydra/launcher/\w+' is validated against ConfigStore schema")


def entry(main: Callable[[], Any]) -> Any:
    """Call a `@hydra.main` function; Hydra's config errors (unknown option, key or syntax) print as one line."""
    os.environ.setdefault(FULL_ERROR, os.environ.get("HYDRA_FULL_ERROR", "0"))
    if os.environ[FULL_ERROR] == "1":
        return main()
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra raises its errors instead of printing them over many lines
    try:
        return main()
    except CompactHydraException as err:
        print(f"error: {one_line(err)}", file=sys.stderr)
        raise SystemExit(1) from None
    except RuntimeError as err:  # a Hydra plugin of an extra that is not installed (hydra/launcher=joblib)
        if (text := extras.missing(err)) is None:
            raise
        print(f"error: {text}", file=sys.stderr)
        raise SystemExit(1) from None


def one_line(err: CompactHydraException) -> str:
    """Hydra's message on one line; an unknown group option lists the group's options."""
    if isinstance(err, MissingConfigException) and err.missing_cfg_file and err.options:
        group, _, name = err.missing_cfg_file.rpartition("/")
        if plugin := extras.option(group, name):
            return plugin
        return (
            f"{group}={name}: no such option; choose {group}={'|'.join(err.options)}, or add {group}/{name}.yaml "
            "to a folder of yours and pass 'hydra.searchpath=[file://FOLDER]'"
        )
    text = " ".join(str(err).split())
    if isinstance(err, OverrideParseException):
        return f"{err.override}: {text}"
    cause = err.__cause__
    return f"{text} ({' '.join(str(cause).split()[:12])})" if cause and str(cause) not in str(err) else text


def guarded(cfg: DictConfig, entry: str) -> Any:
    """Run `attnmem.runtime.run.<entry>(cfg)`; print a user error as one line and exit 1 (a multirun goes on)."""
    from lightning.fabric.utilities.exceptions import MisconfigurationException

    from attnmem.runtime import distributed, run  # torch and Lightning: only once a run starts

    _log_once()
    try:
        with distributed.job_scope():
            return disk_faults(lambda: getattr(run, entry)(cfg))
    except (UserError, ValueError, MissingMandatoryValue, ImportError, CompactHydraException,
            MisconfigurationException) as err:
        # a missing module of an extra (logger=wandb without W&B) may come wrapped in Hydra's instantiation error
        text = extras.missing(err) or refused_option(err)
        if os.environ.get(FULL_ERROR, os.environ.get("HYDRA_FULL_ERROR")) == "1" or (
            text is None and isinstance(err, (ImportError, CompactHydraException))
        ):
            raise
        if isinstance(err, MissingMandatoryValue):  # a `???` in the yaml that the command line did not fill
            text = f"{err.full_key} needs a value (??? in the config): pass {err.full_key}=..."
        print(f"error: {text or ' '.join(str(err).split())}", file=sys.stderr)
        if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
            return None
        if HydraConfig.initialized():
            run_dir_guard.discard_refused(Path(HydraConfig.get().runtime.output_dir))
        raise SystemExit(1) from None


def refused_option(err: BaseException) -> str | None:
    """On one line, a constructor's refusal of its options: Lightning's `MisconfigurationException`, or one that
    Hydra's instantiation wraps (that, or a `TypeError` such as an unexpected keyword); None for other errors."""
    cause = err.__cause__ if isinstance(err, InstantiationException) else err
    if type(cause).__name__ == "MisconfigurationException" or (
        isinstance(err, InstantiationException) and isinstance(cause, TypeError)
    ):
        return " ".join(str(err).split())
    return None


def disk_faults(call: Callable[[], Any]) -> Any:
    """`call()`, a write that a full or read-only disk refused becoming one line naming the file and the fix."""
    try:
        return call()
    except OSError as err:
        if (fault := disk_fault(err)) is None:
            raise
        raise fault from None


def _log_once() -> None:
    # Hydra's job logging (the console and the run's train.log) is on the root logger before Lightning is imported,
    # so the console handler `import lightning` gives its own logger printed each of its records a second time
    lightning = logging.getLogger("lightning")
    if logging.getLogger().handlers and lightning.propagate:
        for handler in [h for h in lightning.handlers if type(h) is logging.StreamHandler]:
            lightning.removeHandler(handler)
