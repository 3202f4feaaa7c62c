"""The seq2seq family: decoded metrics and length buckets by hand, options, a tiny run that learns, BLEU, plots."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import FAST
from torch import Tensor, nn

from attnmem.blocks.output import Output
from attnmem.core.dims import Seq2SeqDims
from attnmem.runtime import run
from attnmem.tasks.seq2seq import Seq2SeqTask

DIMS = Seq2SeqDims(
    src_vocab_size=5, tgt_vocab_size=5, pad_id=0, bos_id=1, eos_id=2, max_src_len=4, max_tgt_len=5, test_lengths=[3]
)


class Echo(nn.Module):
    """Perfect teacher-forced logits; decoding echoes the source (then eos), so only palindromes come out right."""

    def __init__(self) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(()))

    def forward(self, batch: dict[str, Tensor]) -> Output:
        return Output(pred=10.0 * nn.functional.one_hot(batch["tgt"][:, 1:], 9).float() + self.bias)

    def encode(self, src: Tensor) -> dict[str, Tensor]:
        return {"src": nn.functional.pad(src, (0, 1)), "t": torch.zeros(len(src), dtype=torch.long)}

    def decode_step(self, state: dict[str, Tensor], tokens: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        token = state["src"].gather(1, state["t"].clamp_max(state["src"].shape[1] - 1).unsqueeze(1)).squeeze(1)
        token = torch.where(token == 0, 2, token)  # past the source: eos
        return 10.0 * nn.functional.one_hot(token, 9).float(), {**state, "t": state["t"] + 1}


def reverse_batch() -> dict[str, Tensor]:
    src = torch.tensor([[4, 5, 0], [6, 0, 0], [4, 4, 4]])
    tgt = torch.tensor([[1, 5, 4, 2, 0], [1, 6, 2, 0, 0], [1, 4, 4, 4, 2]])
    return {"src": src, "tgt": tgt}


def logged_test(task: Seq2SeqTask) -> dict[str, float]:
    logged = {}
    task.log_dict = lambda values, **kw: logged.update({k: float(v) for k, v in values.items()})
    task.test_step(reverse_batch(), 0, 0)
    task.on_test_epoch_end()
    return logged


def test_decoded_token_accuracy_exact_match_and_length_buckets_by_hand():
    got = logged_test(Seq2SeqTask(Echo(), optimizer=torch.optim.Adam, dims=DIMS, length_bucket=2))
    # row 0: 4 5 eos vs 5 4 eos (eos right); row 1: 6 eos right; row 2: 4 4 4 eos right
    assert got["test/token_acc"] == pytest.approx(7 / 9) and got["test/exact_match"] == pytest.approx(2 / 3)
    assert got["test/loss"] < 1e-3  # teacher-forced, near-perfect logits
    assert got["test/len1-2/token_acc"] == pytest.approx(3 / 5) and got["test/len1-2/exact_match"] == 0.5
    assert got["test/len3-4/token_acc"] == 1.0 and got["test/len3-4/exact_match"] == 1.0
    beam = logged_test(Seq2SeqTask(Echo(), optimizer=torch.optim.Adam, dims=DIMS, decode={"beam_size": 3}))
    assert beam["test/token_acc"] == pytest.approx(7 / 9)


def test_label_smoothing_raises_the_training_loss_of_a_confident_model():
    batch = reverse_batch()
    plain = Seq2SeqTask(Echo(), optimizer=torch.optim.Adam, dims=DIMS).training_step(batch, 0)
    smoothed = Seq2SeqTask(Echo(), optimizer=torch.optim.Adam, dims=DIMS, label_smoothing=0.1).training_step(batch, 0)
    assert plain < 1e-3 < smoothed


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"decode": {"beam_size": 0}}, "decode.beam_size must be >= 1"),
        ({"decode": {"beams": 2}}, "task.decode has no option"),
        ({"label_smoothing": 1.0}, "task.label_smoothing"),
        ({"length_bucket": -1}, "task.length_bucket"),
    ],
)
def test_bad_options_name_the_option(kw, message):
    with pytest.raises(ValueError, match=message):
        Seq2SeqTask(Echo(), optimizer=torch.optim.Adam, dims=DIMS, **kw)


TINY = [*FAST, "data.source.num_val=64", "data.source.num_test=64", "data.batch_size=32", "trainer.max_epochs=4"]


def test_a_tiny_attention_rnn_learns_to_copy_and_reports_every_slice(compose_cfg, tmp_path):
    cfg = compose_cfg(
        "model=attn_rnn",
        "data=copy_tokens",
        "data.source.vocab_size=5",
        "data.source.train_lengths=[1,3]",
        "data.source.test_lengths=[4]",
        "data.source.num_train=2000",
        "model.hidden_size=32",
        "model.embed_dim=16",
        "optimizer.lr=0.01",
        "+task.length_bucket=2",
        *TINY,
    )
    result = run.train(cfg)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert result == metrics["val/exact_match"] and metrics["test/exact_match"] > 0.9
    assert {
        "test/len4/exact_match",
        "test/len4/token_acc",
        "test/len1-2/token_acc",
        "test/len3-4/token_acc",
        "train/token_acc",
    } <= set(metrics)
    plots = sorted(p.name for p in (tmp_path / "run" / "plots").iterdir())
    assert plots == ["alignment_0.png", "alignment_1.png", "alignment_2.png", "alignment_3.png", "learning_curves.png"]


def test_parallel_text_reports_bleu(compose_cfg, tmp_path):
    pairs = [("a b c", "c b a"), ("b c", "c b"), ("a c", "c a"), ("c b a a", "a a b c")] * 8
    (tmp_path / "train.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in pairs))
    cfg = compose_cfg(
        "model=rnn_seq2seq",
        "data=parallel_text",
        f"data.source.train_file={tmp_path / 'train.tsv'}",
        f"data.source.test_file={tmp_path / 'train.tsv'}",
        "model.hidden_size=16",
        "model.embed_dim=8",
        *FAST,
        "trainer.max_epochs=2",
    )
    run.train(cfg)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert 0.0 <= metrics["val/bleu"] <= 1.0 and 0.0 <= metrics["test/bleu"] <= 1.0
    assert "test/len1-10/token_acc" in metrics


@pytest.mark.parametrize("experiment", ["rnn_reverse", "attn_rnn_reverse", "rnn_reverse_long", "attn_rnn_reverse_long"])
def test_experiments_compose_and_build(compose_cfg, experiment):
    cfg = compose_cfg(
        f"experiment={experiment}", "data.source.num_train=8", "data.source.num_val=8", "data.source.num_test=8"
    )
    datamodule, module, trainer = run.setup(cfg)
    assert cfg.name == experiment and cfg.data.source.task == "reverse" and trainer.max_epochs >= 20
    long = experiment.endswith("_long")
    assert list(cfg.data.source.train_lengths) == ([1, 50] if long else [1, 20])
    assert (cfg.callbacks.early_stopping is None) == long  # the length study spends the whole budget
    assert module.monitor == "val/exact_match"
