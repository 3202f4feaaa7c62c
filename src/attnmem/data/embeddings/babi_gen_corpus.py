"""The seeded bAbI simulator's stories as an embeddings corpus: no download, the text `BabiCorpus` makes of files."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from attnmem.data.babi_simulator import LOCATIONS, NAMES, OBJECTS, TASKS, generate_babi
from attnmem.data.embeddings.folder import held_out


def story_documents(lines: Sequence[str]) -> Iterator[str]:
    """bAbI text as documents, one a story (from a line numbered 1 to the next), numbers, answers, supports gone."""
    story: list[str] = []
    for line in lines:
        number, text = line.split(" ", 1)
        if number == "1" and story:
            yield " ".join(story)
            story = []
        story.append(text.split("\t")[0])  # a question's text, without answer and supports
    if story:
        yield " ".join(story)


class GeneratedBabiCorpus:
    """`num_stories` generated stories of each of `tasks` (1, 2, 3, 6), each a document, as `BabiCorpus` reads files.

    The text is the training text of `data=babi_gen` with the same `seed` and sizes and
    `num_train` = `num_stories` × `questions_per_story` (Weston et al. 2015's tasks, from the simulator of
    `attnmem.data.babi_simulator`), so vectors learnt here never saw that run's validation or test stories.
    Validation is a seeded `val_fraction` of the stories (`split_seed`).
    """

    def __init__(
        self, *, tasks: Sequence[int] = TASKS, num_stories: int = 200, questions_per_story: int = 5,
        statements_per_question: int = 2, num_people: int = 4, num_locations: int = 6, num_objects: int = 3,
        val_fraction: float = 0.1, split_seed: int = 0, seed: int = 0,
    ) -> None:
        self.tasks = [int(t) for t in tasks]
        if not self.tasks or not set(self.tasks) <= set(TASKS) or len(set(self.tasks)) < len(self.tasks):
            raise ValueError(f"data.source.tasks must be distinct tasks of {list(TASKS)}, got {self.tasks}")
        limits = {"num_stories": (num_stories, 1, None), "questions_per_story": (questions_per_story, 1, None),
                  "statements_per_question": (statements_per_question, 1, None),
                  "num_people": (num_people, 1, len(NAMES)), "num_locations": (num_locations, 2, len(LOCATIONS)),
                  "num_objects": (num_objects, 1, len(OBJECTS))}
        for name, (value, low, high) in limits.items():
            if value < low or (high is not None and value > high):
                raise ValueError(f"data.source.{name} must be in [{low}, {high or 'inf'}], got {value}")
        if not 0 < val_fraction < 1:
            raise ValueError(f"data.source.val_fraction must be in (0, 1), got {val_fraction}")
        self.num_stories, self.val_fraction, self.split_seed, self.seed = num_stories, val_fraction, split_seed, seed
        self.story_options = {"questions_per_story": questions_per_story,
                              "statements_per_question": statements_per_question, "people": num_people,
                              "locations": num_locations, "objects": num_objects}
        self.where = f"data.source.num_stories={num_stories}"
        self.data_files: list[Path] = []  # nothing is read: the manifest hashes no file
        self._stories: list[str] | None = None

    def prepare_data(self) -> None:
        """Nothing to fetch: the stories are generated when first read."""

    def all_documents(self) -> list[str]:
        """Every story of every task, task by task, generated once (bAbI text: the "train" split of `babi_gen`)."""
        if self._stories is None:
            questions = self.num_stories * self.story_options["questions_per_story"]
            self._stories = [document for task in self.tasks for document in story_documents(
                generate_babi(task, questions, self.seed, "train", **self.story_options))]
        return self._stories

    def documents(self, split: str) -> Iterator[str]:
        """The stories of `split`."""
        return held_out(self.all_documents(), split, self.val_fraction, self.split_seed)
