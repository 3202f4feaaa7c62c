"""A training process killed with SIGKILL and resumed with `resume=auto` ends where an unbroken run ends."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from conftest import FAST, ROOT

from attnmem.runtime import checkpoint, run

RUN = [*FAST, "data.source.num_train=400", "data.source.num_val=40", "data.source.num_test=40", "data.batch_size=32", "trainer.max_epochs=6"]


def _metrics(path):
    return {k: v for k, v in json.loads(path.read_text()).items() if not k.endswith("_seconds")}


@pytest.mark.slow
def test_sigkill_after_the_first_checkpoint_then_resume_equals_an_unbroken_run(compose_cfg, tmp_path):
    start = time.perf_counter()
    killed = tmp_path / "killed"
    process = subprocess.Popen(
        [sys.executable, "train.py", *RUN, f"hydra.run.dir={killed}"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    last = killed / "checkpoints" / "last.ckpt"
    while not last.exists() and process.poll() is None and time.perf_counter() - start < 120:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    _, stderr = process.communicate(timeout=30)
    assert last.exists(), stderr[-2000:]
    assert not (killed / "metrics.json").exists(), "the run finished before the kill: make the epochs longer"
    for ckpt in (killed / "checkpoints").glob("*.ckpt"):  # whatever is named .ckpt is complete
        assert checkpoint.load(ckpt)["state_dict"]

    run.train(compose_cfg(*RUN, "resume=auto", run_dir=killed))
    run.train(compose_cfg(*RUN, run_dir=tmp_path / "unbroken"))
    resumed, unbroken = _metrics(killed / "metrics.json"), _metrics(tmp_path / "unbroken" / "metrics.json")
    assert resumed == unbroken
    assert unbroken["epoch"] == 6
    print(f"kill and resume: {time.perf_counter() - start:.1f} s")
