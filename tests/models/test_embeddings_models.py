"""NNLM, C&W and word2vec against hand-computed values; the three losses; analogies, neighbours, GloVe files."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attnmem.core.errors import UserError
from attnmem.core.glove import read_vectors, write_vectors
from attnmem.evaluation.word_vectors import Analogy, analogy_accuracy, nearest, pca, read_analogies
from attnmem.models.cw import CW
from attnmem.models.nnlm import NNLM
from attnmem.models.word2vec import Word2Vec
from attnmem.tasks.embeddings import negative_sampling_loss, next_word_loss, ranking_loss

BATCH = {"window": torch.tensor([[0, 1, 2, 3, 1]]), "negatives": torch.tensor([[3, 2]])}  # w = 2, centre 2


def test_skipgram_logits_are_output_vectors_dot_the_centre_input_vector():
    net = Word2Vec(vocab_size=4, window=2, embed_dim=2)
    with torch.no_grad():
        net.input.weight.copy_(torch.tensor([[0.0, 0], [1, 0], [0, 2], [1, 1]]))
        net.output.weight.copy_(torch.tensor([[0.0, 0], [1, 2], [3, -1], [0, 1]]))
    pred = net(BATCH).pred  # (1, 4, 3): context 0, 1, 3, 1; negatives 3, 2; v_centre = (0, 2)
    assert pred.tolist() == [[[0, 2, -2], [4, 2, -2], [2, 2, -2], [4, 2, -2]]]
    cbow = Word2Vec(vocab_size=4, window=2, embed_dim=2, mode="cbow")
    cbow.load_state_dict(net.state_dict())
    # h = mean(v_1, v_3, v_1) over the three real context words = (1, 1/3); targets 2, 3, 2
    assert cbow(BATCH).pred[0, 0].tolist() == pytest.approx([3 - 1 / 3, 1 / 3, 3 - 1 / 3])


def test_cw_scores_the_window_then_each_corrupted_centre():
    net = CW(vocab_size=4, window=2, embed_dim=1, hidden_size=1)
    with torch.no_grad():
        net.lookup.weight.copy_(torch.tensor([[0.0], [0.1], [0.2], [0.3]]))
        net.hidden.weight.copy_(torch.tensor([[1.0, 1, 1, 1, 1]]))
        net.hidden.bias.zero_()
        net.out.weight.fill_(2.0)
        net.out.bias.fill_(0.5)
    # s = 2 hardtanh(sum of the window's features) + 0.5: 0.7 -> 1.9; centre 3: 0.8 -> 2.1; centre 2 again: 1.9
    assert net(BATCH).pred.tolist()[0] == pytest.approx([1.9, 2.1, 1.9])


def test_nnlm_is_equation_one_on_the_words_before_the_centre():
    torch.manual_seed(0)
    net = NNLM(vocab_size=4, window=2, embed_dim=3, hidden_size=5)
    x = torch.cat([net.C.weight[0], net.C.weight[1]])  # history: ids 0, 1
    y = net.U(torch.tanh(net.H(x))) + net.W(x)
    assert torch.allclose(net(BATCH).pred[0], y)
    assert NNLM(vocab_size=4, window=2, direct=False).W is None


def test_losses_by_hand():
    window = torch.tensor([[0, 1, 2, 3, 0]])
    losses, weights = negative_sampling_loss(torch.tensor([[[0.0, 0.0], [1.0, -1.0], [0.0, 0.0], [2.0, 0.0]]]), window)
    sp = lambda x: math.log1p(math.exp(x))  # −log σ(x) = softplus(−x)
    assert losses[0].tolist() == pytest.approx([2 * sp(0), sp(-1) + sp(-1), 2 * sp(0), sp(-2) + sp(0)])
    assert weights.tolist() == [[0, 1, 1, 0]]  # the pads of the context (positions 0 and 4) are skipped
    assert negative_sampling_loss(torch.zeros(1, 1, 3), window)[1].tolist() == [[1.0]]  # CBOW: one prediction
    assert ranking_loss(torch.tensor([[2.0, 0.5, 1.5]]), window)[0].tolist() == [0.0 + 0.5]
    logits = torch.tensor([[1.0, 2.0, 3.0, 0.0]])
    assert next_word_loss(logits, window)[0].item() == pytest.approx(-F.log_softmax(logits, -1)[0, 2].item())


VECTORS = torch.tensor([[0.0, 0], [1, 0], [1, 1], [0, 1], [-1, 1.1], [0.9, 0.1]])
ITOS = ["<pad>", "man", "king", "woman", "queen", "boy"]


def test_analogy_accuracy_excludes_the_question_words_and_skips_unknown_ones():
    right = Analogy("s", "man", "king", "woman", "queen")  # king − man + woman = (0, 2): queen, once king is out
    wrong = Analogy("s", "man", "woman", "king", "boy")  # (0, 2) again: queen, not boy
    unknown = Analogy("s", "man", "king", "girl", "queen")
    assert analogy_accuracy(VECTORS, ITOS, [right, wrong, unknown]) == (0.5, 2)
    assert nearest(VECTORS, ITOS, ["man", "nobody"], 2) == {
        "man": [("boy", pytest.approx(0.9939, abs=1e-4)), ("king", pytest.approx(0.7071, abs=1e-4))]
    }


def test_a_malformed_analogy_line_names_file_and_line(tmp_path):
    path = tmp_path / "questions-words.txt"
    path.write_text(": capital-common-countries\nAthens Greece Baghdad Iraq\nAthens Greece Bangkok\n")
    with pytest.raises(UserError, match=r"questions-words.txt:3: expected four words 'a b c d'.*got 3 word\(s\)"):
        read_analogies(path)
    path.write_text(": family\nBoy Girl King Queen\n")
    assert read_analogies(path) == [Analogy("family", "boy", "girl", "king", "queen")]


def test_glove_round_trip_and_pca_axes(tmp_path):
    write_vectors(tmp_path / "v.txt", ITOS[1:], VECTORS[1:])
    assert (tmp_path / "v.txt").read_text().splitlines()[1] == "king 1 1"
    vectors = read_vectors(tmp_path / "v.txt", ITOS)
    assert vectors.dim == 2 and torch.equal(vectors.matrix(ITOS), VECTORS)
    points = pca(torch.tensor([[1.0, 1], [-1, -1], [2, 2], [-2, -2]]))  # all on one line: PC2 is 0
    assert points[:, 0].abs().tolist() == pytest.approx([2**0.5, 2**0.5, 8**0.5, 8**0.5])
    assert points[:, 1].abs().max() < 1e-5
