"""What the training adapters share (`sequence_nets`, `qa_nets`): a tensor model's constructor as theirs, the dict
batch checked, and the state-dict keys of checkpoints saved before the model moved under the adapter.

An adapter is a plain `nn.Module` holding one tensor model of `models/` (its `tensor_model`) under one attribute;
it takes a family's dict batch and returns the `Output` the family module expects. Its constructor is the model's
(the same keyword options, so a model yaml keeps its keys and `run.build_model` its dims and `score`).
"""

from __future__ import annotations

import inspect
from typing import Any

from torch import Tensor, nn

from attnmem.models.contract import AdaptsModel

__all__ = ["batch_tensor", "constructor_of", "nest_keys", "nest_old_keys", "with_old_keys_nested"]


def constructor_of(model: type[nn.Module]) -> inspect.Signature:
    """The signature of `model`'s constructor with its type hints resolved, for an adapter's `__signature__`."""
    return inspect.signature(model, eval_str=True)


def batch_tensor(adapter: nn.Module, batch: Any, key: str, tensor_call: str) -> Tensor:
    """`batch[key]` of the training dict batch, or one line saying that a bare tensor belongs to the model."""
    if not isinstance(batch, dict):
        name = type(adapter).__name__
        raise TypeError(f"{name} takes the training dict batch {{'{key}': ...}}; call {tensor_call} for tensors")
    return batch[key]


def nest_keys(state: dict[str, Any], prefix: str, name: str) -> None:
    """Move the keys under `prefix` that are not under `prefix + name.` there, in place (`A.w` -> `name.A.w`)."""
    for key in [k for k in state if k.startswith(prefix) and not k.startswith(f"{prefix}{name}.")]:
        state[f"{prefix}{name}.{key[len(prefix):]}"] = state.pop(key)


def nest_old_keys(adapter: nn.Module, name: str) -> None:
    """Load the state dicts saved before the model moved under `adapter.<name>` (`A.weight`, now `name.A.weight`)."""

    def hook(module: nn.Module, state: dict[str, Any], prefix: str, *_: Any) -> None:
        nest_keys(state, prefix, name)

    adapter.register_load_state_dict_pre_hook(hook)


def with_old_keys_nested(state: dict[str, Any], module: nn.Module) -> dict[str, Any]:
    """A copy of the weights `state` of `module` with the keys its adapters' models had before they moved under
    them nested as `load_state_dict` nests them (for comparing a checkpoint's keys with the module's)."""
    state = dict(state)
    for prefix, sub in module.named_modules():
        model = sub.tensor_model if isinstance(sub, AdaptsModel) else None  # an adapter declares its model's class
        names = [n for n, child in sub.named_children() if model is not None and type(child) is model]
        if names:
            nest_keys(state, f"{prefix}." if prefix else "", names[0])
    return state
