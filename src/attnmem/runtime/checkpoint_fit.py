"""Does a checkpoint fit the data and model that its run's config builds? One line saying how it does not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from attnmem.core.errors import UserError
from attnmem.tasks.adapters import with_old_keys_nested
from attnmem.tasks.hooks import MODEL_KEY

_SHOWN = 3  # keys named per kind of mismatch; the rest are counted


def check_data(state: dict[str, Any], datamodule: Any, ckpt: Path, run_cfg: Path) -> None:
    """Stop when the checkpoint holds another datamodule's state than the one the run's config builds."""
    name = type(datamodule).__qualname__
    others = [k for k in state if k.endswith("DataModule") and k != name]
    if name not in state and others:
        raise _mismatch(ckpt, run_cfg, f"it was trained on {others[0]} data, the config builds {name}")


def check_weights(state: dict[str, Any], module: torch.nn.Module, ckpt: Path, run_cfg: Path) -> None:
    """Stop when the checkpoint's weights do not fit the model the run's config builds (names and shapes)."""
    want = module.state_dict()
    have = with_old_keys_nested(state.get("state_dict") or {}, module)  # a model saved before its adapter held it
    missing = [k for k in want if k not in have]
    unexpected = [k for k in have if k not in want]
    shapes = [
        f"{k} {_shape(have[k])} vs {_shape(v)}"
        for k, v in want.items()
        if k in have and isinstance(v, torch.Tensor) and _shape(have[k]) != _shape(v)
    ]
    if missing or unexpected or shapes:
        parts = [_brief("missing", missing), _brief("unexpected", unexpected), _brief("shapes differ", shapes)]
        detail = "; ".join(p for p in parts if p)
        model = type(module.net).__name__
        # a checkpoint of attnmem >= 0.2 names the model its weights belong to
        trained = f" but of model {state[MODEL_KEY].rsplit('.', 1)[-1]}" if state.get(MODEL_KEY) else ""
        raise _mismatch(ckpt, run_cfg, f"its weights are not those of the config's model {model}{trained} ({detail})")


def _mismatch(ckpt: Path, run_cfg: Path, why: str) -> UserError:
    return UserError(
        f"ckpt_path={ckpt} does not fit the run's config {run_cfg}: {why}; evaluate a checkpoint with the "
        "config of the run that wrote it (its <run>/.hydra/config.yaml beside <run>/checkpoints/)"
    )


def _brief(kind: str, keys: list[str]) -> str:
    if not keys:
        return ""
    more = f" and {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else ""
    return f"{kind}: {', '.join(keys[:_SHOWN])}{more}"


def _shape(value: Any) -> str:
    return "x".join(map(str, value.shape)) if isinstance(value, torch.Tensor) else type(value).__name__
