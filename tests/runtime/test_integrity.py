"""Damaged files: checkpoints (their CRC-32s), metrics.json and manifest.json (a sha256 sidecar) are checked on every
read; a damaged one is named in one line with the newest intact alternative, never used. A run's saved config that is
not YAML is named with its line (docs/errors.md)."""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest
import torch
from conftest import FAST, one_line, train_once
from test_run_dir_integrity import _digest

import attnmem
from attnmem.core import integrity
from attnmem.core.errors import UserError
from attnmem.runtime import checkpoint, resume, run

TINY = [*FAST, "data.source.num_train=60", "data.source.num_val=20", "data.source.num_test=20", "trainer.max_epochs=1"]


def _save(path: Path, epoch: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": {"net.w": torch.arange(4096, dtype=torch.float32)}, "epoch": epoch}, path)
    return path


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _damage(path: Path, old: str, new: str) -> None:
    """Change `old` to `new` in `path` as a disk's damage does: the file's modification time stays as it was (an edit
    makes the file newer than its recorded sha256, and is read as it is now)."""
    before = path.stat()
    path.write_text(path.read_text().replace(old, new, 1))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _change_weights(path: Path) -> None:
    """Change 8 bytes inside the largest tensor record of a torch.save archive (its zip structure stays whole)."""
    with zipfile.ZipFile(path) as archive:
        record = max((r for r in archive.infolist() if "/data/" in r.filename), key=lambda r: r.file_size)
    data = bytearray(path.read_bytes())
    header = record.header_offset
    start = header + 30 + int.from_bytes(data[header + 26:header + 28], "little") + int.from_bytes(
        data[header + 28:header + 30], "little")
    middle = start + record.file_size // 2
    data[middle:middle + 8] = bytes(b ^ 0xFF for b in data[middle:middle + 8])
    path.write_bytes(bytes(data))


def test_json_written_with_its_sha256_reads_back_and_a_changed_byte_is_named(tmp_path):
    path = tmp_path / "metrics.json"
    integrity.write_json(path, {"val/acc": 0.5})
    digest, named = integrity.sidecar(path).read_text().split()
    assert named == path.name and len(digest) == 64
    assert integrity.read_json(path, "fix") == {"val/acc": 0.5}
    _damage(path, "0.5", "0.9")
    with pytest.raises(integrity.DamagedFile) as err:
        integrity.read_json(path, "restore it")
    one_line(str(err.value), f"{path} is damaged", "sha256 differs", "metrics.json.sha256", "restore it")


def test_a_json_file_edited_after_its_record_is_read_as_it_is_now(tmp_path):
    path = tmp_path / "metrics.json"
    integrity.write_json(path, {"checkpoint": "checkpoints/epoch000.ckpt"})
    later = integrity.sidecar(path).stat().st_mtime_ns + 10**9
    path.write_text(json.dumps({"checkpoint": "checkpoints/epoch001.ckpt"}))
    os.utime(path, ns=(later, later))  # edited a second after it was written
    assert integrity.read_json(path, "fix") == {"checkpoint": "checkpoints/epoch001.ckpt"}


def test_a_kill_while_a_json_file_is_replaced_leaves_a_pair_that_verifies(tmp_path, monkeypatch):
    path = tmp_path / "manifest.json"
    integrity.write_json(path, {"resumes": []})
    calls = []
    real = integrity._atomic

    def killed_after_the_first_sidecar(target, data):
        calls.append(target)
        if len(calls) == 2:  # the sidecar accepting both was written; the process dies before the rename
            raise KeyboardInterrupt
        real(target, data)

    monkeypatch.setattr(integrity, "_atomic", killed_after_the_first_sidecar)
    with pytest.raises(KeyboardInterrupt):
        integrity.write_json(path, {"resumes": [1]})
    assert integrity.read_json(path, "fix") == {"resumes": []}  # the old content, still accepted
    real(path, (json.dumps({"resumes": [1]}, indent=2, sort_keys=True) + "\n").encode())  # as if renamed: accepted
    assert integrity.read_json(path, "fix") == {"resumes": [1]}


def test_a_truncated_json_without_a_record_is_named_with_its_line(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text('{\n  "val/acc": 0.5,\n  "epoch": ')  # a run of an earlier version: no sidecar
    with pytest.raises(integrity.DamagedFile) as err:
        integrity.read_json(path, "restore it")
    one_line(str(err.value), f"{path} is damaged", "not valid JSON at line 3", "truncated", "restore it")


@pytest.mark.parametrize("damage", ["truncated", "weights changed"])
def test_a_damaged_checkpoint_is_named_with_the_newest_intact_one_beside_it(tmp_path, damage):
    folder = tmp_path / "run" / "checkpoints"
    intact = _save(folder / "epoch024.ckpt", 24)
    last = _save(folder / "last.ckpt", 25)
    os.utime(intact, ns=(1, 1))  # older than last.ckpt
    assert checkpoint.load(last)["epoch"] == 25
    _truncate(last) if damage == "truncated" else _change_weights(last)
    with pytest.raises(UserError) as err:
        checkpoint.load(last)
    why = "truncated" if damage == "truncated" else "differs from the CRC-32 recorded when it was written"
    one_line(str(err.value), f"{last} is damaged", why, f"the newest intact checkpoint beside it is {intact}")
    assert "not a torch.save archive" not in str(err.value)


def test_a_file_that_is_no_checkpoint_is_still_called_so(tmp_path):
    path = tmp_path / "notes.ckpt"
    path.write_text("hello")
    with pytest.raises(UserError, match="is not a checkpoint \\(not a torch.save archive\\)"):
        checkpoint.load(path)


@pytest.mark.parametrize("last_is", ["damaged", "missing"])
def test_resume_auto_continues_from_the_newest_intact_checkpoint(tmp_path, capsys, last_is):
    folder = tmp_path / "run" / "checkpoints"
    _save(folder / "epoch023.ckpt", 23)
    newest = _save(folder / "epoch024.ckpt", 24)
    last = _save(folder / "last.ckpt", 24)
    os.utime(folder / "epoch023.ckpt", ns=(1, 1))
    _change_weights(last) if last_is == "damaged" else last.unlink()
    assert resume.checkpoint_to_resume(tmp_path / "run") == newest
    note = " ".join(capsys.readouterr().out.split())
    one_line(note, f"{last} is {last_is}", "resuming from epoch024.ckpt, the run's newest intact checkpoint")


def test_resume_auto_with_no_intact_checkpoint_names_the_damage(tmp_path):
    last = _save(tmp_path / "run" / "checkpoints" / "last.ckpt", 3)
    _truncate(last)
    with pytest.raises(UserError) as err:
        resume.checkpoint_to_resume(tmp_path / "run")
    one_line(str(err.value), f"{last} is damaged (truncated", "no intact checkpoint is left", "new hydra.run.dir")


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One finished run, trained once for the module; tests work on copies."""
    return train_once(tmp_path_factory, "finished_integrity", *TINY)


@pytest.fixture
def done(finished: Path, tmp_path: Path) -> Path:
    """A copy of the finished run."""
    return Path(shutil.copytree(finished, tmp_path / "done"))


def test_a_run_writes_its_metrics_and_manifest_with_their_sha256(done):
    for name in ("metrics.json", "manifest.json"):
        digest, named = integrity.sidecar(done / name).read_text().split()
        assert named == name and len(digest) == 64
    assert not list((done / "checkpoints").glob("*.sha256"))  # a checkpoint's CRC-32s are inside it


def test_eval_refuses_a_checkpoint_whose_weights_changed(done, compose_cfg):
    best = done / json.loads((done / "metrics.json").read_text())["checkpoint"]
    _change_weights(best)
    cfg = compose_cfg(f"run_dir={done}", config_name="eval", run_dir=done.parent / "eval")
    with pytest.raises(UserError) as err:
        run.evaluate(cfg)
    one_line(str(err.value), f"{best} is damaged", "CRC-32", "the newest intact checkpoint beside it is")
    assert not (done.parent / "eval" / "metrics.json").exists()


def test_load_run_names_a_truncated_or_changed_metrics_json(done):
    metrics = done / "metrics.json"
    _damage(metrics, '"epoch": 1', '"epoch": 7')
    with pytest.raises(UserError) as err:
        attnmem.load_run(done)
    one_line(str(err.value), f"{metrics} is damaged", "sha256 differs", "resume=auto")
    _truncate(metrics)
    with pytest.raises(UserError) as err:
        attnmem.load_run(done)
    one_line(str(err.value), f"{metrics} is damaged", "not valid JSON at line", "truncated", "resume=auto")


def test_a_saved_config_that_is_not_yaml_is_named_with_its_line(done):
    config = done / ".hydra" / "config.yaml"
    lines = config.read_text().splitlines()
    lines[2] = "  bad: [unclosed"
    config.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError) as err:
        attnmem.load_run(done)
    one_line(str(err.value), f"{config}:", "not valid YAML", "fix that line")
    assert str(err.value).split(":")[1].isdigit()  # the file's line number


def test_resume_names_a_damaged_manifest_and_writes_nothing(done, compose_cfg):
    for name in ("metrics.json", "metrics.json.sha256"):  # an unfinished run
        (done / name).unlink()
    manifest = done / "manifest.json"
    _damage(manifest, '"seed"', '"sed"')
    cfg = compose_cfg(*TINY, "resume=auto", run_dir=done)
    before = _digest(done, skip=".hydra")
    with pytest.raises(UserError) as err:
        run.train(cfg)
    one_line(str(err.value), f"{manifest} is damaged", "sha256 differs", "restore it")
    assert _digest(done, skip=".hydra") == before
