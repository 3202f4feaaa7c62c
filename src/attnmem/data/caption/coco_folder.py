"""A folder of images and a captions JSON in the COCO format, a caption source."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnmem.core.errors import UserError
from attnmem.core.text import read_utf8
from attnmem.data.caption.images import read_image
from attnmem.data.caption.tensors import Captioned, build_vocab

WORD = re.compile(r"[a-z0-9']+")


def words(caption: str) -> list[str]:
    """A caption's words: lower case, punctuation dropped."""
    return WORD.findall(caption.lower())


def _load(path: Path) -> tuple[dict[Any, str], list[tuple[Any, str, int]]]:
    """{image id: file name} and (image id, caption, annotation index) of a COCO captions file."""
    text = read_utf8(path, "COCO captions files (JSON)")
    try:
        root = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    for key in ("images", "annotations"):
        if not isinstance(root, dict) or not isinstance(root.get(key), list):
            raise UserError(f'{path}: {key} is missing (the COCO format: {{"images": [...], "annotations": [...]}})')
    files = {}
    for i, image in enumerate(root["images"]):
        if not isinstance(image, dict) or "id" not in image or "file_name" not in image:
            raise UserError(f"{path}: images[{i}] needs an id and a file_name")
        files[image["id"]] = image["file_name"]
    captions = []
    for i, note in enumerate(root["annotations"]):
        if not isinstance(note, dict) or not isinstance(note.get("caption"), str):
            raise UserError(f"{path}: annotations[{i}].caption is missing or not a string")
        if note.get("image_id") not in files:
            raise UserError(f"{path}: annotations[{i}].image_id={note.get('image_id')!r} is no id of images: "
                            "add the image to images or remove the annotation")
        captions.append((note["image_id"], note["caption"], i))
    if not captions:
        raise UserError(f"{path}: no caption in annotations")
    return files, captions


class CocoFolder:
    """Images of `images_dir` with the captions of `captions` (COCO's captions JSON: `images` with `id` and
    `file_name`, `annotations` with `image_id` and `caption`), a caption source (`data.source`).

    Every image is read with Pillow as `channels` (1: grey, 3: RGB) and must be `height` x `width` pixels. The
    images, not the captions, are split (seeded, `val_fraction`, `test_fraction`), so the captions of one image
    stay in one split; each caption is an example. Words are lower-cased, punctuation dropped; the vocabulary is the
    training captions' words seen `min_count` times.
    """

    test_lengths: list[int] = []

    def __init__(self, *, images_dir: str, captions: str, channels: int = 3, height: int = 64, width: int = 64,
                 val_fraction: float = 0.1, test_fraction: float = 0.1, min_count: int = 1, seed: int = 0) -> None:
        if channels not in (1, 3):
            raise ValueError(f"data.source.channels must be 1 or 3, got {channels}")
        if not (0 < val_fraction and 0 <= test_fraction and val_fraction + test_fraction < 1):
            raise ValueError("data.source.val_fraction must be > 0, test_fraction >= 0, their sum < 1")
        self.images_dir, self.captions = Path(images_dir), Path(captions)
        if not self.captions.is_file():
            raise UserError(f"data.source.captions={captions}: no such file: point it to the COCO captions JSON")
        self.channels, self.height, self.width = channels, height, width
        self.fractions, self.min_count, self.seed = (val_fraction, test_fraction), min_count, seed
        self.data_files = [self.captions]

    def splits(self) -> dict[str, Captioned]:
        """train, val and (when `test_fraction` > 0) test: the captions of each split's images."""
        files, captions = _load(self.captions)
        ids = sorted({image_id for image_id, _, _ in captions}, key=str)
        order = np.random.default_rng(self.seed).permutation(len(ids))
        val, test = (round(f * len(ids)) for f in self.fractions)
        val = max(val, 1)
        if len(ids) - val - test < 1:
            raise UserError(f"{self.captions}: {len(ids)} captioned image(s) cannot fill train, val and test: "
                            "add images or lower data.source.val_fraction / test_fraction")
        cuts = {"val": order[:val], "test": order[val : val + test], "train": order[val + test :]}
        images = {}
        for image_id, _, i in captions:
            if image_id not in images:
                where = f"{self.captions}: annotations[{i}].image_id={image_id!r}, file_name {files[image_id]!r}"
                images[image_id] = read_image(self.images_dir / files[image_id], self.channels, self.height,
                                              self.width, where)
        self.data_files = [self.captions, *(self.images_dir / files[i] for i in ids)]
        out = {}
        for name, index in cuts.items():
            chosen = {ids[k] for k in index.tolist()}
            rows = [(image_id, words(text)) for image_id, text, _ in captions if image_id in chosen]
            if rows:
                out[name] = Captioned(torch.stack([images[i] for i, _ in rows]), [w for _, w in rows])
        return out

    def vocab(self, captions: list[list[str]]) -> list[str]:
        """The specials and the training captions' words seen at least `min_count` times."""
        return build_vocab(captions, self.min_count)
