"""Generated documents whose label one sentence among distractors decides, that sentence's index kept."""

from __future__ import annotations

import random
from pathlib import Path

from attnmem.data.classify.document import Document

__all__ = ["DocumentGenerator"]

# each class's cue words: the deciding sentence holds one, a distractor may hold one of any class
CUES = {
    "sports": ("goal", "match", "team", "coach"),
    "music": ("song", "band", "album", "guitar"),
    "science": ("theory", "atom", "experiment", "laboratory"),
    "travel": ("flight", "hotel", "beach", "passport"),
}
MARKERS = ("overall", "verdict", "conclusion")  # what marks the deciding sentence: a cue beside one decides
FILLERS = tuple(
    "the a of and to in was it that for on with as at by from this we they he she but not had were his her "
    "their there been one all would which when who will more said some what about into than them could".split()
)


class DocumentGenerator:
    """Documents of `sentences` sentences of `words` filler words; one sentence, anywhere, holds a marker word
    ("overall", "verdict", "conclusion") and a cue word of the label's class, and each other sentence holds,
    with probability `distractor_cues`, a cue word of a random class. A bag of words cannot tell the label; a
    model must find the marked sentence, whose index each document keeps (`deciding`) for evaluation.
    """

    data_files: list[Path] = []

    def __init__(self, *, num_train: int = 2000, num_val: int = 200, num_test: int = 500, num_classes: int = 4,
                 sentences: tuple[int, int] = (4, 8), words: tuple[int, int] = (5, 9),
                 distractor_cues: float = 0.7, seed: int = 0) -> None:
        for name, value in (("num_train", num_train), ("num_val", num_val), ("num_test", num_test)):
            if value < 0:
                raise ValueError(f"data.source.{name} must be >= 0, got {value}")
        if not 2 <= num_classes <= len(CUES):
            raise ValueError(f"data.source.num_classes must be in [2, {len(CUES)}], got {num_classes}")
        for name, (low, high) in (("sentences", sentences), ("words", words)):
            if not 2 <= low <= high:
                raise ValueError(f"data.source.{name} must be [min, max] with 2 <= min <= max, got {[low, high]}")
        if not 0 <= distractor_cues <= 1:
            raise ValueError(f"data.source.distractor_cues must be in [0, 1], got {distractor_cues}")
        self.sizes = {"train": num_train, "val": num_val, "test": num_test}
        self.classes = sorted(CUES)[:num_classes]
        self.sentences, self.words = tuple(sentences), tuple(words)
        self.distractor_cues, self.seed = distractor_cues, seed

    def prepare(self) -> None:
        """Nothing to fetch."""

    def load(self) -> dict[str, list[Document]]:
        """Each split from its own seeded stream, so changing one split's size leaves the others as they were."""
        return {split: self.documents(split) for split in self.sizes}

    def documents(self, split: str) -> list[Document]:
        """The split's documents."""
        rng = random.Random(f"classify-gen/{self.seed}/{split}")
        return [self._document(rng) for _ in range(self.sizes[split])]

    def _document(self, rng: random.Random) -> Document:
        label = rng.choice(self.classes)
        count = rng.randint(*self.sentences)
        deciding = rng.randrange(count)
        sentences = []
        for j in range(count):
            words = [rng.choice(FILLERS) for _ in range(rng.randint(*self.words) - 2)]
            if j == deciding:
                extra = [rng.choice(MARKERS), rng.choice(CUES[label])]
            else:
                extra = [rng.choice(FILLERS)]
                if rng.random() < self.distractor_cues:
                    extra.append(rng.choice(CUES[rng.choice(self.classes)]))
                else:
                    extra.append(rng.choice(FILLERS))
            for word in extra:
                words.insert(rng.randint(0, len(words)), word)
            sentences.append(words)
        return Document(label=label, sentences=sentences, deciding=deciding)
