"""More user mistakes that end in one line (issue 17: 9, 10, 13): wrong value types, another model's checkpoint,
and an `attention=` that the model ignores."""

from __future__ import annotations

import shutil

import pytest
import torch
from conftest import FAST, cli_error, one_line

from attnmem.core.errors import UserError
from attnmem.runtime import checkpoint, run

TINY = [*FAST, "data.source.num_train=60", "data.source.num_val=20", "data.source.num_test=20", "trainer.max_epochs=1"]
SPAN = [*FAST, "model=span_baseline", "data.source.num_train=40", "data.source.num_val=10", "data.source.num_test=10"]
QA_TINY = TINY[len(FAST) :]


# --- 10: a value of the wrong type names the option, the value and the type -----------------------------------------


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        ([*QA_TINY, "model.hops=abc"], ["model.hops=abc", "integer", "MemN2N"]),
        ([*QA_TINY, "model.hops=2.5"], ["model.hops=2.5", "integer"]),
        ([*QA_TINY, "model.embed_dim=true"], ["model.embed_dim=True", "integer"]),
        ([*QA_TINY, "threads=abc"], ["threads=abc", "integer"]),
        ([*QA_TINY, "seed=abc"], ["seed=abc", "integer"]),
        ([*QA_TINY, "seed=1.5"], ["seed=1.5", "integer"]),
        ([*QA_TINY, "data.memory_size=abc"], ["data.memory_size=abc", "integer", "QADataModule"]),
        ([*QA_TINY, "data.source.num_train=abc"], ["data.source.num_train=abc", "integer", "BabiGenerator"]),
        ([*QA_TINY, "model.random_noise=abc"], ["model.random_noise=abc", "a number"]),
        ([*QA_TINY, "trainer.max_epochs=abc"], ["trainer.max_epochs=abc", "integer"]),
        ([*SPAN[len(FAST) :], "+task.max_answer_len=abc"], ["task.max_answer_len=abc", "integer", "SpanTask"]),
    ],
)
def test_a_value_of_the_wrong_type_is_one_line(compose_cfg, overrides, fragments):
    with pytest.raises(UserError) as err:
        run.train(compose_cfg(*FAST, *overrides))
    one_line(str(err.value), *fragments)


def test_values_of_the_right_type_pass_the_check(compose_cfg):
    # an int where a float is expected, and null where the hint allows it, are fine
    run.setup(compose_cfg(*TINY, "model.random_noise=0", "model.hops=2", "seed=3"))


@pytest.mark.slow  # a subprocess: ~5 s of imports alone
def test_cli_a_value_of_the_wrong_type_exits_1_without_traceback(tmp_path):
    one_line(cli_error(tmp_path, "model.hops=abc"), "model.hops=abc", "integer")


# --- 13: eval.py with a checkpoint that the run's config does not build ----------------------------------------------


@pytest.fixture
def memn2n_ckpt(compose_cfg, tmp_path):
    """The last checkpoint of a tiny MemN2N run."""
    run.train(compose_cfg(*TINY, run_dir=tmp_path / "memn2n"))
    return tmp_path / "memn2n" / "checkpoints" / "last.ckpt"


def _evaluate_in(compose_cfg, tmp_path, ckpt, *overrides):
    """Put `ckpt` into a run directory whose config is composed from `overrides`, then evaluate it there."""
    other = tmp_path / "other"
    compose_cfg(*overrides, run_dir=other)
    (other / "checkpoints").mkdir()
    shutil.copy(ckpt, other / "checkpoints" / "last.ckpt")
    cfg = compose_cfg(f"ckpt_path={other / 'checkpoints' / 'last.ckpt'}", config_name="eval", run_dir=tmp_path / "ev")
    with pytest.raises(UserError) as err:
        run.evaluate(cfg)
    return str(err.value)


def test_eval_another_models_checkpoint_names_the_model_and_the_keys(compose_cfg, tmp_path, memn2n_ckpt):
    line = _evaluate_in(compose_cfg, tmp_path, memn2n_ckpt, *TINY, "model=rnn_qa")
    one_line(line, "does not fit the run's config", "the config's model RNNQA but of model MemN2N",
             "missing: net.encoder", "unexpected: net.")


def test_eval_a_checkpoint_of_other_sizes_names_the_keys(compose_cfg, tmp_path, memn2n_ckpt):
    line = _evaluate_in(compose_cfg, tmp_path, memn2n_ckpt, *TINY, "model.hops=2")
    one_line(line, "MemN2N", "unexpected: net.memn2n.A.2.weight")
    line = _evaluate_in(compose_cfg, tmp_path / "b", memn2n_ckpt, *TINY, "model.embed_dim=8")
    one_line(line, "MemN2N", "shapes differ: ", "x20 vs ", "x8")


def test_eval_a_checkpoint_of_another_family_names_both_datamodules(compose_cfg, tmp_path, memn2n_ckpt):
    line = _evaluate_in(compose_cfg, tmp_path, memn2n_ckpt, *FAST, "model=ntm")
    one_line(line, "trained on QADataModule data", "AlgorithmicDataModule")


def test_eval_a_checkpoint_without_the_datamodules_state_is_not_a_key_error(compose_cfg, tmp_path, memn2n_ckpt):
    # what an NTM checkpoint looks like to a QA config: no QADataModule state (today: KeyError 'memory_size')
    state = checkpoint.load(memn2n_ckpt)
    del state["QADataModule"]
    bare = tmp_path / "bare.ckpt"
    torch.save(state, bare)
    line = _evaluate_in(compose_cfg, tmp_path, bare, *TINY, "model=rnn_qa")
    one_line(line, "RNNQA", "missing: net.encoder", "unexpected: net.")


# --- 9: attention= on a model that takes no attention score -----------------------------------------------------------


def test_attention_set_for_a_model_without_one_says_it_is_ignored(compose_cfg, capsys):
    run.setup(compose_cfg(*TINY, "model=rnn_qa", "attention=additive"))
    out = capsys.readouterr().out
    assert "attention=additive is ignored: RNNQA uses no attention score" in " ".join(out.split()), out


@pytest.mark.parametrize("overrides", [["model=rnn_qa"], ["attention=additive"]])
def test_no_note_when_attention_is_default_or_used(compose_cfg, capsys, overrides):
    run.setup(compose_cfg(*TINY, *overrides))
    assert "is ignored" not in capsys.readouterr().out
