"""A document of the classify family, the sentence splitting and word rules, and the seeded split by fractions."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from attnmem.core.errors import UserError

__all__ = ["Document", "sentences", "split_documents"]

# a sentence ends at a line break (or an HTML <br />, as in IMDB reviews) or after . ! ? (and any closing
# quotes or brackets) followed by white space; "e.g. this" splits too: the rule is simple, not a parser
_BREAK = re.compile(r"(?:<br\s*/?>|\n)+|(?<=[.!?])[\"')\]]*\s+", re.IGNORECASE)
_WORD = re.compile(r"\w+(?:'\w+)*")  # letters and digits, inner apostrophes kept ("don't"); punctuation dropped


@dataclass(frozen=True)
class Document:
    """One labelled document: its sentences as words, the deciding sentence's index (-1: unknown), its origin."""

    label: str
    sentences: list[list[str]]
    deciding: int = -1
    origin: str = ""  # `file:line` (or `archive:member`) for errors; empty for generated documents


def sentences(text: str, lowercase: bool = True) -> list[list[str]]:
    """The text's sentences as lists of words, empty sentences dropped."""
    text = text.lower() if lowercase else text
    return [words for part in _BREAK.split(text) if (words := _WORD.findall(part))]


def parsed(label: str, text: str, origin: str, lowercase: bool) -> Document:
    """A document from a label and a raw text; one line naming `origin` when either is empty."""
    if not label.strip():
        raise UserError(f"{origin}: empty label: give every document a label (label, then text)")
    words = sentences(text, lowercase)
    if not words:
        raise UserError(f"{origin}: empty text (no words): remove the line or give the document its text")
    return Document(label=label.strip(), sentences=words, origin=origin)


def split_documents(documents: Sequence[Document], fractions: Sequence[float], seed: int,
                    where: str) -> list[list[Document]]:
    """Training documents plus one part per fraction, drawn per label with `seed` (each label keeps >= 1 training)."""
    if any(not 0 <= f < 1 for f in fractions) or sum(fractions) >= 1:
        raise UserError(f"{where}: val_fraction and test_fraction must be in [0, 1) and sum below 1, got {fractions}")
    by_label: dict[str, list[Document]] = {}
    for doc in documents:
        by_label.setdefault(doc.label, []).append(doc)
    parts: list[list[Document]] = [[] for _ in range(len(fractions) + 1)]
    rng = random.Random(f"classify/{seed}")
    for label in sorted(by_label):
        docs = list(by_label[label])
        rng.shuffle(docs)
        first = 0
        for k, fraction in enumerate(fractions, start=1):
            size = min(round(fraction * len(docs)), len(docs) - first - 1)
            parts[k] += docs[first : first + max(size, 0)]
            first += max(size, 0)
        parts[0] += docs[first:]
    return parts
