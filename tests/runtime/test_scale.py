"""Scaling up: trainer configs, the machine check (device, count, precision), DDP over two CPU processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import CONF, FAST, ROOT
from omegaconf import OmegaConf

from attnmem.core.errors import UserError
from attnmem.runtime import distributed, hardware, run

TRAINERS = sorted(p.stem for p in (CONF / "trainer").glob("*.yaml"))
TINY = [*FAST, "data.source.num_train=256", "data.source.num_val=40", "data.source.num_test=40", "data.batch_size=32"]


def _fake_gpus(monkeypatch, count: int, bf16: bool = True) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: bf16)


@pytest.mark.parametrize("trainer", TRAINERS)
def test_every_trainer_takes_num_nodes_and_precision(compose_cfg, trainer):
    cfg = compose_cfg(f"trainer={trainer}", "trainer.num_nodes=2", "trainer.precision=16-mixed")
    assert cfg.trainer.num_nodes == 2 and cfg.trainer.precision == "16-mixed"


def test_gpu_configs_train_in_bf16_on_all_gpus_with_ddp(compose_cfg):
    gpu, ddp = compose_cfg("trainer=gpu").trainer, compose_cfg("trainer=ddp").trainer
    assert (gpu.accelerator, gpu.devices, gpu.precision) == ("gpu", 1, "bf16-mixed")
    assert (ddp.devices, ddp.strategy, ddp.precision, ddp.sync_batchnorm) == (-1, "ddp", "bf16-mixed", True)
    ddp_cpu = compose_cfg("trainer=ddp_cpu").trainer
    assert (ddp_cpu.accelerator, ddp_cpu.devices, ddp_cpu.strategy) == ("cpu", 2, "ddp")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_gpu_trainer_without_a_gpu_says_so_and_names_trainer_cpu(compose_cfg):
    with pytest.raises(UserError) as err:
        run.setup(compose_cfg("trainer=gpu", *TINY))
    message = str(err.value)
    assert "no GPU is visible" in message and "trainer=cpu" in message and "\n" not in message


@pytest.mark.parametrize(("devices", "fragment"), [(4, "found 1 GPU"), ("4", "found 1 GPU"), ([0, 2], "index 2")])
def test_more_devices_than_gpus_gives_the_number_found(compose_cfg, monkeypatch, devices, fragment):
    _fake_gpus(monkeypatch, 1)
    cfg = compose_cfg("trainer=gpu")
    cfg.trainer.devices = devices
    with pytest.raises(UserError, match=fragment) as err:
        hardware.check(cfg.trainer)
    assert f"trainer.devices={devices}" in str(err.value)
    cfg.trainer.devices = 1
    assert hardware.check(cfg.trainer) == "bf16-mixed"


def test_unsupported_precision_names_the_supported_ones(compose_cfg, monkeypatch):
    with pytest.raises(UserError) as err:
        run.setup(compose_cfg("trainer.precision=bf16-true", *TINY))
    assert str(err.value) == (
        "trainer.precision=bf16-true is not supported on cpu: use trainer.precision=32-true|64-true|bf16-mixed|16-mixed"
    )
    monkeypatch.setattr(hardware, "_mps_available", lambda: True)
    with pytest.raises(UserError, match=r"not supported on mps: use trainer.precision=32-true\|bf16-mixed\|16-mixed"):
        hardware.check(compose_cfg("trainer=mps", "trainer.precision=64").trainer)


def test_16_mixed_on_cpu_trains_in_bf16_with_a_note(compose_cfg, capsys):
    _, _, trainer = run.setup(compose_cfg("trainer.precision=16-mixed", *TINY))
    assert trainer.precision == "bf16-mixed"
    assert "16-mixed on CPU trains in bf16-mixed" in capsys.readouterr().out
    assert hardware.check(OmegaConf.create({"accelerator": "cpu", "precision": 32})) == "32-true"


def test_bf16_on_a_gpu_without_bfloat16_falls_back_to_16_mixed(compose_cfg, monkeypatch, capsys):
    _fake_gpus(monkeypatch, 2, bf16=False)
    assert hardware.check(compose_cfg("trainer=ddp").trainer) == "16-mixed"
    assert "no bfloat16" in capsys.readouterr().out


def test_split_batch_keeps_the_global_batch():
    datamodule = SimpleNamespace(batch_size=64)
    distributed.split_batch(datamodule, 1)
    assert datamodule.batch_size == 64
    distributed.split_batch(datamodule, 2)
    assert datamodule.batch_size == 32
    with pytest.raises(UserError, match="data.batch_size=32 .* over the 3 processes .* a multiple of 3"):
        distributed.split_batch(datamodule, 3)


def test_a_multirun_job_relaunches_as_its_own_single_run():
    hydra = OmegaConf.create(
        {
            "overrides": {
                "task": ["trainer=ddp_cpu", "model.hops=2"],
                "hydra": [
                    "hydra.sweep.dir=/s",
                    "hydra/launcher=basic",
                    "hydra.searchpath=[file://x]",
                    "hydra.mode=MULTIRUN",
                ],
            }
        }
    )
    argv = ["train.py", "-m", "-cn", "train", "trainer=ddp_cpu", "model.hops=1,2", "hydra.sweep.dir=/s"]
    assert distributed.single_run_argv(argv, hydra) == [
        "train.py",
        "-cn",
        "train",
        "trainer=ddp_cpu",
        "model.hops=2",
        "hydra.searchpath=[file://x]",
    ]


def _train_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "train.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "ATTNMEM_ROOT": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


DDP = ["trainer=ddp_cpu", "trainer.max_epochs=2", *TINY, "model=memn2n"]  # MemN2N draws its random noise (RN)


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory) -> Path:
    """The root of a DDP run over two CPU processes, of seed 1."""
    root = tmp_path_factory.mktemp("ddp")
    _train_cli(root, *DDP, "seed=1")
    return root


@pytest.mark.slow
def test_ddp_cpu_run_makes_one_directory_and_reduces_metrics_over_processes(ddp_run, compose_cfg, tmp_path):
    runs = list((ddp_run / "outputs" / "runs").glob("*/*"))
    assert len(runs) == 1 and {p.name for p in runs[0].iterdir()} >= {"metrics.json", "manifest.json", "plots"}
    metrics = json.loads((runs[0] / "metrics.json").read_text())
    assert metrics["global_step"] == 2 * 256 // 32  # the global batch: as many steps as on one process
    # the test split evaluated again in one process: the same sums, so DDP's metrics were reduced over both halves
    ckpt = next((runs[0] / "checkpoints").glob("epoch*.ckpt"))
    single = run.evaluate(compose_cfg(f"ckpt_path={ckpt}", config_name="eval", run_dir=tmp_path / "eval"))
    assert single["test/acc"] == pytest.approx(metrics["test/acc"], abs=1e-6)
    assert single["test/loss"] == pytest.approx(metrics["test/loss"], rel=1e-5)


@pytest.mark.slow
def test_ddp_cpu_multirun_runs_each_job_once_in_one_tree(tmp_path):
    _train_cli(tmp_path, "-m", "trainer=ddp_cpu", "model.hops=1,2", "trainer.max_epochs=1", *TINY)
    assert not (tmp_path / "outputs" / "runs").exists()  # no rank re-ran a job as a run of its own
    trees = list((tmp_path / "outputs" / "multirun").iterdir())
    assert len(trees) == 1
    jobs = sorted(p.name for p in trees[0].iterdir() if p.is_dir())
    assert jobs == ["0", "1"]
    for job, hops in zip(jobs, (1, 2)):
        assert (trees[0] / job / "metrics.json").is_file()
        assert OmegaConf.load(trees[0] / job / ".hydra" / "config.yaml").model.hops == hops


def test_slurm_launcher_asks_for_the_trainers_nodes_and_devices(compose_cfg):
    from hydra import compose

    compose_cfg()  # Hydra initialised on conf/
    cfg = compose(
        "train",
        overrides=["hydra/launcher=submitit_slurm", "trainer=ddp", "trainer.devices=4", "trainer.num_nodes=2"],
        return_hydra_config=True,
    )
    launcher = cfg.hydra.launcher
    assert (launcher.nodes, launcher.tasks_per_node, launcher.gpus_per_node) == (2, 4, 4)
    assert launcher.max_num_timeout > 0 and launcher.signal_delay_s > 0  # requeued near the time limit
    for name in ("submitit_local", "joblib"):
        assert compose("train", overrides=[f"hydra/launcher={name}"], return_hydra_config=True).hydra.launcher


def test_a_requeued_slurm_job_resumes_from_its_last_checkpoint(compose_cfg, tmp_path, monkeypatch):
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    last.parent.mkdir(parents=True)
    last.write_bytes(b"")
    assert distributed.requeued_checkpoint(tmp_path / "run") is None  # not requeued: a fresh start
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    assert distributed.requeued_checkpoint(tmp_path / "run") == last
    assert run._resume_path(compose_cfg(), tmp_path / "run") == str(last)
    assert distributed.requeued_checkpoint(tmp_path / "elsewhere") is None  # requeued before its first checkpoint


def test_ddp_without_trainable_parameters_says_so(compose_cfg):
    with pytest.raises(UserError) as err:
        run.setup(compose_cfg("model=hopfield", "trainer=ddp_cpu", "data.size=64", "data.num_patterns=8"))
    assert str(err.value).startswith("Hopfield has no trainable parameters") and "trainer=cpu" in str(err.value)


@pytest.mark.slow
def test_ddp_cpu_replicas_each_train_as_the_single_ddp_run_of_their_seed(ddp_run, tmp_path):
    # each process holds both replicas, their batches split over the processes as a single run's are, and each
    # replica's random stream starts again from its seed when DDP re-seeds the run (its noise draws match)
    _train_cli(tmp_path, *DDP, "replicas=2", "seed=0", "callbacks.plots=null")
    (replicas,), (single,) = ((p / "outputs" / "runs").glob("*/*/metrics.json") for p in (tmp_path, ddp_run))
    replicas, single = json.loads(replicas.read_text()), json.loads(single.read_text())
    assert replicas["global_step"] == single["global_step"] == 2 * 256 // 32
    assert replicas["replicas/1/val/loss"] == pytest.approx(single["val/loss"], rel=1e-6)
    assert replicas["replicas/1/test/acc"] == pytest.approx(single["test/acc"], abs=1e-6)
    assert replicas["replicas/1/train/loss"] == pytest.approx(single["train/loss"], rel=1e-5)
