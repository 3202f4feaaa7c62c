"""The error catalogue (docs/errors.md): each user mistake ends with one line naming the option or file:line and the fix.

A few cases run the real command line (exit code, no traceback); the rest call `run.train` in-process.
"""

from __future__ import annotations

import json

import pytest
import torch
from conftest import FAST, cli_error, one_line
from hydra.errors import CompactHydraException

from attnmem.core.errors import UserError
from attnmem.runtime import cli, run

TINY = [*FAST, "data.source.num_train=60", "data.source.num_val=20", "data.source.num_test=20", "trainer.max_epochs=1"]


# --- through the command line -------------------------------------------------------------------------------------


@pytest.mark.slow  # a subprocess: ~5 s of imports alone, 20 s on a loaded machine
def test_cli_unknown_group_option_lists_the_options(tmp_path):
    one_line(cli_error(tmp_path, "model=memn3n"), "model=memn3n: no such option", "model=", "memn2n", "ntm")


@pytest.mark.slow  # a subprocess: ~5 s of imports alone, 20 s on a loaded machine
def test_cli_unknown_key_says_how_to_add_one(tmp_path):
    one_line(cli_error(tmp_path, "model.hopz=3"), "model.hopz", "+model.hopz=3")


@pytest.mark.slow  # a subprocess: ~5 s of imports alone, 20 s on a loaded machine
def test_cli_missing_data_dir_says_how_to_get_the_files(tmp_path):
    line = cli_error(tmp_path, "data=babi", f"data.source.data_dir={tmp_path / 'nowhere'}")
    one_line(line, f"data.source.data_dir={tmp_path / 'nowhere'}: no bAbI files", "`attnmem-data fetch babi`")


@pytest.mark.slow  # a subprocess: ~5 s of imports alone, 20 s on a loaded machine
def test_cli_a_file_that_is_not_a_checkpoint_is_refused_without_unpickling(tmp_path):
    notes = tmp_path / "notes.ckpt"
    notes.write_text("not a checkpoint\n")
    one_line(cli_error(tmp_path, f"ckpt_path={notes}"), f"ckpt_path={notes} is not a checkpoint", "last.ckpt")


# --- in-process ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("override", ["model=memn3n", "data=babi_genn", "attention=dott"])
def test_unknown_group_option_is_one_line_with_the_choices(compose_cfg, override):
    group = override.split("=")[0]
    with pytest.raises(CompactHydraException) as err:
        compose_cfg(override)
    choices = {"model": "memn2n", "data": "babi_gen", "attention": "scaled_dot"}[group]
    one_line(cli.one_line(err.value), f"{override}: no such option", f"choose {group}=", choices)


def test_bad_override_syntax_names_the_override(compose_cfg):
    with pytest.raises(CompactHydraException) as err:
        compose_cfg("model.hops=[1,")
    one_line(cli.one_line(err.value), "model.hops=[1,:", "override_grammar")


def test_incompatible_model_and_data_lists_the_compatible_choices(compose_cfg):
    with pytest.raises(UserError) as err:
        run.train(compose_cfg("model=ntm", "data=babi_gen", *TINY))
    one_line(
        str(err.value),
        "NTMSequence (sequence) cannot train on data QADataModule (qa)",
        "data=",
        "copy",
        "model=",
        "memn2n",
    )


@pytest.mark.parametrize("kind", ["missing", "empty"])
def test_data_dir_missing_or_empty(compose_cfg, tmp_path, kind):
    folder = tmp_path / "en"
    if kind == "empty":
        folder.mkdir()
    with pytest.raises(UserError) as err:
        run.train(compose_cfg("data=babi", f"data.source.data_dir={folder}", *FAST))
    one_line(str(err.value), f"data.source.data_dir={folder}: no bAbI files (qaN_*_train.txt)",
             f"data.source.download=true fetches babi into {tmp_path}")


def test_malformed_babi_line_names_file_and_line(compose_cfg, tmp_path):
    folder = tmp_path / "en"
    folder.mkdir()
    bad = folder / "qa1_single-supporting-fact_train.txt"
    bad.write_text("1 Mary moved to the bathroom.\n2 Where is Mary?\tbathroom\t1\nMary went home.\n")
    with pytest.raises(UserError) as err:
        run.train(compose_cfg("data=babi", f"data.source.data_dir={folder}", "data.source.cache=false", *FAST))
    one_line(str(err.value), f"{bad}:3: expected 'ID text'", "'Mary went home.'")


def test_malformed_squad_json_names_file_and_line(compose_cfg, tmp_path):
    bad = tmp_path / "train.json"
    bad.write_text('{"version": "1.1",\n "data": [\n  {"title": "x",, }\n ]}\n')
    with pytest.raises(UserError) as err:
        run.train(compose_cfg("model=dcn", "data=squad", f"data.source.train_path={bad}", *FAST))
    one_line(str(err.value), f"{bad}:3: not valid JSON")


