"""`attnmem.load_run` and the README's example of answering a typed bAbI story with a trained MemN2N."""

from __future__ import annotations

import json
import re
import runpy
import shutil
from pathlib import Path

import pytest
import torch
from conftest import FAST, ROOT

import attnmem
from attnmem.runtime.load import best_checkpoint

TINY = [
    *FAST,
    "data.source.num_train=200",
    "data.source.num_val=60",
    "data.source.num_test=20",
    "data.batch_size=32",
    "trainer.max_epochs=4",
]


def _readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    return re.search(r"<!-- example:load_run -->\n```python\n(.*?)```", text, re.S)[1]


def test_load_run_returns_the_best_weights_vocabulary_and_config(compose_cfg, tmp_path):
    from attnmem.runtime import run

    run.train(compose_cfg(*TINY))
    out = tmp_path / "run"
    model, datamodule, cfg = attnmem.load_run(out)
    assert cfg.model.hops == 3 and not model.training
    assert datamodule.vocab[:2] == ["<pad>", "<unk>"] and "mary" in datamodule.vocab
    correct = total = 0
    with torch.no_grad():
        for batch in datamodule.val_dataloader():
            correct += int((model(batch).pred.argmax(-1) == batch["answer"]).sum())
            total += len(batch["answer"])
    # the best checkpoint's weights: the validation accuracy the run reported for it
    assert correct / total == pytest.approx(json.loads((out / "metrics.json").read_text())["val/acc"], abs=1e-6)
    assert best_checkpoint(out).name.startswith("epoch")
    _check_load_model(out, model, datamodule, batch)
    _check_a_run_saved_before_the_model_moved(out, tmp_path, model, batch, compose_cfg)


def _check_load_model(out, model, datamodule, batch):
    # load_model: the same weights and sizes, without the datamodule ever being set up (no data read)
    from attnmem.data.qa.datamodule import QADataModule

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(QADataModule, "setup", lambda *a, **k: pytest.fail("load_model read the data"))
        loaded, dims, vocabulary, cfg = attnmem.load_model(out)
        from_file = attnmem.load_model(best_checkpoint(out)).model
    assert dims == datamodule.dims and vocabulary["vocab"] == datamodule.vocab and cfg.model.hops == 3
    assert not loaded.training
    for other in (loaded, from_file):
        torch.testing.assert_close(other(batch).pred, model(batch).pred, rtol=0, atol=0)


def _check_a_run_saved_before_the_model_moved(out, tmp_path, model, batch, compose_cfg):
    from attnmem.runtime import run

    # a run of 0.2 names attnmem.models.memn2n.MemN2N and keeps its weights as net.A.0.weight (now the adapter's
    # net.memn2n.A.0.weight): it loads, with a DeprecationWarning naming the adapter
    old = Path(shutil.copytree(out, tmp_path / "old"))
    config = old / ".hydra" / "config.yaml"
    config.write_text(config.read_text().replace("attnmem.tasks.qa_nets.MemN2NQA", "attnmem.models.memn2n.MemN2N"))
    for ckpt in (old / "checkpoints").glob("*.ckpt"):
        state = torch.load(ckpt, weights_only=False)
        state["state_dict"] = {k.replace("net.memn2n.", "net."): v for k, v in state["state_dict"].items()}
        torch.save(state, ckpt)
    assert "net.A.0.weight" in torch.load(best_checkpoint(old), weights_only=False)["state_dict"]
    for load in (attnmem.load_run, attnmem.load_model):
        with pytest.warns(DeprecationWarning, match=r"names the model attnmem.models.memn2n.MemN2N, which training "
                                                    r"now builds as attnmem.tasks.qa_nets.MemN2NQA"):
            loaded = load(old).model
        torch.testing.assert_close(loaded(batch).pred, model(batch).pred, rtol=0, atol=0)
    cfg = compose_cfg(f"ckpt_path={best_checkpoint(old)}", config_name="eval", run_dir=tmp_path / "eval")
    with pytest.warns(DeprecationWarning, match="attnmem.tasks.qa_nets.MemN2NQA"):
        metrics = run.evaluate(cfg)
    assert metrics["test/acc"] == json.loads((out / "metrics.json").read_text())["test/acc"]


def test_load_model_refuses_what_it_cannot_load_in_one_line(tmp_path):
    with pytest.raises(attnmem.core.errors.UserError, match=r"load_model: .*nowhere does not exist: pass a run"):
        attnmem.load_model(tmp_path / "nowhere")
    ckpt = tmp_path / "run" / "checkpoints" / "last.ckpt"
    ckpt.parent.mkdir(parents=True)
    torch.save({"state_dict": {}}, ckpt)
    with pytest.raises(attnmem.core.errors.UserError, match=r"config.yaml is missing: .*last.ckpt must be a run"):
        attnmem.load_model(ckpt)
    (tmp_path / "run" / ".hydra").mkdir()
    (tmp_path / "run" / ".hydra" / "config.yaml").write_text("model: {}\n")
    with pytest.raises(attnmem.core.errors.UserError, match=r"saved before attnmem 0.3 and records no data sizes: "
                       r"attnmem.load_run\('.*run'\) rebuilds"):
        attnmem.load_model(ckpt)


def test_readme_example_answers_a_typed_story(compose_cfg, tmp_path, capsys):
    from attnmem.runtime import run

    run.train(compose_cfg(*TINY))
    code = re.sub(r'run_dir = ".*?"', f'run_dir = "{tmp_path / "run"}"', _readme_example())
    script = tmp_path / "example.py"
    script.write_text(code)
    capsys.readouterr()
    runpy.run_path(str(script), run_name="__main__")
    lines = capsys.readouterr().out.strip().splitlines()
    assert re.fullmatch(r"answer: (bathroom|bedroom|garden|hallway|kitchen|office)", lines[0]), lines
    assert len(lines) == 4  # one row per story sentence
    for line, sentence in zip(lines[1:], ["Mary moved", "John went", "Mary travelled"]):
        assert line.startswith(sentence)
        weights = [float(w) for w in line.split()[-3:]]  # one weight per hop
        assert all(0 <= w <= 1 for w in weights)
