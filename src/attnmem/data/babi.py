"""bAbI question answering (Weston et al. 2015, arXiv:1502.05698): the v1.2 text format and the file reader.

`parse_babi` turns text in the official format into `Example`s; the generator (`data=babi_gen`) sends its
text through it too. Vocabularies, tensors and loaders live in `babi_tensors`, the download in `babi_download`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import random
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import lightning as L
import torch
from torch import Tensor
from torch.utils.data import DataLoader

from attnmem.core.dims import QADims
from attnmem.core.errors import UserError
from attnmem.data.babi_download import ensure_babi
from attnmem.data.babi_tensors import Example, QAData, build_answers, build_vocab, vectorize

__all__ = ["ALL_TASKS", "BabiDataModule", "Example", "find_task_files", "parse_babi", "parse_tasks", "split_stories"]

log = logging.getLogger(__name__)

ALL_TASKS = list(range(1, 21))
_CACHE_VERSION = 2  # bump when the tensors or vocabularies change shape or content
_LINE = re.compile(r"(\d+) (.*)")
_WORD = re.compile(r"[^\s.,?!;:]+")  # punctuation only ends sentences in bAbI, so drop it
_EXPECTED = "expected 'ID text' or 'ID question?<TAB>answer<TAB>supporting ids'"


def tokenize(text: str) -> tuple[str, ...]:
    """Lower-case words of a sentence, punctuation dropped."""
    return tuple(_WORD.findall(text.lower()))


def parse_babi(lines: Iterable[str], source: str, task: int = 0) -> list[Example]:
    """Parse bAbI v1.2 text (`ID text` / `ID question?<TAB>answer<TAB>supporting ids`); errors name `source:line`."""
    examples: list[Example] = []
    story: list[tuple[str, ...]] = []
    slot: dict[int, int] = {}  # line ID -> index in `story` (question lines take IDs but no slot)
    block: list[str] = []  # this story's text, hashed into its key when the story ends
    pending: list[dict[str, Any]] = []
    prev_id, story_id = 0, 0

    def close_story() -> None:
        key = hashlib.blake2b("\n".join(block).encode(), digest_size=8).hexdigest()
        examples.extend(Example(**p, task=task, story_id=story_id, story_key=key) for p in pending)

    for lineno, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        match = _LINE.fullmatch(line)
        if match is None:
            raise UserError(f"{source}:{lineno}: {_EXPECTED}, got {line!r}")
        line_id, text = int(match[1]), match[2]
        if line_id == 1:
            close_story()
            story_id += bool(block)  # the first story is number 0
            story, slot, block, pending = [], {}, [], []
        elif line_id != prev_id + 1:
            raise UserError(f"{source}:{lineno}: expected line ID 1 (a new story) or {prev_id + 1}, got {line_id}")
        prev_id = line_id
        block.append(text)
        if "\t" not in text:
            slot[line_id] = len(story)
            story.append(tokenize(text))
            continue
        query, answer, supports = _parse_question(text, slot, f"{source}:{lineno}")
        pending.append({"story": tuple(story), "query": query, "answer": answer, "supports": supports})
    close_story()
    return examples


def _parse_question(text: str, slot: dict[int, int], where: str) -> tuple[tuple[str, ...], str, tuple[int, ...]]:
    """Split a question line's text into query words, answer and supporting statement indices."""
    fields = text.split("\t")
    if len(fields) not in (2, 3) or not fields[0].strip() or not fields[1].strip():
        raise UserError(f"{where}: {_EXPECTED}, got {text!r}")
    supports = []
    for token in (fields[2] if len(fields) == 3 else "").split():
        if not token.isdigit() or int(token) not in slot:
            raise UserError(f"{where}: supporting id {token!r} is not an earlier statement of this story")
        supports.append(slot[int(token)])
    return tokenize(fields[0]), fields[1].strip().lower(), tuple(supports)


