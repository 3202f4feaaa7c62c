"""What the caption sources need of the `vision` extra (scikit-learn, Pillow): importing it, reading images."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import numpy as np
import torch
from torch import Tensor

from attnmem.core.errors import UserError

MODES = {1: "L", 3: "RGB"}  # Pillow's mode of each channel count


def vision(module: str) -> ModuleType:
    """Import `module` of the `vision` extra, or stop in one line naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise UserError(
            f"{module.split('.')[0]} is not installed ({err}): the caption data need the vision extra, "
            "pip install attnmem[vision]"
        ) from None


def read_image(path: Path, channels: int, height: int, width: int, where: str) -> Tensor:
    """The image at `path` as (C, H, W) floats in [0, 1]; one line naming it and `where` it is referred to when
    it cannot be read or is not `height` x `width` pixels."""
    image_module = vision("PIL.Image")
    if not path.is_file():
        raise UserError(f"{where}: the image {path} does not exist: add it, or remove the caption referring to it")
    try:
        with image_module.open(path) as image:
            image.load()
            pixels = np.asarray(image.convert(MODES[channels]), dtype=np.float32) / 255.0
    except (OSError, ValueError) as err:
        message = f"{path} ({where}): not a readable image ({err}): replace the file or remove its captions"
        raise UserError(message) from None
    if pixels.shape[:2] != (height, width):
        raise UserError(
            f"{path} ({where}): {pixels.shape[1]}x{pixels.shape[0]} pixels, expected {width}x{height} "
            f"(data.source.width x data.source.height): resize the image or set those options"
        )
    return torch.from_numpy(pixels.reshape(height, width, channels)).permute(2, 0, 1)  # (C, H, W)
