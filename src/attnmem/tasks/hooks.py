"""What a checkpoint records beside the weights: its keys, and the helpers that fill and read them.

`attnmem.tasks.family.FamilyModule` (the base class of the nine family modules, where Lightning's hooks are written
once) calls them in its `on_save_checkpoint` / `on_load_checkpoint`, as `Replicas` does for each of its members.
"""

from __future__ import annotations

from typing import Any, cast

from torch import Tensor, nn

from attnmem.core import dims
from attnmem.tasks.metrics import Sums

MODEL_KEY = "attnmem_model"  # the checkpoint's record of the model class its weights belong to
TRAIN_KEY = "attnmem_train_metrics"  # the checkpoint's record of the last logged train/ metrics
DIMS_KEY = "attnmem_dims"  # the checkpoint's record of the data sizes the model was built with (core.dims.to_record)
SUMS_KEY = "attnmem_sums"  # the checkpoint's record of the module's running sums (an epoch may be under way)


def record_model(net: nn.Module, checkpoint: dict[str, Any], datamodule: Any) -> None:
    """Record the class of `net` and the data sizes it was built with (`load_model` needs no data)."""
    checkpoint[MODEL_KEY] = f"{type(net).__module__}.{type(net).__qualname__}"
    if datamodule is not None:
        checkpoint[DIMS_KEY] = dims.to_record(datamodule.dims)


def sums_state(module: nn.Module, *, synced: bool = False) -> dict[str, dict[str, Tensor]]:
    """Every `Sums` of the module by name, its states copied (`synced`: reduced over all processes). A checkpoint
    written at validation's end comes while the training epoch's sums are still to be logged."""
    states = {}
    for name, m in module.named_modules():
        if isinstance(m, Sums):
            with m.sync_context(should_sync=synced):
                # a Sums registers tensor states only (no list states)
                states[name] = {state: cast(Tensor, value).clone() for state, value in m.metric_state.items()}
    return states


def load_sums(module: nn.Module, saved: dict[str, dict[str, Tensor]]) -> None:
    """Give each `Sums` of the module the states `sums_state` recorded under its name."""
    for name, m in module.named_modules():
        for state, value in saved.get(name, {}).items() if isinstance(m, Sums) else ():
            setattr(m, state, value.to(getattr(m, state).device))
