"""attnmem as an installed package: `python -m attnmem.train` composes the packaged configs (`pkg://attnmem.conf`)
from any directory and writes its run there, a user's config folder joins through Hydra's search path, sweeps are
named by name, and the tools stop in one line when they find no configs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CONF, ROOT, SWEEPS
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from attnmem.core import packaged
from attnmem.core.errors import UserError
from attnmem.tools import rerun, scoreboard, sweep


def python_m(cwd: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """`python -m <args>` in `cwd`, this checkout's attnmem first on the path, outputs under `cwd`."""
    env = {k: v for k, v in os.environ.items() if k != "ATTNMEM_ROOT"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def user_conf(folder: Path) -> Path:
    """A config folder of the user's: a model on top of attnmem's memn2n and an experiment that picks it."""
    (folder / "model").mkdir(parents=True)
    (folder / "experiment").mkdir()
    (folder / "model" / "my_memn2n.yaml").write_text("defaults:\n  - memn2n\n  - _self_\n\nhops: 1\nembed_dim: 8\n")
    (folder / "experiment" / "my_exp.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /model: my_memn2n\n\nname: my_exp\noptimizer:\n  lr: 0.02\n"
    )
    return folder


def test_the_packaged_configs_are_the_checkouts():
    assert packaged.conf_dir().resolve() == CONF.resolve() and (CONF / "train.yaml").is_file()
    assert packaged.sweeps_dir().resolve() == SWEEPS.resolve()


def test_compose_through_pkg_with_a_user_experiment_on_the_search_path(tmp_path):
    mine = user_conf(tmp_path / "my_conf")
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="attnmem.conf", version_base="1.3"):
        cfg = compose("train", overrides=[f"hydra.searchpath=[file://{mine}]", "experiment=my_exp"])
    GlobalHydra.instance().clear()
    assert cfg.name == "my_exp" and cfg.optimizer.lr == 0.02
    assert cfg.model._target_ == "attnmem.tasks.qa_nets.MemN2NQA" and cfg.model.hops == 1 and cfg.model.embed_dim == 8
    assert cfg.data.source._target_.endswith("BabiGenerator")  # memn2n's natural data, from attnmem's configs


def test_python_m_attnmem_train_composes_in_any_directory_with_a_user_folder(tmp_path):
    user_conf(tmp_path / "my_conf")
    done = python_m(tmp_path, "attnmem.train", "hydra.searchpath=[file://my_conf]", "experiment=my_exp", "--cfg", "job")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "name: my_exp" in done.stdout and "_target_: attnmem.tasks.qa_nets.MemN2NQA" in done.stdout
    assert not (tmp_path / "outputs").exists()  # --cfg job runs nothing


def test_an_unknown_option_names_the_search_path_in_one_line(tmp_path):
    done = python_m(tmp_path, "attnmem.train", "model=memn3n")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().endswith("or add model/memn3n.yaml to a folder of yours and pass "
                                        "'hydra.searchpath=[file://FOLDER]'")


@pytest.mark.slow
def test_python_m_attnmem_train_writes_its_run_in_the_working_directory(tmp_path):
    done = python_m(tmp_path, "attnmem.train", "model=ntm", "debug=fdr", "trainer.enable_progress_bar=false",
                    "print_config=none")
    assert done.returncode == 0, done.stderr[-2000:]
    (metrics,) = (tmp_path / "outputs" / "runs" / "ntm-copy").glob("*/metrics.json")
    assert (metrics.parent / ".hydra" / "config.yaml").is_file()


def test_a_sweep_by_name_path_or_old_path(tmp_path):
    assert packaged.sweep_file("memn2n_hops") == SWEEPS / "memn2n_hops.yaml"
    assert packaged.sweep_file("sweeps/paper/memn2n_babi1k.yaml") == SWEEPS / "paper" / "memn2n_babi1k.yaml"
    assert packaged.sweep_file("paper/ntm_copy") == SWEEPS / "paper" / "ntm_copy.yaml"
    mine = tmp_path / "mine.yaml"
    mine.write_text("program: train.py\n")
    assert packaged.sweep_file(mine) == mine
    assert "paper/memn2n_babi1k" in packaged.sweep_names() and "paper/figures" not in packaged.sweep_names()
    assert not any(n.endswith(".protocol") for n in packaged.sweep_names())
    assert packaged.sweep_label(SWEEPS / "paper" / "ntm_copy.yaml") == "paper/ntm_copy"


def test_the_sweep_runner_dry_runs_a_packaged_sweep_by_name_from_any_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    sweep.main(["memn2n_hops", "--dry-run", "data.source.num_train=10"])
    out = capsys.readouterr().out
    assert "0: python train.py" in out and "model.hops=1" in out and not (tmp_path / "outputs").exists()


def one_line_exit(capsys, call) -> str:
    """The one `error:` line a command line prints before it exits 1."""
    with pytest.raises(SystemExit) as info:
        call()
    err = capsys.readouterr().err.strip()
    assert info.value.code == 1 and "\n" not in err and err.startswith("error: "), err
    return err


def test_the_tools_stop_in_one_line_when_they_find_no_configs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    err = one_line_exit(capsys, lambda: sweep.main(["no_such_sweep", "--dry-run"]))
    assert err.startswith("error: no_such_sweep: no such sweep file or packaged sweep; name a file or one of: ")
    assert "memn2n_hops" in err
    (tmp_path / "empty").mkdir()
    err = one_line_exit(capsys, lambda: scoreboard.main(["--protocols", "empty"]))
    assert "no protocol run to put on the scoreboard (0 protocols" in err
    (tmp_path / "run" / ".hydra").mkdir(parents=True)
    (tmp_path / "run" / ".hydra" / "overrides.yaml").write_text("- model=ntm\n")
    with pytest.raises(UserError, match=r"empty: no train.yaml there; pass a config folder with train.yaml"):
        rerun.rerun(tmp_path / "run", conf_dir=tmp_path / "empty")

