"""Faults of the disk, injected in-process at the write (as root, chmod cannot make a folder read-only): a full disk,
a read-only file system, a full system temp folder, a run directory deleted while it trains. Each ends in one line
naming the file and the fix; the checkpoints written before stay whole, and the run resumes (docs/errors.md)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import FAST, one_line
from test_run_dir_integrity import _guard_refuses, _hydra_cfg

from attnmem.callbacks import checkpoint_io
from attnmem.callbacks.checkpoint_io import AtomicCheckpointIO
from attnmem.core.errors import UserError
from attnmem.runtime import cli, manifest, run

ONE = [*FAST, "data.source.num_train=60", "data.source.num_val=20", "data.source.num_test=20", "trainer.max_epochs=1"]
TWO = [*ONE[:-1], "trainer.max_epochs=2"]


def _fault(code: int) -> OSError:
    return OSError(code, os.strerror(code))


def _disk_fails_writing(monkeypatch: pytest.MonkeyPatch, name: str, code: int) -> None:
    """The checkpoint `name` gets half written, then the disk fails with `code`."""
    real = checkpoint_io._write

    def write(path: Path, data: memoryview) -> None:
        if path.name.startswith(f".{name}."):  # its temporary name beside it
            path.write_bytes(bytes(data[: len(data) // 2]))
            raise _fault(code)
        real(path, data)

    monkeypatch.setattr(checkpoint_io, "_write", write)


def test_a_full_disk_at_last_ckpt_stops_in_one_line_and_resume_auto_goes_on(compose_cfg, tmp_path, monkeypatch,
                                                                             capsys):
    out = tmp_path / "run"
    _disk_fails_writing(monkeypatch, "last.ckpt", errno.ENOSPC)
    with pytest.raises(UserError) as err:
        run.train(compose_cfg(*TWO, run_dir=out))
    one_line(str(err.value), f"could not write {out / 'checkpoints' / 'last.ckpt'}: no space left on its disk",
             "free space", "the checkpoints written before are intact", "resume=auto")
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["epoch000.ckpt"]  # whole; no temporary file
    assert not (out / "metrics.json").exists() and not (out / ".lock").exists()

    with pytest.raises(UserError, match="holds an unfinished run \\(checkpoints/epoch000.ckpt\\): to continue it, add "
                                        "resume=auto"):
        run.train(compose_cfg(*TWO, run_dir=out))  # the same command again, without resume=auto: refused

    monkeypatch.undo()  # space freed
    capsys.readouterr()
    run.train(compose_cfg(*TWO, "resume=auto", run_dir=out))
    note = " ".join(capsys.readouterr().out.split())
    assert f"{out / 'checkpoints' / 'last.ckpt'} is missing: resuming from epoch000.ckpt" in note
    assert json.loads((out / "metrics.json").read_text())["epoch"] == 2
    assert [r["checkpoint"] for r in manifest.read(out)["resumes"]] == ["checkpoints/epoch000.ckpt"]


def test_a_read_only_file_system_at_a_checkpoint_stops_in_one_line(compose_cfg, tmp_path, monkeypatch):
    out = tmp_path / "run"
    _disk_fails_writing(monkeypatch, "epoch000.ckpt", errno.EROFS)
    with pytest.raises(UserError) as err:
        run.train(compose_cfg(*ONE, run_dir=out))
    one_line(str(err.value), f"could not write {out / 'checkpoints' / 'epoch000.ckpt'}", "read-only",
             "hydra.run.dir on a writable disk")
    assert not list((out / "checkpoints").iterdir())  # the half-written temporary file is gone


def test_a_run_directory_deleted_while_it_trains_stops_in_one_line_and_is_not_made_again(compose_cfg, tmp_path,
                                                                                          monkeypatch):
    out = tmp_path / "run"
    real = AtomicCheckpointIO.save_checkpoint

    def deleted_first(self: AtomicCheckpointIO, checkpoint: dict[str, Any], path: Any,
                      storage_options: Any = None) -> None:
        shutil.rmtree(out, ignore_errors=True)  # someone deletes the run directory as the first checkpoint is due
        real(self, checkpoint, path, storage_options)

    monkeypatch.setattr(AtomicCheckpointIO, "save_checkpoint", deleted_first)
    with pytest.raises(UserError) as err:
        run.train(compose_cfg(*ONE, run_dir=out))
    one_line(str(err.value), "could not write", str(out), "its folder is gone", "new hydra.run.dir")
    assert not out.exists()


def test_checkpoints_never_go_through_the_system_temp_folder(compose_cfg, tmp_path, monkeypatch):
    def full(*args: Any, **kwargs: Any) -> Any:
        raise _fault(errno.ENOSPC)  # a full /tmp: Lightning's own saving stages every checkpoint there

    monkeypatch.setattr(tempfile, "mkstemp", full)
    run.train(compose_cfg(*ONE, run_dir=tmp_path / "run"))
    assert (tmp_path / "run" / "checkpoints" / "last.ckpt").is_file()


def test_a_read_only_run_directory_is_refused_in_one_line_before_hydra_writes(compose_cfg, tmp_path, monkeypatch):
    out = tmp_path / "read_only"
    out.mkdir()
    real_open = os.open

    def read_only(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if Path(path).parent == out:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    line = _guard_refuses("on_run_start", _hydra_cfg(*ONE, f"hydra.run.dir={out}"))
    one_line(line, f"{out / '.lock'}: its file system is read-only", "pass a hydra.run.dir on a writable disk")
    assert not any(out.iterdir())


def test_a_full_disk_anywhere_in_a_command_is_one_line_naming_the_file():
    def full() -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/runs/a/plots/attention.png")

    with pytest.raises(UserError) as err:
        cli.disk_faults(full)
    one_line(str(err.value), "/runs/a/plots/attention.png: no space left on its disk", "free space")

    def missing() -> None:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", "/data/qa1_train.txt")

    with pytest.raises(FileNotFoundError):  # a missing file that is read is no fault of the disk
        cli.disk_faults(missing)
