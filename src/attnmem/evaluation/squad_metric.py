"""Exact match and F1 as the official SQuAD v1.1 evaluation defines them (Rajpurkar et al. 2016, §5).

Both compare normalised text: lower case, punctuation removed, the articles a/an/the removed,
white space collapsed. F1 is the harmonic mean of precision and recall of the shared tokens (a
multiset intersection); a prediction's score is its best over all reference answers.

Kept beside `torchmetrics.text.SQuAD`, which agrees on every case in tests/evaluation/test_squad_metric.py but one:
the span family scores each question as a fraction and adds it to its own epoch sums (one tensor update
per batch, reduced across processes with the loss), and keeps each question's answer text for
predictions.json; torchmetrics' class averages percentages over its own dict inputs and keeps its
per-question functions private. Where they differ (two answers that both normalise to nothing), this
follows the official v1.1 script: F1 0, where torchmetrics gives 100.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Sequence

__all__ = ["best_over_references", "exact_match", "f1", "normalize_answer"]

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation, drop the articles a/an/the, collapse white space."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, reference: str) -> float:
    """1.0 when the normalised texts are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(reference))


def f1(prediction: str, reference: str) -> float:
    """Token-overlap F1 of the normalised texts (0.0 when they share no token)."""
    predicted, expected = normalize_answer(prediction).split(), normalize_answer(reference).split()
    common = sum((Counter(predicted) & Counter(expected)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def best_over_references(metric: Callable[[str, str], float], prediction: str, references: Sequence[str]) -> float:
    """The metric's best value over the reference answers (the official evaluation's max)."""
    return max(metric(prediction, reference) for reference in references)
