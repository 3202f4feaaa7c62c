"""The pipeline end to end, in-process through the compose API: train, test, metrics, manifest, errors."""

from __future__ import annotations

import json
import shutil
import time
from typing import ClassVar

import pytest
from conftest import CONF, FAST, ROOT
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from torch import nn

from attnmem.core.errors import UserError
from attnmem.runtime import run

TINY = [*FAST, "data.batch_size=32", "data.source.num_train=200", "data.source.num_val=100", "data.source.num_test=100", "trainer.max_epochs=2"]


class SequenceOnlyModel(nn.Module):
    """A stand-in model of another family, for the compatibility check."""

    families: ClassVar[tuple[str, ...]] = ("sequence",)


def test_default_config_is_memn2n_on_generated_babi(compose_cfg):
    cfg = compose_cfg()
    assert cfg.model._target_ == "attnmem.tasks.qa_nets.MemN2NQA"
    assert cfg.model.hops == 3
    assert cfg.data._target_ == "attnmem.data.qa.datamodule.QADataModule"
    assert cfg.data.source._target_ == "attnmem.data.qa.babi_generator.BabiGenerator"
    assert list(cfg.data.tasks) == [1]
    assert cfg.attention._target_ == "attnmem.attention.Dot"
    assert cfg.threads == 1 and cfg.trainer.accelerator == "cpu"


def test_model_yaml_brings_its_own_data_and_explicit_data_wins(tmp_path):
    conf = tmp_path / "conf"
    shutil.copytree(CONF, conf)
    train_yaml = conf / "train.yaml"
    train_yaml.write_text(train_yaml.read_text().replace("  - data: babi_gen", "  - data: babi"))
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        assert compose("train", overrides=["model=memn2n"]).data.source._target_.endswith(".BabiGenerator")
        assert compose("train", overrides=["model=memn2n", "data=babi"]).data.source._target_.endswith(".BabiFiles")
    GlobalHydra.instance().clear()


def test_memn2n_learns_generated_task1_quickly(compose_cfg, tmp_path):
    cfg = compose_cfg(*FAST, "trainer.max_epochs=15", "data.source.num_val=200", "data.source.num_test=200")
    start = time.perf_counter()
    result = run.train(cfg)
    seconds = time.perf_counter() - start
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["val/acc"] >= 0.95, metrics
    assert result == metrics["val/acc"]
    assert seconds <= 60, f"took {seconds:.0f} s"


def test_metrics_manifest_and_plots_are_written(compose_cfg, tmp_path):
    run.train(compose_cfg(*TINY))
    out = tmp_path / "run"
    metrics = json.loads((out / "metrics.json").read_text())
    for key in ("val/acc", "val/loss", "test/acc", "test/error", "test/loss", "epoch", "global_step", "params",
                "train_seconds"):
        assert key in metrics, key
    for key in ("val/acc", "test/acc", "test/error"):
        assert 0.0 <= metrics[key] <= 1.0
    assert metrics["test/error"] == pytest.approx(1 - metrics["test/acc"])
    assert metrics["epoch"] == 2 and metrics["global_step"] == 2 * 7  # 200 questions / batch 32
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest) >= {"git", "packages", "command", "data_files", "seed"}
    assert manifest["packages"]["torch"] and "dirty" in manifest["git"]
    assert manifest["examples"] == {"train": 200, "val": 100, "test": 100}  # a validation figure's standard error
    assert (out / "checkpoints" / "last.ckpt").is_file()
    assert (out / "plots" / "learning_curves.png").is_file()
    assert (out / "plots" / "attention_0.png").is_file()
    assert not list(out.rglob(".*.tmp"))


def test_joint_tasks_report_per_task_error(compose_cfg, tmp_path):
    run.train(compose_cfg(*TINY, "data.tasks=[1,6]", "trainer.max_epochs=1"))
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert {"test/task1/error", "test/task6/error", "val/task1/acc"} <= set(metrics)
    assert "test/task2/error" not in metrics


def test_same_seed_gives_same_metrics(compose_cfg, tmp_path):
    first = compose_cfg(*TINY, run_dir=tmp_path / "a")
    run.train(first)
    second = compose_cfg(*TINY, run_dir=tmp_path / "b")
    run.train(second)
    a, b = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in "ab")
    assert {k: v for k, v in a.items() if not k.endswith("_seconds")} == {
        k: v for k, v in b.items() if not k.endswith("_seconds")
    }


