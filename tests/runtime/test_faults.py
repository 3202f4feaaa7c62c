"""Fault injection on the default experiment (MemN2N, generated bAbI): a run killed at a random step and
resumed ends exactly where an unbroken run ends, with its whole CSV history; Ctrl-C prints the command that
resumes; a second process is refused while one trains; a refused command leaves a finished run byte-identical."""

from __future__ import annotations

import json
import random
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import FAST, ROOT, cli_error, one_line, train_once
from test_run_dir_integrity import _digest, _guard_refuses, _hydra_cfg

from attnmem.runtime import checkpoint, run

# 20 epochs: the kills below land in training, where the resumed run logs again what the killed one would have (a
# kill between an epoch's checkpoint and its train/ row, or after the last checkpoint: tests/runtime/test_resume.py); at 8
# epochs a fast machine ended training inside a kill's delay
EPOCHS = 20
RUN = [*FAST, "data.source.num_train=400", "data.source.num_val=40", "data.source.num_test=40",
       "data.batch_size=32", f"trainer.max_epochs={EPOCHS}"]


def _metrics(run_dir: Path) -> dict:
    return {k: v for k, v in json.loads((run_dir / "metrics.json").read_text()).items() if not k.endswith("_seconds")}


@pytest.fixture(scope="module")
def unbroken(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The run trained without a fault, once for the module."""
    yield train_once(tmp_path_factory, "unbroken", *RUN)


def _start(run_dir: Path) -> subprocess.Popen:
    # SIGINT back to its default: a test run started in the background (`make test &`) ignores it, and so would
    # the child it starts, Python then installing no KeyboardInterrupt handler
    return subprocess.Popen([sys.executable, "train.py", *RUN, f"hydra.run.dir={run_dir}"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for_epoch(process: subprocess.Popen, run_dir: Path, epoch: int) -> bool:
    """Wait until `last.ckpt` holds epoch `epoch` or later (read from the file: polling may lag under load)."""
    last, start = run_dir / "checkpoints" / "last.ckpt", time.perf_counter()
    while process.poll() is None and time.perf_counter() - start < 180:
        if last.exists() and checkpoint.load(last)["epoch"] >= epoch:
            return True
        time.sleep(0.02)
    return False


@pytest.mark.slow  # three training processes killed, each then resumed in-process
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sigkill_at_a_random_step_then_resume_equals_an_unbroken_run(compose_cfg, tmp_path, unbroken, seed):
    rng = random.Random(seed)
    epoch, delay = rng.randint(0, 2), rng.uniform(0, 0.5)  # killed `delay` s after the checkpoint of `epoch`
    killed = tmp_path / "killed"
    process = _start(killed)
    saved = _wait_for_epoch(process, killed, epoch)
    time.sleep(delay)
    process.send_signal(signal.SIGKILL)
    _, stderr = process.communicate(timeout=30)
    assert saved and process.returncode == -signal.SIGKILL, stderr[-2000:]
    assert not (killed / "metrics.json").exists(), "the run finished before the kill: make the epochs longer"
    last = checkpoint.load(killed / "checkpoints" / "last.ckpt")["epoch"]
    assert last < EPOCHS - 1, "the kill landed after the last training epoch: make the run longer"
    for ckpt in (killed / "checkpoints").glob("*.ckpt"):  # whatever is named .ckpt is complete
        assert checkpoint.load(ckpt)["state_dict"]
    assert (killed / ".lock").is_file()  # the killed process left its lock: the resume takes it over, saying so

    run.train(compose_cfg(*RUN, "resume=auto", run_dir=killed))
    assert _metrics(killed) == _metrics(unbroken)
    assert _metrics(unbroken)["epoch"] == EPOCHS
    csv = (killed / "csv" / "metrics.csv").read_text()
    assert csv == (unbroken / "csv" / "metrics.csv").read_text()  # every epoch, before the kill and after
    assert csv.count("\n") > 20
    assert not (killed / ".lock").exists()
    assert sorted(p.name for p in (killed / "checkpoints").iterdir()) == sorted(
        p.name for p in (unbroken / "checkpoints").iterdir())  # one last.ckpt, no last-v1.ckpt
    resumes = json.loads((killed / "manifest.json").read_text())["resumes"]
    assert [r["checkpoint"] for r in resumes] == ["checkpoints/last.ckpt"] and resumes[0]["changed"] == {}


@pytest.mark.slow  # a training process stopped with SIGINT
def test_ctrl_c_prints_one_line_with_the_command_that_resumes(compose_cfg, tmp_path, unbroken):
    stopped = tmp_path / "stopped"
    process = _start(stopped)
    assert _wait_for_epoch(process, stopped, 1)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-2000:]
    lines = [line for line in stderr.splitlines() if line.startswith("interrupted")]
    assert len(lines) == 1, stderr[-2000:]
    one_line(lines[0], "interrupted at epoch", "the run is unfinished", "python train.py",
             f"hydra.run.dir={stopped} resume=auto")
    assert not (stopped / ".lock").exists() and not (stopped / "metrics.json").exists()

    command = shlex.split(lines[0].split("from its last checkpoint, ", 1)[1])
    overrides = [a for a in command[2:] if not a.startswith("hydra.run.dir=")]
    assert overrides == [*RUN, "resume=auto"]
    run.train(compose_cfg(*overrides, run_dir=stopped))
    assert _metrics(stopped) == _metrics(unbroken)
    assert (stopped / "csv" / "metrics.csv").read_text() == (unbroken / "csv" / "metrics.csv").read_text()


@pytest.mark.slow  # a subprocess: ~9 s
def test_a_second_process_is_refused_while_one_trains_before_hydra_writes(tmp_path):
    busy = tmp_path / "cli"  # the run directory cli_error passes
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        busy.mkdir()
        (busy / ".lock").write_text(json.dumps({"pid": holder.pid, "host": __import__("socket").gethostname(),
                                                "slurm_job_id": None, "started": "2026-12-01T10:00:00+00:00"}))
        before = _digest(busy)
        line = cli_error(tmp_path, *FAST)
        one_line(line, f"hydra.run.dir={busy} is in use: pid {holder.pid} on host", "wait for that run to end",
                 "new hydra.run.dir")
        assert _digest(busy) == before  # no .hydra/: Hydra wrote nothing
    finally:
        holder.kill()
        holder.wait()


def test_refused_commands_leave_a_finished_run_byte_identical(compose_cfg, unbroken):
    before = _digest(unbroken)  # (compose_cfg initialises Hydra for the guard's compose)
    refused = [("model.hops=1",), ("resume=auto",), ("resume=auto", "optimizer.lr=0.1"), ("ckpt_path=last",),
               ("trainer.max_epochs=9", "resume=auto"), ("threads=2",)]
    for overrides in refused:
        line = _guard_refuses("on_run_start", _hydra_cfg(*RUN, *overrides, f"hydra.run.dir={unbroken}"))
        one_line(line, f"hydra.run.dir={unbroken} holds a finished run")
    assert _digest(unbroken) == before
