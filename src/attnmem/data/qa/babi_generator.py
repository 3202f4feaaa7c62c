"""Generated bAbI-style stories (after Weston et al. 2015, arXiv:1502.05698) for tasks 1, 2, 3 and 6, as a qa source.

The seeded simulator (`attnmem.data.babi_simulator`) writes its stories as text in the official v1.2 format,
read back with the same `parse_babi` as the real files, so the generator exercises the reader too and needs no
download.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import ClassVar

from attnmem.core.glove import Vectors, read_vectors
from attnmem.data.babi_simulator import LOCATIONS, NAMES, OBJECTS, TASKS, generate_babi
from attnmem.data.qa.babi_text import parse_babi
from attnmem.data.qa.tensors import Example, QAData


class BabiGenerator:
    """bAbI-style tasks 1, 2, 3 and 6 from the seeded simulator; train, val and test are all generated.

    `embeddings` names an optional GloVe-format file of word vectors the model starts from.
    """

    supported_tasks: ClassVar[tuple[int, ...]] = TASKS

    def __init__(self, *, num_train: int = 1000, num_val: int = 100, num_test: int = 1000, num_people: int = 4,
                 num_locations: int = 6, num_objects: int = 3, statements_per_question: int = 2,
                 questions_per_story: int = 5, seed: int = 0, embeddings: str | None = None) -> None:
        limits = {"num_train": (num_train, 1, None), "num_val": (num_val, 1, None), "num_test": (num_test, 1, None),
                  "num_people": (num_people, 1, len(NAMES)), "num_locations": (num_locations, 2, len(LOCATIONS)),
                  "num_objects": (num_objects, 1, len(OBJECTS)),
                  "statements_per_question": (statements_per_question, 1, None),
                  "questions_per_story": (questions_per_story, 1, None)}
        for name, (value, low, high) in limits.items():
            if value < low or (high is not None and value > high):
                raise ValueError(f"data.source.{name} must be in [{low}, {high or 'inf'}], got {value}")
        self.sizes = {"train": num_train, "val": num_val, "test": num_test}
        self.story_options = {"statements_per_question": statements_per_question, "people": num_people,
                              "locations": num_locations, "objects": num_objects,
                              "questions_per_story": questions_per_story}
        self.seed = seed
        self.embeddings = Path(embeddings) if embeddings else None
        # nothing else is read: the manifest hashes only the embeddings file, if any
        self.data_files: list[Path] = [self.embeddings] if self.embeddings else []

    def vectors(self, words: Collection[str]) -> Vectors | None:
        """The GloVe-format vectors of those `words` that the `embeddings` file has, when it names one."""
        return None if self.embeddings is None else read_vectors(self.embeddings, words)

    def prepare(self) -> None:
        """Nothing to fetch: the stories are generated in `load`."""

    def load(self, tasks: list[int], memory_size: int, *, fit_memory: bool = False) -> QAData:
        """The tasks' generated train, validation and test tensors, vocabularies from the training split."""
        splits = {split: self._examples(tasks, split, size) for split, size in self.sizes.items()}
        return QAData.from_examples(splits, splits["train"], memory_size=memory_size, fit_memory=fit_memory)

    def _examples(self, tasks: list[int], split: str, per_task: int) -> list[Example]:
        """Generate the split's text for every task and parse it like a file."""
        return [ex for task in tasks for ex in parse_babi(
            generate_babi(task, per_task, self.seed, split, **self.story_options), f"<babi_gen task {task} {split}>",
            task)]
