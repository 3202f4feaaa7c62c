"""W&B in offline mode, in-process: the resolved config, tags, final metrics, the same run after a resume, and
the fall back to offline (one note, in seconds) when the W&B host cannot be reached, is no W&B server (HTTP 404)
or fails the TLS handshake."""

from __future__ import annotations

import http.server
import io
import json
import os
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import torch
from conftest import FAST, one_line
from omegaconf import OmegaConf

from attnmem.runtime import run, wandb_run

wandb = pytest.importorskip("wandb")

TINY = [
    *FAST,
    "logger=wandb",
    "tags=[sweep,test]",
    "data.source.num_train=100",
    "data.source.num_val=50",
    "data.source.num_test=50",
    "data.batch_size=50",
    "callbacks.plots.num_examples=1",
]


@pytest.fixture
def seen(monkeypatch, tmp_path) -> dict:
    """What the W&B run held just before run.py finished it (W&B 0.31 keeps offline runs in a binary file)."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    runs: dict = {}
    finish = run._finish_wandb

    def spy(trainer):
        if wandb.run is not None:
            runs.setdefault("runs", []).append(
                {
                    "id": wandb.run.id,
                    "config": wandb.run.config.as_dict(),
                    "tags": list(wandb.run.tags),
                    "dir": Path(wandb.run.dir),
                    "summary": dict(wandb.run.summary),
                }
            )
        finish(trainer)

    monkeypatch.setattr(run, "_finish_wandb", spy)
    return runs


def test_offline_run_logs_resolved_config_tags_and_final_metrics(compose_cfg, tmp_path, seen):
    cfg = compose_cfg(*TINY, "trainer.max_epochs=1")
    run.train(cfg)
    (logged,) = seen["runs"]
    assert logged["config"] == OmegaConf.to_container(cfg, resolve=True)
    assert logged["tags"] == ["sweep", "test"]
    (offline,) = (tmp_path / "run" / "wandb").glob(f"offline-run-*-{logged['id']}")  # beside the run's files
    assert logged["dir"].is_dir() and offline in logged["dir"].parents
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert {k: logged["summary"][k] for k in metrics} == metrics
    assert wandb.run is None  # finished, so the next job of a sweep starts its own run


def test_resume_continues_the_same_wandb_run(compose_cfg, tmp_path, seen):
    run.train(compose_cfg(*TINY, "trainer.max_epochs=1"))
    first = seen["runs"][0]["id"]
    ckpt = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=False)
    assert ckpt["wandb_run_id"] == first
    (tmp_path / "run" / "metrics.json").unlink()  # stopped before its end: a finished run would be read-only
    run.train(compose_cfg(*TINY, "trainer.max_epochs=2", "resume=auto"))
    assert seen["runs"][1]["id"] == first
    assert seen["runs"][1]["summary"]["epoch"] == 2


def test_a_raising_run_is_finished(compose_cfg, seen, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    cfg = compose_cfg(*TINY, "trainer.max_epochs=1")
    monkeypatch.setattr(run, "_evaluate_best", boom)
    with pytest.raises(RuntimeError, match="boom"):
        run.train(cfg)
    assert len(seen["runs"]) == 1 and wandb.run is None


KEY = "0123456789abcdef0123456789abcdef01234567"  # 40 hex characters, the shape of a W&B API key


@pytest.fixture
def online(monkeypatch, tmp_path) -> None:
    """W&B would go online: a key, no WANDB_MODE, no user settings file (it could name another host)."""
    monkeypatch.setenv("WANDB_API_KEY", KEY)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb_config"))


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _fallback_note(capsys, host: str, why: str, run_dir: Path) -> None:
    (line,) = [line for line in capsys.readouterr().out.splitlines() if "W&B at" in line]
    one_line(line, f"note: W&B at {host} is unreachable ({why}", "logged offline")
    assert line.endswith(f"wandb sync {run_dir / 'wandb' / 'offline-run-*'}"), line


def test_a_key_without_network_falls_back_to_offline_in_seconds_and_the_run_finishes(
    compose_cfg, tmp_path, seen, online, monkeypatch, capsys
):
    host = f"127.0.0.1:{_closed_port()}"  # connection refused, as a machine without network answers at once
    monkeypatch.setenv("WANDB_BASE_URL", f"http://{host}")
    start = time.perf_counter()
    run.train(compose_cfg(*TINY, "trainer.max_epochs=1"))
    assert time.perf_counter() - start < 60  # online, W&B would wait 90 s and raise
    assert os.environ["WANDB_MODE"] == "offline"
    _fallback_note(capsys, host, "Connection refused", tmp_path / "run")
    (logged,) = seen["runs"]
    assert list((tmp_path / "run" / "wandb").glob(f"offline-run-*-{logged['id']}"))
    assert (tmp_path / "run" / "metrics.json").is_file()


def test_a_host_that_never_answers_is_given_up_on_after_the_timeout(compose_cfg, tmp_path, online, monkeypatch, capsys):
    with socket.socket() as silent:  # accepts the connection (the kernel does), never answers a request
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        host = f"127.0.0.1:{silent.getsockname()[1]}"
        monkeypatch.setenv("WANDB_BASE_URL", f"http://{host}")
        monkeypatch.setattr(wandb_run, "REACH_SECONDS", 0.5)
        cfg = compose_cfg("logger=wandb")
        start = time.perf_counter()
        wandb_run.choose_mode(cfg)
        assert time.perf_counter() - start < 3
    assert os.environ["WANDB_MODE"] == "offline" and cfg.logger.wandb.mode == "offline"
    _fallback_note(capsys, host, "timed out", tmp_path / "run")


def test_a_name_lookup_that_hangs_is_cut_at_the_deadline(monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", lambda *args, **kwargs: time.sleep(5))
    start = time.perf_counter()
    assert wandb_run.unreachable("https://api.wandb.ai", 0.2) == "no answer within 0.2 s"
    assert time.perf_counter() - start < 2  # the timeout and at most a second more


def test_a_host_that_answers_keeps_the_run_online(compose_cfg, online, monkeypatch, capsys):
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)  # answers 501
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{server.server_port}")
        cfg = compose_cfg("logger=wandb")
        wandb_run.choose_mode(cfg)
    finally:
        server.shutdown()
        server.server_close()
    assert "WANDB_MODE" not in os.environ and "mode" not in cfg.logger.wandb
    assert "W&B at" not in capsys.readouterr().out


def test_no_key_logs_offline_without_a_check(compose_cfg, tmp_path, online, monkeypatch, capsys):
    monkeypatch.delenv("WANDB_API_KEY")
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    monkeypatch.setattr(wandb_run, "unreachable", lambda *args: pytest.fail("checked the host without a key"))
    wandb_run.choose_mode(compose_cfg("logger=wandb"))
    assert os.environ["WANDB_MODE"] == "offline"
    assert "W&B at" not in capsys.readouterr().out


class _NotWandb(http.server.BaseHTTPRequestHandler):
    """A web server without W&B's API: 404 to the POST W&B sends to /graphql."""

    def do_POST(self) -> None:
        self.send_error(404)

    def log_message(self, *args: object) -> None:
        pass


