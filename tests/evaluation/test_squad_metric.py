"""The official SQuAD v1.1 EM and F1, on hand-made cases with hand-computed values."""

from __future__ import annotations

import pytest
from torchmetrics.text import SQuAD

from attnmem.evaluation.squad_metric import best_over_references, exact_match, f1, normalize_answer


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("The Quick, brown fox!", "quick brown fox"),
        ("  New\tYork \n", "new york"),
        ("an anthem for a band", "anthem for band"),  # articles only as whole words
        ("state-of-the-art", "stateoftheart"),  # punctuation is removed, not replaced by a space
        ("U.S.A.", "usa"),
        ("the.", ""),
    ],
)
def test_normalize_answer(text, normalized):
    assert normalize_answer(text) == normalized


CASES = [
        ("Paris", ["paris"], 1.0, 1.0),  # case
        ("the Eiffel Tower", ["Eiffel Tower"], 1.0, 1.0),  # articles
        ("U.S.A.", ["USA"], 1.0, 1.0),  # punctuation
        ("the cat sat", ["cat sat down"], 0.0, 0.8),  # P = 2/2, R = 2/3
        ("dog", ["cat"], 0.0, 0.0),  # no shared token
        ("Denver Broncos", ["Broncos", "Denver Broncos", "the Broncos"], 1.0, 1.0),  # several references
        ("in 1990", ["1990s", "1990", "year 1990"], 0.0, 2 / 3),  # best F1 is against "1990": P 1/2, R 1
        ("", ["Paris"], 0.0, 0.0),  # empty prediction
        ("the.", ["a"], 1.0, 0.0),  # both normalise to "": equal, but F1 has no token to share
        ("the the cat cat cat", ["cat"], 0.0, 0.5),  # multiset overlap: 1 shared, P 1/3, R 1
        ("state-of-the-art", ["state of the art"], 0.0, 0.0),
        ("New York City", ["new york", "York City area"], 0.0, 0.8),  # 0.8 (P 2/3, R 1) beats 2/3 (P = R = 2/3)
    ]


@pytest.mark.parametrize(("prediction", "references", "em", "f1_value"), CASES)
def test_exact_match_and_f1_over_references(prediction, references, em, f1_value):
    assert best_over_references(exact_match, prediction, references) == em
    assert best_over_references(f1, prediction, references) == pytest.approx(f1_value)


def test_the_best_reference_is_taken_for_each_metric_separately():
    # EM's best is the exact reference, F1's best is also it; a worse reference never lowers either
    references = ["completely different", "blue whale"]
    assert best_over_references(exact_match, "Blue whale!", references) == 1.0
    assert best_over_references(f1, "the blue whale", references) == 1.0
    assert f1("blue", "blue whale") == pytest.approx(2 / 3)


def test_torchmetrics_squad_agrees_on_every_case():
    """Ours is kept for per-question fractions on our own metric state; torchmetrics' SQuAD scores the same (in %)."""
    metric = SQuAD()
    for number, (prediction, references, em, f1_value) in enumerate(CASES):
        if not normalize_answer(prediction) and not any(map(normalize_answer, references)):
            continue  # two answers empty once normalised: torchmetrics' F1 is 100, the official script's 0
        question = str(number)
        got = metric([{"prediction_text": prediction, "id": question}],
                     [{"answers": {"answer_start": [0] * len(references), "text": references}, "id": question}])
        assert (float(got["exact_match"]) / 100, float(got["f1"]) / 100) == pytest.approx((em, f1_value))
        metric.reset()
