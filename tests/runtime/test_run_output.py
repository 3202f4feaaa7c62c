"""What a run leaves and prints: metrics despite a failing plot, the summary and config as printed, eval.py's
checkpoint, the figures' labels, colour bars and titles (issue 17: 15, 20, 21, 22)."""

from __future__ import annotations

import csv
import json
import logging
import os
import subprocess
import sys

import pytest
import torch
from conftest import FAST, ROOT

from attnmem.callbacks import plots as plot_callback
from attnmem.evaluation import plots
from attnmem.runtime import console, run
from attnmem.runtime.load import best_checkpoint
from attnmem.tasks.qa import QATask

TINY = [
    *FAST,
    "data.batch_size=32",
    "data.source.num_train=200",
    "data.source.num_val=100",
    "data.source.num_test=100",
    "trainer.max_epochs=2",
]


def _boom(*args: object, **kwargs: object) -> None:
    raise RuntimeError("boom\nat two lines")


def test_a_failing_plot_keeps_the_metrics_and_says_so_in_one_line(compose_cfg, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(plot_callback, "learning_curves", _boom)
    monkeypatch.setattr(QATask, "plot_examples", _boom)
    with caplog.at_level(logging.WARNING, logger=plot_callback.__name__):
        run.train(compose_cfg(*TINY))
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["epoch"] == 2
    # the metrics are the run's own: val/acc is the best of its two epochs' validations, as its best checkpoint
    # validated again logs it last, and a count of right answers over the validation questions
    with (tmp_path / "run" / "csv" / "metrics.csv").open() as f:
        *epochs, final = [float(row["val/acc"]) for row in csv.DictReader(f) if row.get("val/acc")]
    assert len(epochs) == 2 and metrics["val/acc"] == pytest.approx(max(epochs), abs=1e-6)
    assert metrics["val/acc"] == pytest.approx(final, abs=1e-6)
    questions = json.loads((tmp_path / "run" / "manifest.json").read_text())["examples"]["val"]
    assert metrics["val/acc"] * questions == pytest.approx(round(metrics["val/acc"] * questions), abs=1e-3)
    lines = [r.getMessage() for r in caplog.records if r.name == plot_callback.__name__]
    assert "plot learning_curves skipped: RuntimeError: boom at two lines" in lines
    assert "plot QATask.plot_examples skipped: RuntimeError: boom at two lines" in lines
    assert all("\n" not in line for line in lines)


def test_the_summary_prints_the_run_directory_and_plots_in_full(tmp_path, capsys):
    run_dir = tmp_path / ("a-long-experiment-name" * 4) / "2026-12-01_10-00-00"
    plot = run_dir / "plots" / "attention_0.png"
    console.print_summary({"val/acc": 0.5}, run_dir, [plot], steps_per_second=3.0)
    lines = capsys.readouterr().out.splitlines()
    assert len(str(run_dir)) > 120
    assert f"run directory: {run_dir}" in lines
    assert "plot: plots/attention_0.png" in lines
    assert not any("…" in line for line in lines)


def test_the_config_prints_collapsed_unless_asked(compose_cfg, capsys):
    console.print_config_tree(compose_cfg())
    collapsed = capsys.readouterr().out.splitlines()
    assert 8 <= len(collapsed) <= 16, collapsed
    assert (
        "  model: memn2n (MemN2NQA): embed_dim=20 hops=3 encoding=position temporal=True tying=adjacent "
        "random_noise=0.1 …" in collapsed
    )
    assert any(line.startswith("  data: babi_gen (QADataModule): tasks=[1]") for line in collapsed)
    assert any("print_config=collapsed" in line for line in collapsed)
    console.print_config_tree(compose_cfg("print_config=full"))
    full = capsys.readouterr().out
    assert "embed_dim: 20" in full and len(full.splitlines()) > 3 * len(collapsed)
    console.print_config_tree(compose_cfg("print_config=none"))
    assert capsys.readouterr().out == ""
    with pytest.raises(ValueError, match=r"^print_config=yes: choose print_config=collapsed\|full\|none$"):
        console.print_config_tree(compose_cfg("print_config=yes"))


def test_eval_of_a_run_directory_uses_the_checkpoint_the_run_reported(compose_cfg, tmp_path):
    run.train(compose_cfg(*TINY, "trainer.max_epochs=3"))
    done = tmp_path / "run"
    trained = json.loads((done / "metrics.json").read_text())
    best = best_checkpoint(done)
    assert best.name != "last.ckpt"
    for option in (f"run_dir={done}", f"ckpt_path={done}"):
        metrics = run.evaluate(compose_cfg(option, config_name="eval", run_dir=tmp_path / "eval"))
        assert metrics["val/acc"] == pytest.approx(trained["val/acc"])
        assert metrics["test/acc"] == pytest.approx(trained["test/acc"])
    with pytest.raises(run.UserError, match=f"^run_dir={tmp_path / 'nope'}: no such run directory$"):
        run.evaluate(compose_cfg(f"run_dir={tmp_path / 'nope'}", config_name="eval", run_dir=tmp_path / "eval"))
    env = {**os.environ, "COLUMNS": "80"}
    out = subprocess.run(
        [sys.executable, "eval.py", f"run_dir={done}", f"hydra.run.dir={tmp_path / 'cli'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    printed = out.stdout + out.stderr
    assert f"evaluating the checkpoint the run reported, {best}" in printed.replace("\n", " ")
    assert "litmodels" not in printed and "callbacks used to create the checkpoint" not in printed
    assert f"run directory: {tmp_path / 'cli'}" in printed.splitlines()
    # each of Lightning's log records printed once (not also by the handler `import lightning` adds), and logged
    restored = [line for line in printed.splitlines() if "Restoring states from the checkpoint" in line]
    logged = (tmp_path / "cli" / "train.log").read_text().splitlines()
    assert restored and restored == [line for line in logged if "Restoring states from the checkpoint" in line]


def test_the_summary_has_one_number_format():
    for key in (
        "val/acc",
        "test/len40/token_acc",
        "val/bleu",
        "val/overlap_min",
        "val/energy_monotone",
        "test/task3/error",
        "val/exact_match",
    ):
        assert console.format_value(key, 0.51234) == "51.23%", key
    assert console.format_value("epoch", 3.0) == "3"
    assert console.format_value("global_step", 1410) == "1,410"
    assert console.format_value("params", 5680.0) == "5,680"
    assert console.format_value("steps/s", 12.3456) == "12.35"
    assert console.format_value("val/loss", 1.23456) == "1.235"
    assert console.format_value("replicas/0/stopped", "early stopping at epoch 3") == "early stopping at epoch 3"


def _colour_bars(fig: object) -> list[str]:
    return [ax.get_ylabel() for ax in fig.axes if ax.get_label() == "<colorbar>"]


def test_heatmaps_label_their_axes_have_a_colour_bar_and_say_which_attention():
    words = ["a", "b", "c", "d"]
    hop = plots.hop_attention(["john went", "mary ran"], torch.rand(2, 3), "Q: where is john?")
    assert _colour_bars(hop) == ["attention weight (0-1)"]
    assert hop.axes[0].get_xlabel() == "hop (memory layer)" and "sentence" in hop.axes[0].get_ylabel()
    assert hop.axes[0].get_title().startswith("memory attention over the story, per hop\n")
    coattention = plots.coattention_heatmap(torch.rand(3, 4), words[:3], words, "example 0")
    assert _colour_bars(coattention) == ["attention weight (0-1)"]
    assert (coattention.axes[0].get_xlabel(), coattention.axes[0].get_ylabel()) == ("document word", "question word")
    assert coattention.axes[0].get_title() == "coattention, question × document\nexample 0"
    alignment = plots.alignment_heatmap(torch.rand(3, 4), words, words[:3])
    assert _colour_bars(alignment) == ["attention weight (0-1)"]
    assert alignment.axes[0].get_xlabel() == "source token" and "target token" in alignment.axes[0].get_ylabel()
    assert alignment.axes[0].get_title() == "cross attention, target × source"
    heads = plots.head_heatmaps(torch.rand(5, 3, 4), words, words[:3], title="layer 2")
    assert _colour_bars(heads) == ["attention weight (0-1)"]
    assert heads.get_suptitle() == "cross attention per head, layer 2"
    assert [ax.get_title() for ax in heads.axes[:5]] == [f"head {h}" for h in range(1, 6)]
    assert heads.axes[4].get_xlabel() == "source token" and heads.axes[0].get_ylabel() == "target token"
    weights = torch.softmax(torch.rand(10, 2, 20), -1)
    ntm = plots.sequence_example(torch.rand(10, 4), torch.rand(10, 3), torch.rand(10, 3), torch.ones(10), weights, 1)
    assert _colour_bars(ntm) == ["weighting (0-1)", "weighting (0-1)"]
    assert ntm.axes[4].get_xlabel() == "time step"
    pointer = plots.pointer_iterations(torch.rand(2, 4), torch.rand(2, 4), words, (1, 2), "example 0")
    assert _colour_bars(pointer) == ["probability"] and pointer.axes[1].get_xlabel() == "document word"
    for fig in (hop, coattention, alignment, heads, ntm, pointer):
        plots.plt.close(fig)
