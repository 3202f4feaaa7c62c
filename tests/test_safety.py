"""Safe loading and secrets: weights-only checkpoints, safe archive extraction, no eval/exec, no API key on disk."""

from __future__ import annotations

import ast
import io
import os
import tarfile
from pathlib import Path

import pytest
import torch
from conftest import FAST, ROOT

from attnmem.core.errors import UserError
from attnmem.data.qa import babi_download
from attnmem.runtime import checkpoint, run

TINY = [*FAST, "data.source.num_train=60", "data.source.num_val=20", "data.source.num_test=20", "trainer.max_epochs=1"]
KEY = "secret-attnmem-test-0123456789abcdef0123"


class _Mkdir:
    """A pickle that would create a folder when unpickled without weights_only."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (str(self.path),))


def test_wandb_key_is_never_written_and_checkpoints_load_weights_only(compose_cfg, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", KEY)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    run.train(compose_cfg(*TINY, "logger=wandb"))
    out = tmp_path / "run"
    assert list((out / "wandb").glob("offline-run-*")), "W&B wrote no run"
    leaks = [p for p in tmp_path.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert not leaks, leaks
    last = out / "checkpoints" / "last.ckpt"
    # what goes beyond tensors and containers (numpy's RNG state) is exactly the allow-list
    registered = torch.serialization.get_safe_globals()
    torch.serialization.clear_safe_globals()
    try:
        beyond = set(torch.serialization.get_unsafe_globals_in_checkpoint(last))
    finally:
        torch.serialization.add_safe_globals(registered)
    assert beyond and beyond <= {f"{g.__module__}.{g.__qualname__}" for g in checkpoint.SAFE_GLOBALS}, beyond
    state = torch.load(last, map_location="cpu", weights_only=True)
    assert state["state_dict"] and state["global_step"] > 0


def test_a_checkpoint_that_would_run_code_is_refused(compose_cfg, tmp_path):
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.ckpt"
    torch.save({"state_dict": {}, "payload": _Mkdir(marker)}, evil)
    with pytest.raises(UserError, match=r"refused to unpickle posix\.mkdir .*weights_only=True"):
        run.train(compose_cfg(*TINY, f"ckpt_path={evil}"))
    with pytest.raises(UserError, match="refused to unpickle"):
        checkpoint.load(evil)
    assert not marker.exists()


def _archive(path: Path, members: list[tarfile.TarInfo], data: bytes = b"1 Mary went home.\n") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info in members:
            info.size = len(data) if info.isfile() else 0
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return path


@pytest.mark.parametrize(
    "name", ["/etc/attnmem_evil.txt", "tasks_1-20_v1-2/en/../../../evil.txt", "tasks_1-20_v1-2\\..\\evil.txt"]
)
def test_archive_members_outside_the_target_are_refused(tmp_path, name):
    archive = _archive(tmp_path / "evil.tar.gz", [tarfile.TarInfo(name)])
    with pytest.raises(UserError, match=f"refusing the unsafe path {name!r}".replace("\\", "\\\\")):
        babi_download.extract_babi(archive, tmp_path / "babi")
    assert not (tmp_path / "babi").exists() and not Path("/etc/attnmem_evil.txt").exists()


def test_archive_links_are_never_extracted(tmp_path):
    link = tarfile.TarInfo("tasks_1-20_v1-2/en/qa1_single-supporting-fact_train.txt")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    archive = _archive(tmp_path / "link.tar.gz", [link])
    assert babi_download.extract_babi(archive, tmp_path / "babi") == []
    assert not (tmp_path / "babi").exists()


def _calls(tree: ast.AST) -> list[str]:
    return [n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]


def test_no_eval_or_exec_in_the_package_and_entry_points():
    files = [*sorted((ROOT / "src" / "attnmem").rglob("*.py")), ROOT / "train.py", ROOT / "eval.py"]
    found = {
        str(f.relative_to(ROOT)): name
        for f in files
        for name in _calls(ast.parse(f.read_text()))
        if name in ("eval", "exec", "compile", "__import__")
    }
    assert not found, found
    resolvers = [str(f) for f in files if "register_new_resolver" in f.read_text()]
    assert not resolvers, f"a custom OmegaConf resolver may evaluate config strings: {resolvers}"
