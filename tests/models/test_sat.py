"""Show, Attend and Tell: shapes, soft and hard attention, decoding steps equal to the teacher-forced forward."""

from __future__ import annotations

import pytest
import torch

from attnmem.attention import Additive, Dot
from attnmem.evaluation.decode import greedy
from attnmem.models.sat import SAT


def _batch(batch: int = 3, words: int = 4) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    return {"image": torch.rand(batch, 1, 16, 40), "tgt": torch.randint(4, 14, (batch, words + 1))}


def test_soft_attention_is_a_distribution_over_the_grid_per_word():
    net = SAT(vocab_size=14, channels=1, score=Additive, conv_channels=[8, 8, 8])
    out = net(_batch())
    assert out.pred.shape == (3, 4, 14)
    (alpha,) = out.attention
    assert alpha.shape == (3, 4, 4, 10)  # two 2x2 pools: 16 x 40 pixels -> 4 x 10 cells
    torch.testing.assert_close(alpha.sum((-1, -2)), torch.ones(3, 4))


def test_hard_attention_samples_while_training_and_takes_the_argmax_in_eval():
    net = SAT(vocab_size=14, channels=1, score=Dot, attention_type="hard", conv_channels=[8, 8])
    batch = _batch()
    alpha, chosen = net(batch).attention
    assert chosen.shape == alpha.shape == (3, 4, 8, 20)
    assert torch.equal(chosen.flatten(2).sum(-1), torch.ones(3, 4))  # one location per word
    torch.manual_seed(1)
    samples = torch.stack([net(batch).attention[1][0, 0].flatten().argmax() for _ in range(20)])
    assert len(samples.unique()) > 1  # α over 160 cells of a fresh net is nearly uniform: the samples differ
    net.eval()
    alpha, chosen = net(batch).attention
    assert torch.equal(chosen.flatten(2).argmax(-1), alpha.flatten(2).argmax(-1))


@pytest.mark.parametrize("attention_type", ["soft", "hard"])
def test_decoding_steps_give_the_teacher_forced_logits(attention_type):
    net = SAT(vocab_size=14, channels=1, score=Additive, attention_type=attention_type, selector=False).eval()
    batch = _batch()
    forced = net(batch).pred  # (B, T, V)
    state, stepped = net.encode(batch["image"]), []
    for t in range(batch["tgt"].shape[1] - 1):
        logits, state = net.decode_step(state, batch["tgt"][:, t])
        stepped.append(logits)
    torch.testing.assert_close(torch.stack(stepped, 1), forced)
    tokens = greedy(net, batch["image"], max_len=5, bos_id=1, eos_id=2)
    assert tokens.shape[0] == 3


def test_options_are_checked_by_name():
    with pytest.raises(ValueError, match="attention_type must be one of"):
        SAT(vocab_size=14, channels=1, score=Dot, attention_type="soft-ish")
    with pytest.raises(ValueError, match="conv_channels"):
        SAT(vocab_size=14, channels=1, score=Dot, conv_channels=[])
