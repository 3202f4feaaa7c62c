"""Resuming keeps everything: one `last.ckpt`, the checkpoint metrics.json names, the whole history of every
logger and of the learning curves, options that cannot change refused and those that can recorded; a run
shorter than one epoch (`trainer.max_steps`) validated and checkpointed; one process per run directory."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import FAST, one_line
from omegaconf import OmegaConf
from test_configs import _data_overrides
from test_run_dir_integrity import _digest, _guard_refuses, _hydra_cfg

from attnmem.callbacks import csv_logger, plots
from attnmem.callbacks.early_stopping import EarlyStopping
from attnmem.core.errors import UserError
from attnmem.runtime import checkpoint, load, resume, run, run_lock

# 60 questions in batches of 32: two steps an epoch
TINY = [*FAST, "data.source.num_train=60", "data.source.num_val=20", "data.source.num_test=20", "data.batch_size=32"]


def _unfinished(compose_cfg, tmp_path: Path, *overrides: str, epochs: int = 2) -> Path:
    """A run trained `epochs` epochs whose metrics.json is gone: what a run killed after its last save leaves."""
    out = tmp_path / "unfinished"
    run.train(compose_cfg(*TINY, f"trainer.max_epochs={epochs}", *overrides, run_dir=out))
    (out / "metrics.json").unlink()
    return out


def test_an_unfinished_run_reused_without_resume_is_refused(compose_cfg, tmp_path):
    out = _unfinished(compose_cfg, tmp_path)
    before = _digest(out)
    line = _guard_refuses("on_run_start", _hydra_cfg(*TINY, f"hydra.run.dir={out}"))
    one_line(line, f"hydra.run.dir={out} holds an unfinished run (checkpoints/last.ckpt)", "add resume=auto",
             "new hydra.run.dir")
    assert _digest(out) == before
    with pytest.raises(UserError, match="holds an unfinished run"):
        run.train(compose_cfg(*TINY, run_dir=out))


def test_a_run_killed_after_its_last_epoch_resumes_to_the_same_metrics(compose_cfg, tmp_path):
    out = tmp_path / "run"
    run.train(compose_cfg(*TINY, "trainer.max_epochs=2", run_dir=out))
    finished = json.loads((out / "metrics.json").read_text())
    (out / "metrics.json").unlink()  # killed after the last checkpoint, before metrics.json: nothing left to train
    run.train(compose_cfg(*TINY, "trainer.max_epochs=2", "resume=auto", run_dir=out))
    resumed = json.loads((out / "metrics.json").read_text())
    assert {"train/loss", "train/acc"} <= finished.keys()
    assert {k: v for k, v in resumed.items() if not k.endswith("_seconds")} == {
        k: v for k, v in finished.items() if not k.endswith("_seconds")}


@pytest.mark.parametrize("replicas", [1, 2])
@pytest.mark.parametrize("saved_at", ["epoch_end", "validation_end"])
def test_a_run_killed_before_an_epochs_train_row_was_logged_resumes_with_that_row(compose_cfg, tmp_path, replicas,
                                                                                   saved_at):
    # last.ckpt is written before the CSV log has the epoch's train/ row: at the training epoch's end after the
    # module's hook, or (validating twice an epoch) at validation's end before it. A kill in between leaves that
    # checkpoint and a log without the row; the resumed run goes on past that epoch (to a third one here) or, after
    # the last epoch, has nothing left to train: either way it reports the epoch and its log has the row
    overrides = [*TINY, f"replicas={replicas}"]
    overrides += ["+trainer.val_check_interval=0.5"] if saved_at == "validation_end" else []
    unbroken = tmp_path / "unbroken"
    run.train(compose_cfg(*overrides, "trainer.max_epochs=3", run_dir=unbroken))
    out = tmp_path / "run"
    run.train(compose_cfg(*overrides, "trainer.max_epochs=2", run_dir=out))
    finished = json.loads((out / "metrics.json").read_text())
    (out / "metrics.json").unlink()
    log = out / "csv" / "metrics.csv"
    whole = log.read_text()
    rows = whole.splitlines()
    header = rows[0].split(",")
    trained = [i for i, row in enumerate(rows[1:], 1) if row.split(",")[header.index("train/loss")]]
    key = "train/loss" if replicas == 1 else "replicas/0/train/loss"  # the last epoch's, as its CSV row has it
    assert finished[key] == pytest.approx(float(rows[trained[-1]].split(",")[header.index(key)]), rel=1e-6)
    log.write_text("\n".join(rows[: trained[-1]] + rows[trained[-1] + 1:]) + "\n")
    longer = Path(shutil.copytree(out, tmp_path / "longer"))

    run.train(compose_cfg(*overrides, "trainer.max_epochs=2", "resume=auto", run_dir=out))
    resumed = json.loads((out / "metrics.json").read_text())
    assert {k: v for k, v in resumed.items() if k.startswith(("train/", "replicas/"))} == {
        k: v for k, v in finished.items() if k.startswith(("train/", "replicas/"))}
    assert log.read_text() == whole
    run.train(compose_cfg(*overrides, "trainer.max_epochs=3", "resume=auto", run_dir=longer))
    got, want = ((d / "csv" / "metrics.csv").read_text().splitlines() for d in (longer, unbroken))
    if saved_at == "epoch_end":
        assert got == want
    else:  # resumed at a validation's end, the later epochs do not retrace the unbroken run (docs/architecture.md)
        assert got[: trained[-1] + 1] == want[: trained[-1] + 1]

        def filled(lines: list[str]) -> list[list[bool | str]]:
            return [[cells[0], cells[2], *map(bool, cells)] for cells in (line.split(",") for line in lines)]

        assert filled(got) == filled(want)  # every row, with its epoch, step and columns


def test_a_checkpoint_records_the_csv_logs_rows_and_one_without_that_record_keeps_those_before_its_step(compose_cfg,
                                                                                                       tmp_path):
    unbroken = tmp_path / "unbroken"
    run.train(compose_cfg(*TINY, "trainer.max_epochs=3", run_dir=unbroken))
    out = _unfinished(compose_cfg, tmp_path)
    last = out / "checkpoints" / "last.ckpt"
    state = checkpoint.load(last)
    record = state.pop(csv_logger.LOG_KEY)
    # written at epoch 1's end: the learning rate (steps 0, 2), validation (steps 1, 3) and epoch 0's training rows
    # before it, and epoch 1's training row, at the epoch's last step, to come
    assert record["rows"] == 5
    assert record["row"]["epoch"] == 1 and record["row"]["step"] == 3
    assert sorted(record["row"]) == ["epoch", "step", "train/acc", "train/error", "train/loss"]
    torch.save(state, last)  # as a checkpoint written before the record: its rows before step 4 are kept
    run.train(compose_cfg(*TINY, "trainer.max_epochs=3", "resume=auto", run_dir=out))
    assert (out / "csv" / "metrics.csv").read_text() == (unbroken / "csv" / "metrics.csv").read_text()


def test_a_moved_run_resumes_with_one_last_ckpt_and_metrics_name_the_checkpoint_load_run_uses(compose_cfg, tmp_path):
    moved = Path(shutil.move(_unfinished(compose_cfg, tmp_path), tmp_path / "moved"))
    run.train(compose_cfg(*TINY, "trainer.max_epochs=4", "resume=auto", run_dir=moved))
    metrics = json.loads((moved / "metrics.json").read_text())
    named = moved / metrics["checkpoint"]
    assert named.parent == moved / "checkpoints" and named.is_file()
    assert sorted(p.name for p in named.parent.iterdir()) == sorted({named.name, "last.ckpt"})  # no last-v1.ckpt
    best = checkpoint.load(named)["state_dict"]
    model = load.load_run(moved).model
    assert all(torch.equal(v, best[f"net.{k}"]) for k, v in model.state_dict().items())
    # a run whose metrics.json names a checkpoint that is gone says so, instead of loading another one
    metrics["checkpoint"] = "checkpoints/epoch099.ckpt"
    (moved / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(UserError) as err:
        load.load_run(moved)
    one_line(str(err.value), "was computed from checkpoints/epoch099.ckpt, which is gone", "restore that file")


def test_resume_refuses_options_it_cannot_apply_and_records_those_it_can(compose_cfg, tmp_path):
    out = _unfinished(compose_cfg, tmp_path)
    before = _digest(out)
    refused = {
        "optimizer.lr=0.0001": ("optimizer.lr: 0.005 -> 0.0001", "restores the optimizer's state"),
        "model.hops=1": ("model.hops: 3 -> 1", "weights were trained with it"),
        "data.batch_size=8": ("data.batch_size: 32 -> 8", "the data it started with"),
        "seed=3": ("seed: 0 -> 3", "keeps the options it started with"),
    }
    for override, fragments in refused.items():
        line = _guard_refuses("on_run_start", _hydra_cfg(*TINY, "trainer.max_epochs=2", override, "resume=auto",
                                                          f"hydra.run.dir={out}"))
        one_line(line, "resume=auto cannot change", *fragments, "new hydra.run.dir")
        with pytest.raises(UserError, match="resume=auto cannot change"):
            run.train(compose_cfg(*TINY, "trainer.max_epochs=2", override, "resume=auto", run_dir=out))
    assert _digest(out, skip=".hydra") == {k: v for k, v in before.items() if not k.startswith(".hydra")}
    run.train(compose_cfg(*TINY, "trainer.max_epochs=3", "threads=2", "resume=auto", run_dir=out))
    resumes = json.loads((out / "manifest.json").read_text())["resumes"]
    assert [r["changed"] for r in resumes] == [{"trainer.max_epochs": {"old": 2, "new": 3},
                                                "threads": {"old": 1, "new": 2}}]
    assert json.loads((out / "metrics.json").read_text())["epoch"] == 3


def test_a_run_made_before_an_option_existed_resumes_with_its_default_and_says_so(compose_cfg, tmp_path, capsys):
    cfg = compose_cfg(*TINY, "trainer.max_epochs=3", "resume=auto")
    recorded = OmegaConf.to_container(cfg, resolve=False)
    del recorded["replicas"], recorded["callbacks"]["curriculum"]  # as an older version recorded its config
    recorded["callbacks"]["finite_loss"] = None  # an option it had, switched off: switching it on is refused
    (tmp_path / "manifest.json").write_text(json.dumps({"config": recorded}))
    with pytest.raises(UserError, match=r"cannot change callbacks.finite_loss._target_: None -> "):
        resume.changes(tmp_path, cfg)
    recorded["callbacks"]["finite_loss"] = OmegaConf.to_container(cfg.callbacks.finite_loss)
    (tmp_path / "manifest.json").write_text(json.dumps({"config": recorded}))
    assert resume.changes(tmp_path, cfg)["replicas"] == {"old": None, "new": 1, "new_option": True}
    assert capsys.readouterr().err == ""  # the run-directory guard checks without a note; the run itself says it
    resume.changes(tmp_path, cfg, note=True)
    assert capsys.readouterr().err == (
        f"note: {tmp_path} started before these options existed; resuming with their defaults: "
        "callbacks.curriculum._target_=attnmem.callbacks.curriculum.CurriculumCallback, replicas=1\n"
    )


def test_tensorboard_and_learning_curves_keep_the_epochs_before_a_resume(compose_cfg, tmp_path, monkeypatch):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = _unfinished(compose_cfg, tmp_path, "logger=tensorboard")
    drawn = []
    monkeypatch.setattr(plots, "learning_curves", lambda history: drawn.append(history) or plots.plt.figure())
    # the learning curves come from the CSV log, so this resume logs to both
    run.train(compose_cfg(*TINY, "logger=tensorboard", "+logger.csv._target_=attnmem.callbacks.csv_logger.CSVLogger",
                          f"+logger.csv.save_dir={out}", "+logger.csv.name=csv", "trainer.max_epochs=4",
                          "resume=auto", run_dir=out))
    events = EventAccumulator(str(out / "tensorboard")).Reload()
    steps = [e.step for e in events.Scalars("val/acc")]
    per_epoch = 2
    # epochs 0-3 at their last step, then the final evaluation; the first run's final evaluation is purged
    assert steps == [per_epoch - 1, 2 * per_epoch - 1, 3 * per_epoch - 1, 4 * per_epoch - 1, 4 * per_epoch]
    assert sorted(drawn[0]["val/acc"]) == [2, 3]  # the CSV log began at the resume: epochs since then


def test_learning_curves_of_a_resumed_run_show_every_epoch(compose_cfg, tmp_path, monkeypatch):
    out = _unfinished(compose_cfg, tmp_path)
    drawn = []
    monkeypatch.setattr(plots, "learning_curves", lambda history: drawn.append(history) or plots.plt.figure())
    run.train(compose_cfg(*TINY, "trainer.max_epochs=4", "resume=auto", run_dir=out))
    assert sorted(drawn[0]["val/acc"]) == sorted(drawn[0]["train/loss"]) == [0, 1, 2, 3]


FAMILIES = [("memn2n", "babi_gen"), ("ntm", "copy"), ("transformer", "reverse"), ("span_baseline", "span_gen"),
            ("hopfield_pooling_qa", "babi_gen")]


@pytest.mark.parametrize(("model", "data"), FAMILIES)
def test_max_steps_shorter_than_an_epoch_validates_and_checkpoints(compose_cfg, tmp_path, model, data):
    out = tmp_path / "short"
    # every family: two steps an epoch or more
    run.train(compose_cfg(*FAST, f"model={model}", f"data={data}", *_data_overrides(data, tmp_path),
                          "trainer.max_steps=1", run_dir=out))  # as typed: no `+`
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["global_step"] == 1 and metrics["checkpoint"].startswith("checkpoints/epoch000")
    assert (out / metrics["checkpoint"]).is_file() and (out / "checkpoints" / "last.ckpt").is_file()
    assert any(k.startswith("val/") for k in metrics)


def test_early_stopping_waits_for_its_metric():
    stopper = EarlyStopping(monitor="val/acc", mode="max")
    stopper._run_early_stopping_check(SimpleNamespace(callback_metrics={"train/loss": 1.0}, fast_dev_run=False))
    with pytest.raises(RuntimeError, match="val/acc"):  # validation has run, and the monitor is not among its metrics
        stopper._run_early_stopping_check(SimpleNamespace(callback_metrics={"val/loss": 1.0}, fast_dev_run=False))


def _lock(run_dir: Path, **owner: object) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / run_lock.LOCK
    path.write_text(json.dumps({"host": socket.gethostname(), "slurm_job_id": None,
                                "started": "2026-12-01T10:00:00+00:00", **owner}))
    return path


def test_a_live_process_lock_is_refused_and_a_dead_one_taken_over_saying_so(tmp_path, capsys):
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        path = _lock(tmp_path / "a", pid=holder.pid)
        with pytest.raises(UserError) as err:
            run_lock.acquire(tmp_path / "a")
        one_line(str(err.value), f"is in use: pid {holder.pid} on host {socket.gethostname()}", "wait for that run")
        assert json.loads(path.read_text())["pid"] == holder.pid
    finally:
        holder.kill()
        holder.wait()
    half = tmp_path / "a" / "checkpoints" / f".last.ckpt.{holder.pid}.tmp"  # killed while writing a checkpoint
    other = tmp_path / "a" / f".metrics.json.{holder.pid + 1}.tmp"  # another process's: left alone
    half.parent.mkdir()
    half.write_bytes(b"partial")
    other.write_text("{}")
    run_lock.acquire(tmp_path / "a")  # the same lock, its process now gone
    said = capsys.readouterr().out
    assert "taking over the lock of a process that is gone" in said and "1 file(s) it left half-written removed" in said
    assert not half.exists() and other.exists()
    assert json.loads(path.read_text())["pid"] == os.getpid()
    run_lock.release(tmp_path / "a")
    assert not path.exists()


def test_another_hosts_lock_is_never_taken_but_its_own_slurm_job_takes_it(tmp_path, monkeypatch, capsys):
    path = _lock(tmp_path / "b", pid=1, host="node-7", slurm_job_id="4242")
    with pytest.raises(UserError) as err:
        run_lock.acquire(tmp_path / "b")
    one_line(str(err.value), "locked by pid 1 on host node-7 (SLURM job 4242)", "cannot be checked from this host",
             f"delete {path}")
    monkeypatch.setenv("SLURM_JOB_ID", "4242")  # the requeued job resuming its own run
    run_lock.acquire(tmp_path / "b")
    assert "SLURM job 4242 takes over its own lock" in capsys.readouterr().out
    assert json.loads(path.read_text())["pid"] == os.getpid()
    run_lock.release(tmp_path / "b")


def test_a_requeued_slurm_job_takes_its_own_lock_over_and_resumes_its_run(compose_cfg, tmp_path, monkeypatch, capsys):
    out = _unfinished(compose_cfg, tmp_path)
    _lock(out, pid=1, host="node-3", slurm_job_id="777")  # the first attempt, killed at its time limit elsewhere
    monkeypatch.setenv("SLURM_JOB_ID", "777")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")  # submitit requeued the job: same overrides, no resume=auto
    run.train(compose_cfg(*TINY, "trainer.max_epochs=3", run_dir=out))
    said = " ".join(capsys.readouterr().out.split())
    assert "SLURM job 777 takes over its own lock" in said and "SLURM requeued this job (restart 1)" in said
    assert json.loads((out / "metrics.json").read_text())["epoch"] == 3 and not (out / run_lock.LOCK).exists()
    assert [r["checkpoint"] for r in json.loads((out / "manifest.json").read_text())["resumes"]] == [
        "checkpoints/last.ckpt"]
