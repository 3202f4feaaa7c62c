"""Decoding: beam size 1 is greedy, a wide beam is exhaustive search under the GNMT length penalty, stopping at eos."""

from __future__ import annotations

import functools
import itertools
import math

import pytest
import torch
from torch import Tensor, nn

from attnmem.attention import Additive
from attnmem.evaluation import decode
from attnmem.models.attn_rnn import AttnRNN
from attnmem.models.rnn_seq2seq import RNNSeq2Seq

torch.set_num_threads(1)

PAD, BOS, EOS, A, B = 0, 1, 2, 3, 4


class Table(nn.Module):
    """A fake model whose next-token probabilities depend on the previous token only, from a fixed table."""

    def __init__(self, table: dict[int, dict[int, float]], vocab: int = 5) -> None:
        super().__init__()
        self.logp = torch.full((vocab, vocab), -1e9)
        for prev, probs in table.items():
            for token, p in probs.items():
                self.logp[prev, token] = math.log(p)

    def encode(self, src: Tensor) -> dict[str, Tensor]:
        return {"src": src}

    def decode_step(self, state: dict[str, Tensor], tokens: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        return self.logp[tokens], state


# greedy takes A (0.6) and then at best 0.4: p(A eos) = 0.24; B (0.4) then eos (0.9) is better: 0.36
TRAP = {BOS: {A: 0.6, B: 0.4}, A: {EOS: 0.4, A: 0.3, B: 0.3}, B: {EOS: 0.9, A: 0.05, B: 0.05}}


def test_beam_of_two_escapes_the_greedy_first_choice():
    model, src = Table(TRAP), torch.zeros(3, 2, dtype=torch.long)
    args = {"max_len": 5, "bos_id": BOS, "eos_id": EOS}
    assert decode.greedy(model, src, **args).tolist() == [[A, EOS]] * 3
    assert decode.beam(model, src, 2, **args).tolist() == [[B, EOS]] * 3
    assert decode.beam(model, src, 1, **args).tolist() == [[A, EOS]] * 3


def test_finished_hypotheses_pad_and_length_penalty_prefers_the_longer_one():
    # with 4 steps the beam ends holding B eos (0.5 * 0.8 = 0.4, 2 tokens) and A A A A (0.5 * 0.9^3 = 0.3645)
    table = {BOS: {A: 0.5, B: 0.5}, A: {A: 0.9, EOS: 0.1}, B: {EOS: 0.8, A: 0.2}}
    model, src = Table(table), torch.zeros(1, 1, dtype=torch.long)
    args = {"max_len": 4, "bos_id": BOS, "eos_id": EOS}
    assert decode.beam(model, src, 2, **args).tolist() == [[B, EOS, PAD, PAD]]
    # GNMT, α = 1: log(0.3645) / (9/6) = -0.673 > log(0.4) / (7/6) = -0.785
    assert decode.beam(model, src, 2, length_penalty=1.0, **args).tolist() == [[A, A, A, A]]


class Prefix(nn.Module):
    """A fake model whose next-token log-probabilities are random but fixed for every (source, prefix); never pad or bos."""

    def __init__(self, seed: int, *, vocab: int, max_len: int, sources: int) -> None:
        super().__init__()
        self.vocab = vocab
        gen = torch.Generator().manual_seed(seed)
        self.table = torch.randn(sources * (vocab + 1) ** max_len, vocab, generator=gen) * 2  # (codes, V)
        self.table[:, [PAD, BOS]] = float("-inf")

    def encode(self, src: Tensor) -> dict[str, Tensor]:
        return {"code": src[:, 0]}  # (B,)

    def decode_step(self, state: dict[str, Tensor], tokens: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        code = state["code"] * (self.vocab + 1) + tokens + 1  # one code per source and prefix
        return self.table[code], {"code": code}


def exhaustive(model: Prefix, source: int, *, max_len: int, alpha: float) -> list[int]:
    """The best of all outputs (ended by eos, or max_len tokens without one) by log P(Y) / ((5 + |Y|) / 6)^α."""
    best, best_score = [], -math.inf
    words = [t for t in range(model.vocab) if t not in (PAD, BOS, EOS)]
    for n in range(1, max_len + 1):
        for body in itertools.product(words, repeat=n - 1):
            for last in [EOS, *words] if n == max_len else [EOS]:
                seq, state, tokens, logp = [*body, last], {"code": torch.tensor([source])}, torch.tensor([BOS]), 0.0
                for token in seq:
                    logits, state = model.decode_step(state, tokens)
                    logp += torch.log_softmax(logits, -1)[0, token].item()
                    tokens = torch.tensor([token])
                score = logp / ((5 + n) / 6) ** alpha
                if score > best_score:
                    best, best_score = seq, score
    return best


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0, 2.0])
@pytest.mark.parametrize(("vocab", "max_len"), [(5, 3), (5, 4), (6, 3)])  # |V| = 3 or 4
def test_a_beam_of_all_prefixes_is_exhaustive_search_under_the_length_penalty(alpha, vocab, max_len):
    words = vocab - 2  # |V|: eos and the words, pad and bos never come
    for seed in range(6):
        model, src = Prefix(seed, vocab=vocab, max_len=max_len, sources=4), torch.arange(4).unsqueeze(1)
        args = {"max_len": max_len, "bos_id": BOS, "eos_id": EOS, "length_penalty": alpha}
        found = decode.beam(model, src, words ** (max_len - 1), **args)  # every prefix of max_len - 1 tokens fits
        for source, row in enumerate(found.tolist()):
            expected = exhaustive(model, source, max_len=max_len, alpha=alpha)
            assert [t for t in row if t != PAD] == expected, (seed, source)