def test_a_host_without_wandbs_api_falls_back_to_offline(compose_cfg, tmp_path, online, monkeypatch, capsys):
    server = http.server.HTTPServer(("127.0.0.1", 0), _NotWandb)  # W&B itself would raise CommError (HTTP 404)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host = f"127.0.0.1:{server.server_port}"
    try:
        monkeypatch.setenv("WANDB_BASE_URL", f"http://{host}")
        cfg = compose_cfg("logger=wandb")
        wandb_run.choose_mode(cfg)
    finally:
        server.shutdown()
        server.server_close()
    assert os.environ["WANDB_MODE"] == "offline" and cfg.logger.wandb.mode == "offline"
    _fallback_note(capsys, host, f"HTTP 404 Not Found from http://{host}/graphql: no W&B server there", tmp_path / "run")


@pytest.mark.parametrize("insecure", [False, True])
def test_a_failing_tls_handshake_falls_back_to_offline(compose_cfg, tmp_path, online, monkeypatch, capsys, insecure):
    asked = []

    def urlopen(request, timeout, context):  # a certificate the system's CAs do not sign (a proxy's, self-signed)
        asked.append((request.get_method(), request.full_url, context.verify_mode))
        if context.verify_mode == ssl.CERT_NONE:
            return io.BytesIO(b'{"data": {"__typename": "Query"}}')
        failed = ssl.SSLCertVerificationError(
            1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate (_ssl.c:1000)"
        )
        raise urllib.error.URLError(failed)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.example.org")
    if insecure:  # W&B would skip the check as well
        monkeypatch.setenv("WANDB_INSECURE_DISABLE_SSL", "true")
    cfg = compose_cfg("logger=wandb")
    wandb_run.choose_mode(cfg)
    assert asked == [("POST", "https://wandb.example.org/graphql", ssl.CERT_NONE if insecure else ssl.CERT_REQUIRED)]
    if insecure:
        assert "WANDB_MODE" not in os.environ and "mode" not in cfg.logger.wandb
        assert "W&B at" not in capsys.readouterr().out
        return
    assert os.environ["WANDB_MODE"] == "offline" and cfg.logger.wandb.mode == "offline"
    why = "TLS handshake failed: certificate verify failed: self-signed certificate"
    _fallback_note(capsys, "wandb.example.org", why, tmp_path / "run")
