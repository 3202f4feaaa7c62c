"""A run directory made by attnmem 0.1 (before the layered layout) is refused in one line by every reader.

tests/fixtures/run_v0_1 was made by commit f1db268 (attnmem 0.1.0): `python train.py trainer.max_epochs=2
data.num_train=100 data.num_val=50 data.num_test=50 model.embed_dim=8`; its config names
`attnmem.data.babi_gen.BabiGenDataModule` and its checkpoints keep the vocabularies under that class name.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import ROOT

import attnmem
from attnmem.core.errors import UserError
from attnmem.runtime import checkpoint, legacy, run

OLD_RUN = ROOT / "tests" / "fixtures" / "run_v0_1"
REFUSAL = "it was made by attnmem 0.1, before the module layout of 0.2"


@pytest.fixture
def old_run(tmp_path: Path) -> Path:
    """A copy of the 0.1 run directory (a reader must not change it, and a test must not change the fixture)."""
    return Path(shutil.copytree(OLD_RUN, tmp_path / "old_run"))


def test_a_checkpoint_of_a_replaced_datamodule_is_refused(old_run: Path) -> None:
    # a checkpoint moved out of its run directory has no manifest beside it: its datamodule state still tells
    with pytest.raises(UserError, match=f"its data state belongs to BabiGenDataModule, a datamodule that no longer "
                                        f"exists: {REFUSAL}"):
        legacy.check_checkpoint(checkpoint.load(old_run / "checkpoints" / "last.ckpt"), old_run)


def test_load_run_refuses_an_old_run_in_one_line(old_run: Path) -> None:
    with pytest.raises(UserError, match=REFUSAL) as caught:
        attnmem.load_run(old_run)
    assert "attnmem.data.babi_gen.BabiGenDataModule, which no longer exists" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_eval_refuses_an_old_checkpoint(old_run: Path, compose_cfg) -> None:
    cfg = compose_cfg(f"ckpt_path={old_run / 'checkpoints' / 'last.ckpt'}", config_name="eval")
    with pytest.raises(UserError, match=REFUSAL):
        run.evaluate(cfg)
    assert not (Path(cfg.paths.output_dir) / "metrics.json").exists()


@pytest.mark.parametrize("how", ["resume=auto", "ckpt_path=last", "ckpt_path"])
def test_resume_refuses_an_old_checkpoint_and_writes_nothing(old_run: Path, compose_cfg, how: str) -> None:
    before = {p: p.read_bytes() for p in old_run.rglob("*") if p.is_file()}
    option = f"ckpt_path={old_run / 'checkpoints' / 'last.ckpt'}" if how == "ckpt_path" else how
    run_dir = old_run if how != "ckpt_path" else old_run.parent / "new_run"
    cfg = compose_cfg(option, run_dir=run_dir)
    with pytest.raises(UserError, match=f"its manifest.json says attnmem 0.1.0: {REFUSAL}"):
        run.train(cfg)
    # the compose fixture saved .hydra/config.yaml as Hydra would; nothing else of the old run changed
    after = {p: p.read_bytes() for p in old_run.rglob("*") if p.is_file() and p.parent.name != ".hydra"}
    assert after == {p: b for p, b in before.items() if p.parent.name != ".hydra"}


def test_a_resume_of_a_run_that_named_a_moved_model_reads_the_adapter(tmp_path: Path, compose_cfg) -> None:
    # a run of 0.2 recorded model._target_=attnmem.models.ntm.NTM; resumed now, the composed config names the
    # adapter NTMSequence: not a change of model, with a DeprecationWarning naming the adapter
    from omegaconf import OmegaConf

    from attnmem.runtime import resume

    cfg = compose_cfg("model=ntm")
    assert cfg.model._target_ == "attnmem.tasks.sequence_nets.NTMSequence"
    old = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
    old.model._target_ = "attnmem.models.ntm.NTM"
    (tmp_path / "old" / ".hydra").mkdir(parents=True)
    OmegaConf.save(old, tmp_path / "old" / ".hydra" / "config.yaml")
    with pytest.warns(DeprecationWarning, match=r"names the model attnmem.models.ntm.NTM, which training now builds "
                                                r"as attnmem.tasks.sequence_nets.NTMSequence"):
        assert "model._target_" not in resume.changes(tmp_path / "old", cfg)
    assert legacy.apply_moved(old, tmp_path).model._target_ == cfg.model._target_