def plain_beam(model: Prefix, source: int, k: int, *, max_len: int, alpha: float) -> list[int]:
    """Beam search written plainly: every step ranks open continuations and finished outputs by log P(Y) / lp(Y)."""
    beam = [([], 0.0, {"code": torch.tensor([source])})]  # (tokens, log P, state)
    for _ in range(max_len):
        candidates = []
        for seq, logp, state in beam:
            if seq and seq[-1] == EOS:
                candidates.append((seq, logp, state))
                continue
            logits, after = model.decode_step(state, torch.tensor([seq[-1] if seq else BOS]))
            step = torch.log_softmax(logits, -1)[0]
            candidates += [([*seq, t], logp + step[t].item(), after) for t in range(model.vocab) if step[t] > -math.inf]
        beam = sorted(candidates, key=lambda h: h[1] / ((5 + len(h[0])) / 6) ** alpha, reverse=True)[:k]
        if all(seq[-1] == EOS for seq, _, _ in beam):
            break
    return beam[0][0]


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0, 2.0])
@pytest.mark.parametrize(("vocab", "k"), [(5, 2), (6, 2), (6, 3)])
def test_narrow_beam_keeps_the_hypotheses_the_length_penalty_ranks_best_at_every_step(alpha, vocab, k):
    for seed in range(20):
        model, src = Prefix(seed, vocab=vocab, max_len=5, sources=8), torch.arange(8).unsqueeze(1)
        found = decode.beam(model, src, k, max_len=5, bos_id=BOS, eos_id=EOS, length_penalty=alpha)
        for source, row in enumerate(found.tolist()):
            expected = plain_beam(model, source, k, max_len=5, alpha=alpha)
            assert [t for t in row if t != PAD] == expected, (seed, source)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0, 2.0])
def test_beam_size_one_is_greedy_under_any_length_penalty(alpha):
    for seed in range(6):
        model, src = Prefix(seed, vocab=5, max_len=6, sources=8), torch.arange(8).unsqueeze(1)
        args = {"max_len": 6, "bos_id": BOS, "eos_id": EOS}
        assert torch.equal(decode.beam(model, src, 1, length_penalty=alpha, **args), decode.greedy(model, src, **args))


def models() -> list[nn.Module]:
    torch.manual_seed(0)
    attn = AttnRNN(src_vocab_size=9, tgt_vocab_size=9, score=functools.partial(Additive), hidden_size=16, embed_dim=8)
    plain = RNNSeq2Seq(src_vocab_size=9, tgt_vocab_size=9, hidden_size=16, embed_dim=8, cell="gru")
    for model in (attn, plain):
        for p in model.parameters():
            nn.init.normal_(p, std=1.0)  # confident, varied choices: sequences end at different steps
    return [attn.eval(), plain.eval()]


@pytest.mark.parametrize("model", models(), ids=["attn_rnn", "rnn"])
def test_beam_size_one_equals_greedy_exactly(model):
    src = torch.randint(4, 9, (16, 7), generator=torch.Generator().manual_seed(0))  # not the order tests run in
    src[::2, 4:] = PAD
    args = {"max_len": 12, "bos_id": BOS, "eos_id": EOS}
    greedy = decode.greedy(model, src, **args)
    assert torch.equal(decode.beam(model, src, 1, **args), greedy)
    ended = (greedy == EOS).any(1)
    assert ended.any() and not ended.all()  # some rows stop early, others run to max_len


def test_beam_returns_a_sequence_at_least_as_probable_as_greedy():
    model, src = models()[0], torch.randint(4, 9, (8, 6))
    args = {"max_len": 10, "bos_id": BOS, "eos_id": EOS}

    def logp(seqs: Tensor) -> Tensor:
        state, tokens, total = model.encode(src), torch.full((8,), BOS), torch.zeros(8)
        alive = torch.ones(8, dtype=torch.bool)
        for t in range(seqs.shape[1]):
            logits, state = model.decode_step(state, tokens)
            total += torch.log_softmax(logits, -1).gather(1, seqs[:, t : t + 1]).squeeze(1) * alive
            alive &= seqs[:, t] != EOS
            tokens = seqs[:, t]
        return total

    assert (logp(decode.beam(model, src, 4, **args)) >= logp(decode.greedy(model, src, **args)) - 1e-5).all()


def test_beam_size_below_one_names_the_option():
    with pytest.raises(ValueError, match="decode.beam_size must be >= 1, got 0"):
        decode.beam(Table(TRAP), torch.zeros(1, 1, dtype=torch.long), 0, max_len=3, bos_id=BOS, eos_id=EOS)
