"""RNN baselines of the qa, seq2seq and sequence families: padding, packing, step-by-step decoding, learning, options."""

from __future__ import annotations

import pytest
import torch

from attnmem.blocks.rnn import Encoder, compact
from attnmem.models.rnn_qa import RNNQA
from attnmem.models.rnn_seq2seq import RNNSeq2Seq
from attnmem.models.rnn_sequence import RNNSequence

torch.set_num_threads(1)


def seq2seq(**kw) -> RNNSeq2Seq:
    torch.manual_seed(0)
    return RNNSeq2Seq(**({"src_vocab_size": 9, "tgt_vocab_size": 7, "hidden_size": 8, "embed_dim": 4} | kw))


def test_compact_moves_words_left_in_order():
    ids = torch.tensor([[0, 5, 0, 6, 7, 0], [8, 0, 0, 0, 0, 0]])
    assert compact(ids, 0).tolist() == [[5, 6, 7], [8, 0, 0]]


@pytest.mark.parametrize("cell", ["rnn", "lstm", "gru"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_encoder_ignores_padding_and_joins_directions_per_layer(cell, bidirectional):
    torch.manual_seed(0)
    enc = Encoder(
        vocab_size=9,
        pad_id=0,
        cell=cell,
        embed_dim=4,
        hidden_size=6,
        num_layers=2,
        bidirectional=bidirectional,
        dropout=0.0,
    )
    short, padded = torch.tensor([[4, 5, 6]]), torch.tensor([[4, 5, 6, 0, 0]])
    (s1, f1, _), (s2, f2, m2) = enc(short), enc(padded)
    f1, f2 = (f1, f2) if cell == "lstm" else ((f1,), (f2,))
    assert s2.shape == (1, 5, 6) and f2[0].shape == (2, 1, 6) and m2.tolist() == [[True] * 3 + [False] * 2]
    torch.testing.assert_close(s2[:, :3], s1)
    assert torch.all(s2[:, 3:] == 0)
    for a, b in zip(f1, f2):
        torch.testing.assert_close(a, b)
    if bidirectional:  # the backward half of the last layer's final state is its state at position 0
        torch.testing.assert_close(f1[0][-1, 0, 3:], s1[0, 0, 3:])
    torch.testing.assert_close(f1[0][-1, 0, :3], s1[0, -1, :3])


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_seq2seq_stepwise_decoding_equals_teacher_forcing(cell):
    model = seq2seq(cell=cell, num_layers=2, bidirectional=True).eval()
    batch = {"src": torch.tensor([[4, 5, 6], [7, 0, 0]]), "tgt": torch.tensor([[1, 4, 5, 2], [1, 6, 2, 0]])}
    out = model(batch)
    assert out.pred.shape == (2, 3, 7) and out.attention == []
    state, logits = model.encode(batch["src"]), []
    for t in range(3):
        step, state = model.decode_step(state, batch["tgt"][:, t])
        assert all(v.shape[0] == 2 for v in state.values())  # batch first, for beam search
        logits.append(step)
    torch.testing.assert_close(torch.stack(logits, 1), out.pred)


def test_qa_reads_story_then_query_without_padding():
    torch.manual_seed(0)
    model = RNNQA(vocab_size=12, num_answers=5, hidden_size=8, embed_dim=4)
    story = torch.tensor([[[4, 5, 0], [6, 0, 0], [0, 0, 0]]], dtype=torch.int16)  # (B, S, L), int16 as data/qa/tensors
    query = torch.tensor([[7, 8, 0]])
    out = model({"story": story, "query": query})
    assert out.pred.shape == (1, 5)
    words = {"story": torch.tensor([[[4, 5, 6, 7]]]), "query": torch.tensor([[8]])}  # the same words, repacked
    torch.testing.assert_close(model(words).pred, out.pred)


def test_qa_learns_which_word_answers():
    torch.manual_seed(0)
    model = RNNQA(vocab_size=10, num_answers=4, hidden_size=16, embed_dim=8)
    story = torch.randint(4, 10, (32, 3, 2))
    query = torch.randint(4, 10, (32, 2))
    answer = story[:, 0, 0] % 4  # the first word of the story, mod 4
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(150):
        loss = torch.nn.functional.cross_entropy(model({"story": story, "query": query}).pred, answer)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert (model({"story": story, "query": query}).pred.argmax(-1) == answer).float().mean() > 0.9


@pytest.mark.parametrize(
    ("model", "kw", "message"),
    [
        (RNNSeq2Seq, {"src_vocab_size": 0, "tgt_vocab_size": 7}, "RNNSeq2Seq: src_vocab_size must be >= 1, got 0"),
        (RNNSeq2Seq, {"src_vocab_size": 9, "tgt_vocab_size": 0}, "RNNSeq2Seq: tgt_vocab_size must be >= 1, got 0"),
        (RNNQA, {"vocab_size": 5, "num_answers": 0}, "RNNQA: num_answers must be >= 1, got 0"),
        (RNNSequence, {"input_size": 3, "output_size": 0}, "RNNSequence: output_size must be >= 1, got 0"),
        (RNNSequence, {"input_size": 3, "output_size": 2, "cell": "tree"}, "cell must be one of"),
        (RNNQA, {"vocab_size": 5, "num_answers": 2, "bidirectional": True, "hidden_size": 7}, "even"),
        (RNNQA, {"vocab_size": 5, "num_answers": 2, "embed_dim": 0}, "embed_dim must be >= 1"),
    ],
)
def test_bad_options_name_the_option(model, kw, message):
    with pytest.raises(ValueError, match=message):
        model(**kw)


def test_a_sequence_model_reads_one_way_only():
    """It answers online: the sequence baseline has no `bidirectional` option to set."""
    with pytest.raises(TypeError, match="bidirectional"):
        RNNSequence(input_size=3, output_size=2, bidirectional=True)


def test_each_reader_serves_one_family():
    assert (RNNSequence.families, RNNQA.families, RNNSeq2Seq.families) == (("sequence",), ("qa",), ("seq2seq",))
