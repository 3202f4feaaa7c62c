"""The caption family's sources: the digits canvas (pools, captions, boxes), the COCO-format folder, their errors."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import one_line
from PIL import Image
from sklearn.datasets import load_digits

from attnmem.core.errors import UserError
from attnmem.data.caption import images as caption_images
from attnmem.data.caption.coco_folder import CocoFolder, words
from attnmem.data.caption.datamodule import CaptionDataModule
from attnmem.data.caption.digits import WORDS, DigitCanvas, place, split_pools


def coco_folder(tmp_path: Path, count: int = 10, size: tuple[int, int] = (16, 12)) -> tuple[Path, Path]:
    """`count` grey `size` (width, height) PNGs, one or two captions each, and their COCO captions JSON."""
    folder = tmp_path / "images"
    folder.mkdir()
    images, notes = [], []
    for i in range(count):
        Image.fromarray(np.full(size[::-1], 20 * i, dtype=np.uint8)).save(folder / f"im{i}.png")
        images.append({"id": 100 + i, "file_name": f"im{i}.png"})
        notes.append({"image_id": 100 + i, "caption": f"A {'dark' if i < 5 else 'light'} square."})
        if i % 2:
            notes.append({"image_id": 100 + i, "caption": f"Shade {i}!"})
    captions = tmp_path / "captions.json"
    captions.write_text(json.dumps({"images": images, "annotations": notes}))
    return folder, captions


def test_pools_are_disjoint_and_cover_every_digit_image():
    pools = split_pools(np.zeros(1797), (0.15, 0.15), seed=0)
    assert [len(pools[k]) for k in ("train", "val", "test")] == [1257, 270, 270]
    assert sorted(np.concatenate(list(pools.values())).tolist()) == list(range(1797))


def test_placed_boxes_fit_the_canvas_left_to_right_without_overlap():
    rng = np.random.default_rng(0)
    for _ in range(200):
        boxes = place(rng, 5, 16, 40)  # 5 digits fill the 40 columns exactly: no gap anywhere
        assert [b[1] for b in boxes] == [0, 8, 16, 24, 32]
        boxes = place(rng, 3, 16, 48)
        assert all(0 <= t and b <= 16 and b - t == 8 and r - left == 8 for t, left, b, r in boxes)
        assert all(boxes[k][3] <= boxes[k + 1][1] for k in range(2)) and boxes[-1][3] <= 48


def test_each_box_holds_the_digit_its_word_names_and_test_digits_come_from_the_test_pool():
    source = DigitCanvas(lengths=[2, 3], test_lengths=[5], width=40, num_train=30, num_val=5, num_test=20)
    splits = source.splits()
    assert set(splits) == {"train", "val", "test", "test1"}
    digits = load_digits()
    images = torch.from_numpy(digits.images / 16.0).float()  # (1797, 8, 8)
    pools = split_pools(digits.target, (0.15, 0.15), 0)
    for name, pool in (("train", "train"), ("test", "test"), ("test1", "test")):
        split = splits[name]
        for image, caption, boxes in zip(split.images, split.captions, split.boxes):
            assert len(caption) == len(boxes) and (len(caption) == 5 if name == "test1" else 2 <= len(caption) <= 3)
            for word, (top, left, bottom, right) in zip(caption, boxes):
                patch = image[0, top:bottom, left:right]
                match = (images - patch).abs().flatten(1).amax(1) < 1e-6  # the digit images equal to the patch
                found = set(match.nonzero().flatten().tolist()) & set(pools[pool].tolist())
                assert found and {WORDS[digits.target[i]] for i in found} == {word}
            # outside the boxes the canvas is blank
            blank = image[0].clone()
            for top, left, bottom, right in boxes:
                blank[top:bottom, left:right] = 0
            assert blank.abs().sum() == 0
    again = DigitCanvas(lengths=[2, 3], test_lengths=[5], width=40, num_train=30, num_val=5, num_test=20).splits()
    assert torch.equal(again["test"].images, splits["test"].images) and again["test"].captions == splits["test"].captions


def test_datamodule_batches_images_captions_and_boxes_of_each_word():
    dm = CaptionDataModule(source=DigitCanvas(num_train=8, num_val=4, num_test=4, test_lengths=[4]), batch_size=4)
    dm.setup()
    batch = next(iter(dm.train_dataloader()))
    assert batch["image"].shape == (4, 1, 16, 48) and batch["tgt"].shape == (4, 5)  # bos, 3 words, eos
    assert batch["boxes"].shape == (4, 4, 4) and (batch["boxes"][:, 3] == -1).all()  # the eos step has no box
    assert (batch["tgt"][:, 0] == 1).all() and (batch["tgt"][:, 4] == 2).all()
    dims = dm.dims
    assert (dims.vocab_size, dims.channels, dims.height, dims.width, dims.max_caption_len) == (14, 1, 16, 48, 4)
    assert sorted(dims.itos[4:]) == sorted(WORDS) and len(dm.test_dataloader()) == 2


def test_a_canvas_too_small_names_the_options_and_the_width_needed():
    with pytest.raises(UserError) as err:
        DigitCanvas(lengths=[3, 3], test_lengths=[6], width=40)
    one_line(str(err.value), "data.source.width=40", "too small for 6 digits", "data.source.width>=48")


def test_missing_vision_extra_is_one_line_naming_the_extra(monkeypatch):
    real = importlib.import_module

    def without_sklearn(name, *args):
        if name.startswith("sklearn"):
            raise ImportError(f"No module named {name!r}")
        return real(name, *args)

    monkeypatch.setattr(caption_images.importlib, "import_module", without_sklearn)
    with pytest.raises(UserError) as err:
        DigitCanvas(num_train=2, num_val=2, num_test=2).splits()
    one_line(str(err.value), "sklearn is not installed", "pip install attnmem[vision]")


def test_coco_folder_splits_by_image_and_reads_every_caption(tmp_path):
    folder, captions = coco_folder(tmp_path)
    source = CocoFolder(images_dir=str(folder), captions=str(captions), channels=1, height=12, width=16,
                        val_fraction=0.2, test_fraction=0.2)
    splits = source.splits()
    assert sum(len(s.captions) for s in splits.values()) == 15 and all(s.boxes is None for s in splits.values())
    shades = {name: {round(float(im.max()) * 255) for im in s.images} for name, s in splits.items()}
    assert sum(len(v) for v in shades.values()) == 10 and not shades["train"] & (shades["val"] | shades["test"])
    assert words("A dark square.") == ["a", "dark", "square"]
    assert splits["train"].images.shape[1:] == (1, 12, 16) and len(source.data_files) == 11
    dm = CaptionDataModule(source=source, batch_size=4)
    dm.setup()
    assert "boxes" not in next(iter(dm.train_dataloader())) and dm.dims.itos[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]


def test_coco_caption_of_a_missing_image_names_the_file_and_the_key(tmp_path):
    folder, captions = coco_folder(tmp_path, count=4)
    (folder / "im2.png").unlink()
    source = CocoFolder(images_dir=str(folder), captions=str(captions), channels=1, height=12, width=16)
    with pytest.raises(UserError) as err:
        source.splits()
    one_line(str(err.value), str(captions), "annotations[3].image_id=102", "im2.png", "does not exist",
             "remove the caption")


def test_coco_unreadable_or_wrong_size_image_names_the_file_and_the_fix(tmp_path):
    folder, captions = coco_folder(tmp_path, count=4)
    (folder / "im1.png").write_text("not a png")
    source = CocoFolder(images_dir=str(folder), captions=str(captions), channels=1, height=12, width=16)
    with pytest.raises(UserError) as err:
        source.splits()
    one_line(str(err.value), str(folder / "im1.png"), "annotations[1]", "not a readable image", "replace the file")
    Image.fromarray(np.zeros((10, 10), dtype=np.uint8)).save(folder / "im1.png")
    with pytest.raises(UserError) as err:
        source.splits()
    one_line(str(err.value), str(folder / "im1.png"), "10x10 pixels, expected 16x12", "resize the image")


def test_coco_annotation_of_an_unknown_image_id_names_the_key(tmp_path):
    folder, captions = coco_folder(tmp_path, count=3)
    root = json.loads(captions.read_text())
    root["annotations"].append({"image_id": 7, "caption": "x"})
    captions.write_text(json.dumps(root))
    with pytest.raises(UserError) as err:
        CocoFolder(images_dir=str(folder), captions=str(captions), height=12, width=16).splits()
    one_line(str(err.value), str(captions), "annotations[4].image_id=7 is no id of images")
