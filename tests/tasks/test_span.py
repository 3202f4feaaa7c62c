"""The span family: decoding constraints, the loss over iterations, and a tiny run that learns."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch
from conftest import FAST

from attnmem.callbacks.predictions import PredictionsWriter
from attnmem.runtime import run
from attnmem.tasks.span import decode, span_losses

NEG = float("-inf")


def test_decode_keeps_end_at_or_after_start():
    # alone, the best start (3) lies after the best end (1); the best valid pair is (0, 1)
    start = torch.tensor([[2.0, 0.0, 0.0, 3.0]]).log_softmax(-1)
    end = torch.tensor([[0.0, 3.0, 0.0, 0.5]]).log_softmax(-1)
    s, e = decode(start, end, max_answer_len=15)
    assert (s.item(), e.item()) == (0, 1)
    # by hand: p_s(0)p_e(1) ∝ e^5 beats p_s(3)p_e(3) ∝ e^3.5 and p_s(0)p_e(3) ∝ e^2.5


def test_decode_limits_the_answer_length():
    start = torch.tensor([[5.0, 0.0, 0.0, 0.0, 0.5]])
    end = torch.tensor([[0.0, 1.0, 0.0, 0.0, 5.0]])
    # s + e by hand: (0, 4) = 10 with 5 tokens; (0, 1) = 6 beats (4, 4) = 5.5 with 2; (4, 4) beats (0, 0) = 5 with 1
    assert [t.item() for t in decode(start, end, max_answer_len=5)] == [0, 4]
    assert [t.item() for t in decode(start, end, max_answer_len=2)] == [0, 1]
    assert [t.item() for t in decode(start, end, max_answer_len=1)] == [4, 4]


def test_decode_never_picks_padding():
    start = torch.tensor([[0.0, 1.0, NEG, NEG]])
    end = torch.tensor([[0.0, 0.0, NEG, NEG]])
    assert [t.item() for t in decode(start, end, max_answer_len=3)] == [1, 1]


def test_loss_is_summed_over_iterations_and_ignores_spans_past_the_cut():
    logits = torch.zeros(2, 3, 2, 4)  # uniform: each cross-entropy is log 4
    losses = span_losses(logits, torch.tensor([1, -1]), torch.tensor([2, -1]))
    assert losses.tolist() == pytest.approx([3 * 2 * math.log(4), 0.0])
    logits[0, 2, 0, 1] = 10.0  # the last iteration's start is confident and right
    assert span_losses(logits, torch.tensor([1, -1]), torch.tensor([2, -1]))[0] < 6 * math.log(4) - 1


def test_predictions_writer_writes_on_rank_zero_only_what_a_module_keeps(tmp_path):
    writer = PredictionsWriter(tmp_path / "run")
    rank0, rank1 = SimpleNamespace(is_global_zero=True), SimpleNamespace(is_global_zero=False)
    writer.on_test_end(rank1, SimpleNamespace(predictions={"q1": "Paris"}))
    assert not (tmp_path / "run" / "predictions.json").exists()
    writer.on_test_end(rank0, SimpleNamespace())  # a family without predictions
    assert not (tmp_path / "run" / "predictions.json").exists()
    writer.on_test_end(rank0, SimpleNamespace(predictions={"q1": "Paris", "q2": "the river"}))
    assert json.loads((tmp_path / "run" / "predictions.json").read_text()) == {"q1": "Paris", "q2": "the river"}
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["predictions.json"]  # no temporary file left


@pytest.mark.slow
def test_a_tiny_span_gen_run_learns_and_writes_predictions(compose_cfg, tmp_path):
    cfg = compose_cfg(
        "model=dcn",
        "data=span_gen",
        "data.source.num_train=1000",
        "data.source.num_val=100",
        "data.source.num_test=100",
        "data.source.entities_per_context=2",
        "data.source.facts_per_entity=2",
        "data.source.fillers=1",
        "trainer.max_epochs=4",
        "callbacks.plots.num_examples=1",
        *FAST,
    )
    run.train(cfg)
    out = tmp_path / "run"
    metrics = json.loads((out / "metrics.json").read_text())
    assert {"val/em", "val/f1", "test/em", "test/f1", "test/loss"} <= set(metrics)
    assert metrics["test/em"] > 0.3 and metrics["test/f1"] >= metrics["test/em"]  # untrained: 0.0
    predictions = json.loads((out / "predictions.json").read_text())
    assert len(predictions) == 100 and all(isinstance(v, str) and v for v in predictions.values())
    assert {p.name for p in (out / "plots").iterdir()} >= {"pointers_0.png", "coattention_0.png"}
    ckpt = next((out / "checkpoints").glob("epoch*.ckpt"))
    run.evaluate(compose_cfg(f"ckpt_path={ckpt}", config_name="eval", run_dir=tmp_path / "eval"))
    assert json.loads((tmp_path / "eval" / "predictions.json").read_text()).keys() == predictions.keys()