def split_stories(examples: Sequence[Example], val_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Train and validation example indices: a seeded `val_fraction` of each task's stories, equal stories together."""
    groups: dict[tuple[int, str], list[int]] = {}  # (task, story text) -> example indices, in file order
    stories: dict[tuple[int, str], set[int]] = {}  # the stories that share that text
    for i, ex in enumerate(examples):
        groups.setdefault((ex.task, ex.story_key), []).append(i)
        stories.setdefault((ex.task, ex.story_key), set()).add(ex.story_id)
    val: list[int] = []
    for task in sorted({t for t, _ in groups}):
        keys = [k for k in groups if k[0] == task]
        random.Random(f"{seed}/{task}").shuffle(keys)  # seeded per task: adding a task leaves the others' split
        total = sum(len(stories[k]) for k in keys)
        target = max(1, round(val_fraction * total)) if total > 1 else 0
        taken = 0
        for key in keys:
            if taken >= target:
                break
            val.extend(groups[key])
            taken += len(stories[key])
    val_set = set(val)
    return [i for i in range(len(examples)) if i not in val_set], sorted(val)


def parse_tasks(tasks: Sequence[int] | int | str, allowed: Sequence[int]) -> list[int]:
    """Task numbers from the `tasks` option (a list, one number, or "all"), checked against `allowed`."""
    if isinstance(tasks, str) and tasks.strip().lower() == "all":
        return list(allowed)
    error = ValueError(f"data.tasks must be 'all' or numbers among {list(allowed)}, got {tasks!r}")
    try:
        numbers = [int(t) for t in ([tasks] if isinstance(tasks, (int, str)) else tasks)]
    except (TypeError, ValueError):
        raise error from None
    if not numbers or any(t not in allowed for t in numbers):
        raise error
    return sorted(set(numbers))


def find_task_files(data_dir: Path, tasks: list[int]) -> tuple[dict[int, Path], dict[int, Path]]:
    """The train and test file of each task (`qa{N}_*_{train,test}.txt`); one error lists every missing train file."""
    found: dict[str, dict[int, Path]] = {"train": {}, "test": {}}
    for split, files in found.items():
        for task in tasks:
            matches = sorted(data_dir.glob(f"qa{task}_*_{split}.txt"))
            if len(matches) > 1:
                raise UserError(f"{data_dir}: several files for task {task}: {', '.join(p.name for p in matches)}")
            if matches:
                files[task] = matches[0]
    missing = [t for t in tasks if t not in found["train"]]
    if missing:
        raise UserError(f"{data_dir}: no training file for task(s) {', '.join(map(str, missing))} "
                        f"(expected {', '.join(f'qa{t}_*_train.txt' for t in missing)})")
    return found["train"], found["test"]


def _sha256(path: Path) -> str:
    """sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cache_dir(data_dir: Path) -> Path | None:
    """`data_dir/.attnmem_cache` if writable, else `~/.cache/attnmem/babi`, else None (no cache)."""
    for folder in (data_dir / ".attnmem_cache", Path.home() / ".cache" / "attnmem" / "babi"):
        # Mode bits without any write permission mark a folder read-only even for root, who could write anyway.
        if folder.parent.exists() and not folder.parent.stat().st_mode & 0o222:
            continue
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe = folder / f".probe-{os.getpid()}"
            probe.touch()
            probe.unlink()
            return folder
        except OSError:
            continue
    return None


class BabiDataModule(L.LightningDataModule):
    """The 20 bAbI v1.2 tasks (Weston et al. 2015) read from `data_dir` (`en/` or `en-10k/`), trained jointly.

    Validation is a seeded `val_fraction` of each task's training stories (equal stories kept on one side);
    test is the `*_test.txt` files when every task has one. The vocabularies come from the training files
    (validation stories included, so validation has no unknown answer; test words unseen there are <unk>).
    With `cache`, the tensors are saved in `data_dir/.attnmem_cache/`, or in `~/.cache/attnmem/babi/` when
    `data_dir` is read-only, keyed by the files' sha256 and the options that shape them.
    """

    family: ClassVar[str] = "qa"
    family_module: ClassVar[str] = "attnmem.tasks.qa.QATask"

    def __init__(self, *, data_dir: str, tasks: Sequence[int] | int | str = (1,), memory_size: int = 50,
                 batch_size: int = 32, val_fraction: float = 0.1, split_seed: int = 0, cache: bool = True,
                 download: bool = False, num_workers: int = 0) -> None:
        super().__init__()
        for name, value in (("memory_size", memory_size), ("batch_size", batch_size)):
            if value < 1:
                raise ValueError(f"data.{name} must be at least 1, got {value}")
        if not 0 < val_fraction < 1:
            raise ValueError(f"data.val_fraction must be in (0, 1), got {val_fraction}")
        if num_workers < 0:
            raise ValueError(f"data.num_workers must be >= 0, got {num_workers}")
        self.data_dir, self.tasks = Path(data_dir).expanduser(), parse_tasks(tasks, ALL_TASKS)
        self.memory_size, self.batch_size, self.num_workers = memory_size, batch_size, num_workers
        self.val_fraction, self.split_seed, self.cache, self.download = val_fraction, split_seed, cache, download
        self.data_files: list[Path] = []
        self._qa: QAData | None = None
        self._state: dict[str, Any] | None = None  # a checkpoint's vocabularies, applied once data is built

    def prepare_data(self) -> None:
        ensure_babi(self.data_dir, self.download)

    def setup(self, stage: str | None = None) -> None:
        if self._qa is not None:
            return
        ensure_babi(self.data_dir, self.download)
        train, test = find_task_files(self.data_dir, self.tasks)
        if test and len(test) < len(train):
            log.warning("no test file for task(s) %s in %s: skipping test",
                        ", ".join(str(t) for t in self.tasks if t not in test), self.data_dir)
            test = {}
        self.data_files = [*train.values(), *test.values()]
        self._qa = self._cached(train, test) if self.cache else self._build(train, test)
        if self._state is not None:
            self._qa = self._qa.adopt(self._state)

    def _cached(self, train: dict[int, Path], test: dict[int, Path]) -> QAData:
        """Load the tensors from the cache, or build and save them there."""
        key = json.dumps({"version": _CACHE_VERSION, "files": [[p.name, _sha256(p)] for p in self.data_files],
                          "tasks": self.tasks, "memory_size": self.memory_size,
                          "val_fraction": self.val_fraction, "split_seed": self.split_seed})
        folder = _cache_dir(self.data_dir)
        path = folder / f"babi-{hashlib.sha256(key.encode()).hexdigest()[:16]}.pt" if folder else None
        if path is not None and path.exists():
            try:
                return QAData(**torch.load(path, weights_only=True))
            # an unreadable cache is rebuilt, never fatal
            except (OSError, RuntimeError, EOFError, TypeError, pickle.UnpicklingError) as error:
                log.warning("ignoring unreadable cache %s (%s)", path, error)
        qa = self._build(train, test)
        if path is not None:
            part = path.with_name(f"{path.name}.{os.getpid()}.part")  # several ranks may write at once
            try:
                torch.save({"vocab": qa.vocab, "answers": qa.answers, "splits": qa.splits}, part)
                os.replace(part, path)
            except OSError as error:  # a full disk costs the cache, not the run
                log.warning("could not write the cache %s (%s)", path, error)
                part.unlink(missing_ok=True)
        return qa

    def _build(self, train: dict[int, Path], test: dict[int, Path]) -> QAData:
        """Parse the files, split off validation, build the vocabularies and tensors."""
        examples = [ex for task, path in train.items() for ex in _read(path, task)]
        tests = [ex for task, path in test.items() for ex in _read(path, task)]
        train_ids, val_ids = split_stories(examples, self.val_fraction, self.split_seed)
        every = [*examples, *tests]
        shape = {"memory_size": self.memory_size,
                 "sentence_len": max((len(s) for ex in every for s in ex.story), default=1) or 1,
                 "query_len": max((len(ex.query) for ex in every), default=1) or 1}
        vocab, answers = build_vocab(examples), build_answers(examples)
        splits = {"train": [examples[i] for i in train_ids], "val": [examples[i] for i in val_ids]}
        if tests:
            splits["test"] = tests
        return QAData(vocab, answers, {k: vectorize(v, vocab, answers, **shape) for k, v in splits.items()})

    @property
    def qa(self) -> QAData:
        """The built data; `setup()` must have run."""
        if self._qa is None:
            raise RuntimeError("call setup() before using the datamodule's data")
        return self._qa

    @property
    def dims(self) -> QADims:
        return self.qa.dims(self.tasks)

    @property
    def vocab(self) -> list[str]:
        return self.qa.vocab

    @property
    def answers(self) -> list[str]:
        return self.qa.answers

    @property
    def has_test(self) -> bool:
        return "test" in self.qa.splits

    def words(self, ids: Tensor) -> str:
        """1-D word ids as space-separated words, pads dropped."""
        return self.qa.words(ids)

    def train_dataloader(self) -> DataLoader:
        return self.qa.loader("train", batch_size=self.batch_size, shuffle=True, num_workers=self.num_workers)

    def val_dataloader(self) -> DataLoader:
        return self.qa.loader("val", batch_size=self.batch_size, shuffle=False, num_workers=self.num_workers)

    def test_dataloader(self) -> DataLoader | list:
        if not self.has_test:
            return []
        return self.qa.loader("test", batch_size=self.batch_size, shuffle=False, num_workers=self.num_workers)

    def state_dict(self) -> dict[str, Any]:
        return self.qa.state() if self._qa is not None else dict(self._state or {})

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._state = dict(state_dict)
        if self._qa is not None:
            self._qa = self._qa.adopt(self._state)


def _read(path: Path, task: int) -> list[Example]:
    """Parse one bAbI file."""
    with open(path, encoding="utf-8") as lines:
        return parse_babi(lines, str(path), task)
