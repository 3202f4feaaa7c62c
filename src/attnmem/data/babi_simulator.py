"""The seeded bAbI story simulator (after Weston et al. 2015, arXiv:1502.05698): tasks 1, 2, 3 and 6 as bAbI text.

A world moves people between locations and has them pick up and drop objects; questions are asked about its
state. The stories are written in the official v1.2 format. Shared by the qa family's `BabiGenerator` and the
embeddings family's `GeneratedBabiCorpus`; it is not a data source.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from itertools import count

TASKS = (1, 2, 3, 6)
NAMES = ("Mary", "John", "Sandra", "Daniel", "Bill", "Fred", "Julie", "Jeff")
LOCATIONS = ("bathroom", "hallway", "garden", "office", "bedroom", "kitchen", "cinema", "park", "school")
OBJECTS = ("football", "apple", "milk", "book", "key", "box")
MOVES = ("moved to", "went to", "journeyed to", "travelled to", "went back to")
TAKES = ("got", "took", "grabbed", "picked up")
DROPS = ("dropped", "left", "discarded", "put down")

Question = tuple[str, str, tuple[int, ...]]  # question text, answer, supporting line IDs


class World:
    """Where each person is and where each object has been, with the line IDs of the facts that say so."""

    def __init__(self, people: Sequence[str], locations: Sequence[str], objects: Sequence[str]) -> None:
        self.people, self.locations, self.objects = people, locations, objects
        self.at: dict[str, tuple[str, int]] = {}  # person -> (location, line of the move there)
        self.holder: dict[str, tuple[str, int]] = {}  # object -> (person, line of the take)
        # object -> the locations it has been in, each with the lines that place it there
        self.trail: dict[str, list[tuple[str, tuple[int, ...]]]] = {o: [] for o in objects}

    def act(self, rng: random.Random, line: int, *, objects: bool) -> str:
        """Take one random action as fact number `line` and return its sentence."""
        choice = rng.random()  # with objects: drop 15%, take 25% when possible, else move (as in bAbI, moves dominate)
        takeable = [(p, o) for p in self.at for o in self.objects if self._can_take(p, o)]
        if objects and self.holder and choice < 0.15:
            obj = rng.choice(sorted(self.holder))
            return self.drop(obj, line, rng.choice(DROPS), there=rng.random() < 0.3)
        if objects and takeable and choice < 0.4:
            person, obj = rng.choice(takeable)
            return self.take(person, obj, line, rng.choice(TAKES))
        person = rng.choice(self.people)
        here = self.at.get(person, (None, 0))[0]
        return self.move(person, rng.choice([loc for loc in self.locations if loc != here]), line, rng.choice(MOVES))

    def _can_take(self, person: str, obj: str) -> bool:
        """A free object can be taken where it lies, or anywhere while nobody has said where it is."""
        trail = self.trail[obj]
        return obj not in self.holder and (not trail or trail[-1][0] == self.at[person][0])

    def move(self, person: str, location: str, line: int, verb: str) -> str:
        """Move a person, and what they carry."""
        self.at[person] = (location, line)
        for obj, (holder, took) in self.holder.items():
            if holder == person:
                self.trail[obj].append((location, (took, line)))
        return f"{person} {verb} the {location}."

    def take(self, person: str, obj: str, line: int, verb: str) -> str:
        """A person picks up an object where they are."""
        location, moved = self.at[person]
        self.holder[obj] = (person, line)
        if self.trail[obj] and self.trail[obj][-1][0] == location:
            self.trail[obj][-1] = (location, (moved, line))
        else:
            self.trail[obj].append((location, (moved, line)))
        return f"{person} {verb} the {obj} there."

    def drop(self, obj: str, line: int, verb: str, *, there: bool) -> str:
        """The holder puts an object down where they are."""
        person, _ = self.holder.pop(obj)
        location, moved = self.at[person]
        self.trail[obj][-1] = (location, (moved, line))
        return f"{person} {verb} the {obj}{' there' if there else ''}."


def ask_where_person(world: World, rng: random.Random) -> Question | None:
    """Task 1, single supporting fact: where is a person now."""
    if not world.at:
        return None
    person = rng.choice(sorted(world.at))
    location, line = world.at[person]
    return f"Where is {person}?", location, (line,)


def ask_where_object(world: World, rng: random.Random) -> Question | None:
    """Task 2, two supporting facts: where is an object now (who took it, where they went)."""
    placed = sorted(o for o, trail in world.trail.items() if trail)
    if not placed:
        return None
    obj = rng.choice(placed)
    location, lines = world.trail[obj][-1]
    return f"Where is the {obj}?", location, tuple(sorted(set(lines)))


def ask_where_before(world: World, rng: random.Random) -> Question | None:
    """Task 3, three supporting facts: where was an object before its current place (asked when unambiguous)."""
    moved = sorted(o for o, t in world.trail.items() if len(t) >= 2 and [loc for loc, _ in t].count(t[-1][0]) == 1)
    if not moved:
        return None
    obj = rng.choice(moved)
    (before, lines_before), (now, lines_now) = world.trail[obj][-2:]
    return f"Where was the {obj} before the {now}?", before, tuple(sorted({*lines_before, *lines_now}))


def ask_yes_no(world: World, rng: random.Random) -> Question | None:
    """Task 6, yes/no questions: is a person in a place (half of the time they are)."""
    if not world.at:
        return None
    person = rng.choice(sorted(world.at))
    location, line = world.at[person]
    asked = location if rng.random() < 0.5 else rng.choice([loc for loc in world.locations if loc != location])
    return f"Is {person} in the {asked}?", "yes" if asked == location else "no", (line,)


ASK: dict[int, Callable[[World, random.Random], Question | None]] = {
    1: ask_where_person, 2: ask_where_object, 3: ask_where_before, 6: ask_yes_no,
}


def generate_story(rng: random.Random, task: int, questions: int, *, statements_per_question: int,
                   people: int, locations: int, objects: int) -> list[str]:
    """One story in bAbI text: at least `statements_per_question` facts before each question, more until answerable."""
    world = World(NAMES[:people], LOCATIONS[:locations], OBJECTS[:objects])
    lines: list[str] = []
    for _ in range(questions):
        for k in count():
            question = ASK[task](world, rng) if k >= statements_per_question else None
            if question is not None:
                break
            if k > 200:  # cannot happen with >= 2 locations; a loud stop beats an endless loop
                raise RuntimeError(f"babi_gen task {task}: no answerable question after {k} facts")
            lines.append(f"{len(lines) + 1} {world.act(rng, len(lines) + 1, objects=task in (2, 3))}")
        assert question is not None  # the endless loop ends only at a question
        text, answer, supports = question
        lines.append(f"{len(lines) + 1} {text}\t{answer}\t{' '.join(map(str, supports))}")
    return lines


def generate_babi(
    task: int, num_questions: int, seed: int, split: str, *, questions_per_story: int = 5,
    statements_per_question: int = 2, people: int = 4, locations: int = 6, objects: int = 3,
) -> list[str]:
    """`num_questions` questions of a task as bAbI text, the same for the same (task, seed, split, sizes)."""
    rng = random.Random(f"babi_gen/{seed}/{task}/{split}")  # str seeds hash with sha512: stable across runs
    sizes = {"statements_per_question": statements_per_question, "people": people, "locations": locations,
             "objects": objects}
    lines: list[str] = []
    for first in range(0, num_questions, questions_per_story):
        lines += generate_story(rng, task, min(questions_per_story, num_questions - first), **sizes)
    return lines
