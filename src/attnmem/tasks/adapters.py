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

__all__ = ["batch_tensor", "constructor_of", "nest_old_keys"]


def constructor_of(model: type[nn.Module]) -> inspect.Signature:
    """The signature of `model`'s constructor with its type hints resolved, for an adapter's `__signature__`."""
    return inspect.signature(model, eval_str=True)


def batch_tensor(adapter: nn.Module, batch: Any, key: str, tensor_call: str) -> Tensor:
    """`batch[key]` of the training dict batch, or one line saying that a bare tensor belongs to the model."""
    if not isinstance(batch, dict):
        name = type(adapter).__name__
        raise TypeError(f"{name} takes the training dict batch {{'{key}': ...}}; call {tensor_call} for tensors")
    return batch[key]


def nest_old_keys(adapter: nn.Module, name: str) -> None:
    """Load the state dicts saved before the model moved under `adapter.<name>` (keys `A.weight`, now `name.A.weight`)."""

    def hook(module: nn.Module, state: dict[str, Any], prefix: str, *_: Any) -> None:
        for key in [k for k in state if k.startswith(prefix) and not k.startswith(f"{prefix}{name}.")]:
            state[f"{prefix}{name}.{key[len(prefix):]}"] = state.pop(key)

    adapter.register_load_state_dict_pre_hook(hook)
