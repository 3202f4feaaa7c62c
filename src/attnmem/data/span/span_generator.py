"""Generated span QA: facts about made-up entities among distractors; the answer is a span of the context.

Each context states a few attributes (city, job, colour, pet, birth year, food) of a few made-up
entities, in shuffled order, with unrelated filler sentences; every entity has the asked attribute,
so a model must match both the entity and the attribute. Answers are one to three words. The
questions go through the same tokeniser, alignment and batching as SQuAD (`SpanDataModule`).
"""

from __future__ import annotations

import random
from collections.abc import Collection

from attnmem.core.glove import Vectors
from attnmem.data.span.tensors import SpanRecord

SYLLABLES = (
    "ka",
    "lo",
    "ri",
    "zen",
    "mor",
    "vi",
    "tah",
    "quo",
    "bel",
    "dra",
    "sul",
    "fen",
    "gor",
    "pim",
    "xa",
    "nu",
    "tor",
    "esh",
    "wim",
    "ul",
)
# attribute -> (fact templates, question templates, values)
ATTRIBUTES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "city": (
        ("{e} lives in {v}.", "{e} has a house in {v}."),
        ("Where does {e} live?", "In which town is {e}'s house?"),
        ("Port Vell", "Amberton", "Lisk", "North Haven", "Dunmore", "Caldera", "Oskby", "Fairmont on Sea"),
    ),
    "job": (
        ("{e} works as a {v}.", "{e} is employed as a {v}."),
        ("What is {e}'s job?", "What does {e} work as?"),
        ("baker", "pilot", "marine biologist", "tailor", "night guard", "chemist", "farmer", "locksmith"),
    ),
    "colour": (
        ("{e}'s favourite colour is {v}.", "{e} likes the colour {v} best."),
        ("What is {e}'s favourite colour?", "Which colour does {e} like best?"),
        ("red", "dark green", "teal", "amber", "violet", "pale blue", "crimson", "ochre"),
    ),
    "pet": (
        ("{e} owns a {v}.", "{e} keeps a {v} at home."),
        ("What pet does {e} have?", "Which animal does {e} keep?"),
        ("cat", "parrot", "golden retriever", "ferret", "tortoise", "goldfish", "rabbit", "hedgehog"),
    ),
    "year": (
        ("{e} was born in {v}.", "{e}'s birth year is {v}."),
        ("When was {e} born?", "In which year was {e} born?"),
        tuple(str(y) for y in range(1950, 2000, 3)),
    ),
    "food": (
        ("{e} loves eating {v}.", "{e}'s favourite dish is {v}."),
        ("What food does {e} love?", "What is {e}'s favourite dish?"),
        ("noodles", "apple pie", "sushi", "lentil soup", "tacos", "dumplings", "cheese", "figs"),
    ),
}
FILLERS = (
    "The weather was mild that year.",
    "Nobody remembers the old bridge.",
    "The market opens at dawn.",
    "A storm passed over the hills.",
    "The library was closed for a week.",
    "Trains were late again.",
)


def entity_names(count: int) -> list[str]:
    """`count` distinct made-up names, the same for every split (fixed seed), so test entities are known words."""
    rng = random.Random("span_gen/names")
    names: set[str] = set()
    while len(names) < count:
        names.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize())
    return sorted(names)


def generate_record(
    rng: random.Random, names: list[str], qid: str, *, entities: int, facts_per_entity: int, fillers: int
) -> SpanRecord:
    """One context of facts and fillers, a question about one attribute of one entity, its answer span."""
    chosen = rng.sample(names, entities)
    asked = rng.choice(sorted(ATTRIBUTES))
    others = [a for a in sorted(ATTRIBUTES) if a != asked]
    values = rng.sample(ATTRIBUTES[asked][2], entities)  # a different value for each entity: one right span
    sentences: list[tuple[str, str | None]] = []  # (sentence, the answer it holds or None)
    for k, entity in enumerate(chosen):
        for attribute in [asked, *rng.sample(others, facts_per_entity - 1)]:
            templates, _, pool = ATTRIBUTES[attribute]
            value = values[k] if attribute == asked else rng.choice(pool)
            answer = value if k == 0 and attribute == asked else None
            sentences.append((rng.choice(templates).format(e=entity, v=value), answer))
    sentences += [(s, None) for s in rng.sample(FILLERS, fillers)]
    rng.shuffle(sentences)
    context, start = "", -1
    for sentence, answer in sentences:
        if answer is not None:
            start = len(context) + (len(context) > 0) + sentence.index(answer, len(chosen[0]))
        context = f"{context} {sentence}" if context else sentence
    question = rng.choice(ATTRIBUTES[asked][1]).format(e=chosen[0])
    return SpanRecord(qid, context, question, ((values[0], start),))


class SpanGenerator:
    """Generated span QA as a span source (`data.source`): train, val and test all generated from `seed`."""

    def __init__(
        self,
        *,
        num_train: int = 4000,
        num_val: int = 500,
        num_test: int = 1000,
        num_entities: int = 50,
        entities_per_context: int = 3,
        facts_per_entity: int = 3,
        fillers: int = 2,
        seed: int = 0,
    ) -> None:
        limits = {
            "num_train": (num_train, 1, None),
            "num_val": (num_val, 1, None),
            "num_test": (num_test, 1, None),
            "entities_per_context": (entities_per_context, 1, min(num_entities, 8)),
            "num_entities": (num_entities, entities_per_context, 2000),
            "facts_per_entity": (facts_per_entity, 1, len(ATTRIBUTES)),
            "fillers": (fillers, 0, len(FILLERS)),
        }
        for name, (value, low, high) in limits.items():
            if value < low or (high is not None and value > high):
                raise ValueError(f"data.source.{name} must be in [{low}, {high or 'inf'}], got {value}")
        self.sizes = {"train": num_train, "val": num_val, "test": num_test}
        self.options = {"entities": entities_per_context, "facts_per_entity": facts_per_entity, "fillers": fillers}
        self.num_entities, self.seed = num_entities, seed
        self.data_files: list = []  # nothing is read: the manifest has no data file to hash

    def prepare_data(self) -> None:
        """Nothing to check: the questions are generated."""

    def records(self, split: str) -> list[SpanRecord]:
        """The split's generated questions, the same for the same seed and sizes."""
        rng = random.Random(f"span_gen/{self.seed}/{split}")  # str seeds hash with sha512: stable across runs
        names = entity_names(self.num_entities)
        return [generate_record(rng, names, f"{split}-{i}", **self.options) for i in range(self.sizes[split])]

    def splits(self) -> dict[str, list[SpanRecord]]:
        """The generated questions of train, val and test."""
        return {split: self.records(split) for split in self.sizes}

    def vectors(self, words: Collection[str]) -> Vectors | None:
        """None: generated words have no pretrained vectors."""
        return None
