"""The trainer config against the machine: is the device there, are there enough, does it run that precision."""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig, ListConfig

from attnmem.core.errors import UserError
from attnmem.runtime import console

__all__ = ["PRECISIONS", "check", "device_type"]

# Lightning's short spellings, normalised
ALIASES = {"32": "32-true", "64": "64-true", "16": "16-mixed", "bf16": "bf16-mixed"}
# what this project runs on each device: mixed precision through autocast, with the numerically fragile parts
# (softmaxes, NTM addressing, Hopfield energies, recurrent layers) in float32; "-true" half precisions are not
# supported (those parts would run in 16 bits) and MPS has no float64
PRECISIONS = {
    "cpu": ("32-true", "64-true", "bf16-mixed", "16-mixed"),
    "cuda": ("32-true", "64-true", "bf16-mixed", "16-mixed"),
    "mps": ("32-true", "bf16-mixed", "16-mixed"),
}


def device_type(accelerator: str) -> str:
    """The torch device type a Lightning `accelerator` name trains on (`auto` picks as Lightning does)."""
    if accelerator == "auto":
        if torch.cuda.is_available():
            return "cuda"
        return "mps" if _mps_available() else "cpu"
    return "cuda" if accelerator == "gpu" else accelerator


def check(trainer: DictConfig) -> str:
    """Stop with one line when the trainer asks for a device, a device count or a precision the machine lacks.

    Returns the precision to train in: `16-mixed` on a CPU becomes `bf16-mixed`, and `bf16-mixed` on a CUDA
    GPU without bfloat16 becomes `16-mixed`, each with a note.
    """
    device = device_type(str(trainer.get("accelerator", "auto")))
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError(
            f"trainer.accelerator={trainer.accelerator}: no GPU is visible on this machine "
            "(torch.cuda.is_available() is False); train on the CPU with trainer=cpu"
        )
    if device == "mps" and not _mps_available():
        raise UserError("trainer.accelerator=mps: no Apple-silicon GPU (MPS) is available; use trainer=cpu")
    if device in ("cuda", "mps"):
        _check_devices(trainer.get("devices", "auto"), torch.cuda.device_count() if device == "cuda" else 1, device)
    return _precision(str(trainer.get("precision", "32-true")), device)


def _mps_available() -> bool:
    return bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())


def _check_devices(devices: Any, found: int, device: str) -> None:
    name = "GPU" if device == "cuda" else "MPS device"
    if isinstance(devices, str) and "," not in devices and devices.strip().lstrip("-").isdigit():
        devices = int(devices)
    if isinstance(devices, (list, ListConfig)) or isinstance(devices, str) and "," in devices:
        ids = [int(i) for i in (devices.split(",") if isinstance(devices, str) else devices) if str(i).strip()]
        missing = [i for i in ids if not 0 <= i < found]
        if missing:
            raise UserError(
                f"trainer.devices={devices}: no {name} with index {missing[0]}; found {found} (indices 0-{found - 1})"
            )
    elif isinstance(devices, int) and devices > found:
        raise UserError(
            f"trainer.devices={devices}: found {found} {name}(s) on this machine; "
            f"set trainer.devices={found} or fewer (-1 takes all)"
        )


def _precision(precision: str, device: str) -> str:
    precision = ALIASES.get(precision, precision)
    supported = PRECISIONS.get(device)
    if supported is None:  # an accelerator this project does not know (tpu, hpu, ...): Lightning decides
        return precision
    if precision not in supported:
        raise UserError(
            f"trainer.precision={precision} is not supported on {device}: use trainer.precision={'|'.join(supported)}"
        )
    if device == "cpu" and precision == "16-mixed":
        console.note("trainer.precision=16-mixed on CPU trains in bf16-mixed (CPU autocast has no float16)")
        return "bf16-mixed"
    if device == "cuda" and precision == "bf16-mixed" and not torch.cuda.is_bf16_supported(including_emulation=False):
        console.note("this GPU has no bfloat16: trainer.precision=bf16-mixed trains in 16-mixed instead")
        return "16-mixed"
    return precision