def test_fast_dev_run_runs_one_batch(compose_cfg, tmp_path):
    cfg = compose_cfg("debug=fdr", "trainer.enable_progress_bar=false")
    run.train(cfg)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["global_step"] == 1 and "test/acc" in metrics


def test_incompatible_model_and_data_is_one_line(compose_cfg):
    cfg = compose_cfg()
    cfg.model._target_ = f"{__name__}.SequenceOnlyModel"
    with pytest.raises(UserError) as err:
        run.check_compatible(cfg)
    message = str(err.value)
    assert "\n" not in message
    assert "SequenceOnlyModel (sequence)" in message and "QADataModule (qa)" in message
    assert "memn2n" in message.split("for this data use model=")[1].split("|")  # other qa models may be listed too


def test_resume_without_checkpoint_is_an_error(compose_cfg):
    with pytest.raises(UserError, match="no checkpoint to resume"):
        run.train(compose_cfg(*TINY, "resume=auto"))
    with pytest.raises(UserError, match="ckpt_path=nope.ckpt: no such checkpoint file"):
        run.train(compose_cfg(*TINY, "ckpt_path=nope.ckpt"))


def test_bad_option_values_name_the_option(compose_cfg):
    with pytest.raises(ValueError, match="hops"):
        run.train(compose_cfg(*TINY, "model.hops=0"))
    with pytest.raises(ValueError, match="memory_size"):
        run.train(compose_cfg(*TINY, "data.memory_size=0"))
    with pytest.raises(ValueError, match="threads"):
        run.train(compose_cfg(*TINY, "threads=0"))


def test_evaluate_a_checkpoint_writes_the_same_metrics(compose_cfg, tmp_path):
    run.train(compose_cfg(*TINY))
    trained = json.loads((tmp_path / "run" / "metrics.json").read_text())
    ckpt = next((tmp_path / "run" / "checkpoints").glob("epoch*.ckpt"))
    cfg = compose_cfg(f"ckpt_path={ckpt}", config_name="eval", run_dir=tmp_path / "eval")
    metrics = run.evaluate(cfg)
    assert json.loads((tmp_path / "eval" / "metrics.json").read_text()) == metrics
    assert metrics["test/acc"] == pytest.approx(trained["test/acc"])
    assert metrics["val/acc"] == pytest.approx(trained["val/acc"])


@pytest.mark.parametrize("logger", ["tensorboard", "wandb"])
def test_other_loggers(compose_cfg, tmp_path, monkeypatch, logger):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc: W&B must go offline by itself
    run.train(compose_cfg(*TINY, f"logger={logger}", "trainer.max_epochs=1", "tags=[t1]"))
    out = tmp_path / "run"
    assert (out / "metrics.json").is_file()
    if logger == "tensorboard":
        assert list((out / "tensorboard").rglob("events.out.tfevents.*"))
    else:
        assert list((out / "wandb").glob("offline-run-*"))


def test_cli_user_error_is_one_line_without_traceback(tmp_path):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "train.py", "model.hops=0", f"hydra.run.dir={tmp_path / 'run'}",
         "trainer.enable_progress_bar=false"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "hops" in done.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "run").exists()  # the directory Hydra made for the refused run is gone


def test_experiment_overrides_the_primary_config(compose_cfg):
    cfg = compose_cfg("experiment=memn2n_babi")
    assert cfg.name == "memn2n_babi"
    assert cfg.optimizer._target_ == "torch.optim.SGD" and cfg.scheduler._target_.endswith("MultiStepLR")
    assert cfg.task.loss_reduction == "sum" and cfg.trainer.gradient_clip_val == 40
    assert cfg.data.source._target_.endswith(".BabiFiles") and cfg.callbacks.linear_start.epochs == 20
    assert cfg.data.sampler == "replacement"
    assert compose_cfg("experiment=memn2n_babi", "optimizer.lr=0.1").optimizer.lr == 0.1


def test_cli_multirun_grid_runs_every_job(tmp_path):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "train.py", "-m", "model.hops=1,2", "attention=dot,additive", "debug=fdr",
         "trainer.enable_progress_bar=false", f"hydra.sweep.dir={tmp_path}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    jobs = sorted(tmp_path.glob("*/metrics.json"))
    assert len(jobs) == 4
    overrides = {(tmp_path / j.parent.name / ".hydra" / "overrides.yaml").read_text() for j in jobs}
    assert len(overrides) == 4
