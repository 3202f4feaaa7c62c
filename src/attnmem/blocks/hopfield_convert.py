"""`from_hflayers_state_dict`: the weights of an `hflayers` Hopfield module as a state dict of attnmem's same layer.

hflayers keeps the input projections in one `in_proj_weight` (rows W_Q; W_K; W_V, the static ones left out)
or as `q_proj_weight`, `k_proj_weight`, `v_proj_weight` when the widths differ, their biases in one
`in_proj_bias`; attnmem keeps one `nn.Linear` each. Nothing of hflayers is imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from torch import Tensor, nn

if TYPE_CHECKING:
    from attnmem.blocks.hopfield_layer import Hopfield

__all__ = ["from_hflayers_state_dict"]

_LEARNED = ("pooling_weights", "lookup_weights", "target_weights")


def from_hflayers_state_dict(state_dict: dict[str, Tensor], module: nn.Module) -> dict[str, Tensor]:
    """An hflayers module's weights as the state dict of `module`; load it with `load_state_dict`.

    `module` is a `Hopfield`, `HopfieldPooling` or `HopfieldLayer` built with the same arguments as the hflayers
    module.

    Args:
        state_dict: `hflayers.Hopfield(...).state_dict()` (or `HopfieldPooling`'s, `HopfieldLayer`'s).
        module: the attnmem layer to load them into.

    Shapes:
        - state_dict: hflayers' shapes; its learned patterns (1, Q, D) or (Q, 1, D) become (Q, D)

    Returns:
        a state dict with `module`'s keys.
    """
    core = getattr(module, "hopfield", module)
    prefix = "hopfield." if core is not module else ""
    converted: dict[str, Tensor] = {}
    for key, value in state_dict.items():
        if key in _LEARNED:
            converted[key] = value.reshape(-1, value.shape[-1])  # (1, Q, D) or (Q, 1, D) → (Q, D)
        elif key.startswith(prefix + "norm_"):
            converted[key] = value
    hf = {key[len(prefix + "association_core."):]: value for key, value in state_dict.items()
          if key.startswith(prefix + "association_core.")}
    for name, value in _core(hf, cast("Hopfield", core)).items():  # a Hopfield, or the one a pooling/layer holds
        converted[prefix + name] = value
    return converted


def _core(hf: dict[str, Tensor], core: Hopfield) -> dict[str, Tensor]:
    heads = core.num_heads
    parts = [(name, width) for name, width, static in (
        ("query_proj", heads * core.hidden_size, core.static[1]),
        ("key_proj", heads * core.hidden_size, core.static[0]),
        ("value_proj", heads * core.pattern_size, core.static[2])) if not static]
    out: dict[str, Tensor] = {}
    start = 0
    for name, width in parts:
        if "in_proj_weight" in hf:
            out[f"{name}.weight"] = hf["in_proj_weight"][start:start + width]
        else:
            out[f"{name}.weight"] = hf[f"{name[0]}_proj_weight"]
        if "in_proj_bias" in hf:
            out[f"{name}.bias"] = hf["in_proj_bias"][start:start + width]
        start += width
    for name in ("weight", "bias"):
        if f"out_proj.{name}" in hf:
            out[f"out_proj.{name}"] = hf[f"out_proj.{name}"]
        if f"p_norm_{name}" in hf:
            out[f"norm_hopfield_space.{name}"] = hf[f"p_norm_{name}"]
    return out
