"""attnmem's Hopfield layers against hflayers' recorded outputs (tests/fixtures/hflayers_parity.pt; no hflayers here).

`benchmarks/hflayers_parity.py` built each hflayers module, perturbed its weights, ran it forward and
backward and saved everything; here the same configuration of `Hopfield` / `HopfieldPooling` /
`HopfieldLayer` loads those weights through `from_hflayers_state_dict` and must agree to 1e-5: output,
ξ, the inputs' gradients and every parameter's gradient. A deviation is the largest absolute difference over
max(1, the largest |value| of hflayers' tensor): absolute for values up to 1, relative to the largest
beyond (gradients reach 36 in "heads", where float32 rounding alone is ~1e-6 of that).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor

from attnmem.blocks import hopfield as blocks
from attnmem.blocks.hopfield_convert import from_hflayers_state_dict

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "hflayers_parity.pt"
RECORDS: dict[str, dict[str, Any]] = torch.load(FIXTURE, weights_only=True) if FIXTURE.exists() else {}
TOLERANCE = 1e-5


def _scaled(got: Tensor, want: Tensor) -> float:
    return (got - want).abs().max().item() / max(1.0, want.abs().max().item())


def deviations(rec: dict[str, Any], *, absolute: bool = False) -> dict[str, float]:
    """The largest deviation from hflayers of the output, ξ and the gradients of one record (scaled as above)."""
    diff = (lambda got, want: (got - want).abs().max().item()) if absolute else _scaled
    kwargs = dict(rec["kwargs"])
    module = getattr(blocks, rec["cls"])(kwargs.pop("input_size"), **kwargs)
    module.load_state_dict(from_hflayers_state_dict(rec["state_dict"], module))
    inputs = [x.clone().requires_grad_() for x in rec["inputs"]]
    data = inputs[0] if len(inputs) == 1 else tuple(inputs)
    with torch.no_grad():  # without ξ asked for, one retrieval may take SDPA
        plain = module(data, rec["padding"], rec["association"])
    output, xi = module(data, rec["padding"], rec["association"], return_association=True)
    (output * rec["output_weights"]).sum().backward()
    grads = {name: p.grad for name, p in module.named_parameters() if p.grad is not None}
    want = from_hflayers_state_dict(rec["param_grads"], module)
    assert set(grads) == set(want), f"gradients of {sorted(set(grads) ^ set(want))} on one side only"
    return {
        "output": diff(output, rec["output"]),
        "output without ξ": diff(plain, rec["output"]),
        "xi": diff(xi, rec["xi"]),
        "input grads": max(diff(x.grad, g) for x, g in zip(inputs, rec["input_grads"])),
        "param grads": max(diff(grads[k], want[k]) for k in want),
    }


def test_fixture_is_there_and_small():
    assert FIXTURE.exists(), f"{FIXTURE} missing: run benchmarks/hflayers_parity.py (see its docstring)"
    assert FIXTURE.stat().st_size < 100_000
    assert {"pooling", "heads", "projections", "lookup"} <= set(RECORDS)


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_agrees_with_hflayers(name):
    worst = deviations(RECORDS[name])
    assert max(worst.values()) <= TOLERANCE, f"{name}: {worst}"


def test_the_fixture_would_catch_a_wrong_weight():
    rec = RECORDS["heads"]
    broken = dict(rec, state_dict=dict(rec["state_dict"]))
    key = next(k for k in broken["state_dict"] if k.endswith("in_proj_weight"))
    broken["state_dict"][key] = broken["state_dict"][key] * 1.01
    assert deviations(broken)["output"] > 10 * TOLERANCE


def test_the_recorded_updates_matter():
    """The "heads" record runs up to 3 updates: one retrieval alone would not match it."""
    rec = RECORDS["heads"]
    assert rec["kwargs"]["update_steps_max"] == 3
    assert deviations(dict(rec, kwargs=dict(rec["kwargs"], update_steps_max=0)))["output"] > 10 * TOLERANCE