def test_sweep_file_with_an_unknown_key(tmp_path):
    sweep = pytest.importorskip("attnmem.tools.sweep")
    path = tmp_path / "bad.yaml"
    path.write_text(
        "program: train.py\nmethod: grid\nmetric: {name: val/acc, goal: maximize}\n"
        "parameters: {model.hops: {values: [1, 2]}}\nrun_capp: 3\n"
    )
    with pytest.raises(UserError) as err:
        sweep.load_spec(path)
    one_line(str(err.value), f"{path}: unknown key 'run_capp'", "run_cap")


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        (["model.hops=0"], ["hops must be >= 1, got 0"]),
        (["data.memory_size=0"], ["data.memory_size must be", "got 0"]),
        (["optimizer.lr=-0.1"], ["optimizer.lr must be >= 0, got -0.1", "optimizer.lr=0.001"]),
        (["threads=0"], ["threads must be >= 1, got 0"]),
    ],
    ids=["hops", "memory_size", "lr", "threads"],
)
def test_out_of_range_values_name_the_option(compose_cfg, overrides, fragments):
    with pytest.raises(ValueError) as err:
        run.train(compose_cfg(*TINY, *overrides))
    one_line(str(err.value), *fragments)


def test_heads_must_divide_d_model(compose_cfg):
    with pytest.raises(ValueError) as err:  # raised while building the model, before any training
        run.train(compose_cfg("model=transformer", "model.d_model=30", "model.heads=4", *FAST))
    one_line(str(err.value), "model.heads", "model.d_model")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_gpu_trainer_without_a_gpu(compose_cfg):
    with pytest.raises(UserError) as err:
        run.train(compose_cfg("trainer=gpu", *TINY))
    one_line(str(err.value), "no GPU", "trainer=cpu")


def test_more_gpus_than_the_machine_has(compose_cfg, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a machine with one GPU
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(UserError) as err:
        run.train(compose_cfg("trainer=gpu", "trainer.devices=4", *TINY))
    one_line(str(err.value), "trainer.devices=4: found 1 GPU", "trainer.devices=1")


def test_precision_the_device_does_not_run(compose_cfg):
    with pytest.raises(UserError) as err:
        run.train(compose_cfg("trainer.precision=16-true", *TINY))
    one_line(str(err.value), "trainer.precision=16-true is not supported on cpu", "trainer.precision=32-true")


def test_ckpt_path_that_does_not_exist(compose_cfg, tmp_path):
    with pytest.raises(UserError) as err:
        run.train(compose_cfg(*TINY, f"ckpt_path={tmp_path / 'nope.ckpt'}"))
    one_line(str(err.value), f"ckpt_path={tmp_path / 'nope.ckpt'}: no such checkpoint file")


def test_a_pickle_that_is_not_a_checkpoint_is_refused(tmp_path):
    from attnmem.runtime import checkpoint

    path = tmp_path / "tensor.ckpt"
    torch.save(torch.ones(2), path)  # a real torch file, but no Lightning checkpoint
    with pytest.raises(UserError) as err:
        checkpoint.load(path)
    one_line(str(err.value), f"ckpt_path={path} is not a Lightning checkpoint", "train.py")


@pytest.mark.parametrize("override", ["resume=auto", "ckpt_path=last"])
def test_resume_with_no_checkpoint(compose_cfg, override):
    with pytest.raises(UserError) as err:
        run.train(compose_cfg(*TINY, override))
    one_line(str(err.value), "no checkpoint to resume at", "last.ckpt", "hydra.run.dir=")


def test_resume_takes_only_auto(compose_cfg):
    with pytest.raises(UserError) as err:
        run.train(compose_cfg(*TINY, "resume=yes"))
    one_line(str(err.value), "resume=yes", "'auto'")


def test_a_finished_run_directory_is_not_overwritten(compose_cfg, tmp_path):
    done = tmp_path / "run"
    cfg = compose_cfg(*TINY)
    (done / "metrics.json").write_text(json.dumps({"val/acc": 1.0}))
    with pytest.raises(UserError) as err:
        run.train(cfg)
    one_line(str(err.value), f"hydra.run.dir={done} holds a finished run", "resume=auto")
    assert json.loads((done / "metrics.json").read_text()) == {"val/acc": 1.0}


def test_load_run_of_a_directory_that_is_not_a_run(tmp_path):
    from attnmem import load_run

    with pytest.raises(UserError) as err:
        load_run(tmp_path)
    one_line(str(err.value), f"{tmp_path} is not a finished run", "metrics.json")


def test_a_required_value_left_out_is_one_line_through_the_guard(compose_cfg, capsys, monkeypatch):
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    monkeypatch.delenv(cli.FULL_ERROR, raising=False)
    cfg = compose_cfg(config_name="eval")  # eval.yaml's ckpt_path is ??? (required)
    with pytest.raises(SystemExit) as done:
        cli.guarded(cfg, "evaluate")
    assert done.value.code == 1
    one_line(capsys.readouterr().err, "error: ckpt_path needs a value", "pass ckpt_path=")
