"""The real bAbI v1.2 files (Weston et al. 2015, arXiv:1502.05698) as a qa source: reader, split and cache.

`BabiFiles` reads `qa{N}_*_{train,test}.txt` from `data_dir` (downloading them when asked, `babi_download`),
splits validation off the training stories and caches the tensors keyed by the files' sha256.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import random
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import torch

from attnmem.core.atomic import replacing
from attnmem.core.errors import UserError
from attnmem.data.qa.babi_download import ensure_babi
from attnmem.data.qa.babi_text import parse_babi
from attnmem.data.qa.tensors import Example, QAData

__all__ = ["ALL_TASKS", "BabiFiles", "find_task_files", "split_stories"]

log = logging.getLogger(__name__)

ALL_TASKS = list(range(1, 21))
_CACHE_VERSION = 2  # bump when the tensors or vocabularies change shape or content


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


def _save(qa: QAData, path: Path) -> None:
    """Write the tensors to the cache; a full disk costs the cache, not the run."""
    try:
        with replacing(path) as part:  # several ranks may write at once: each its own temp name
            torch.save({"vocab": qa.vocab, "answers": qa.answers, "splits": qa.splits}, part)
    except OSError as error:
        log.warning("could not write the cache %s (%s)", path, error)


def _read(path: Path, task: int) -> list[Example]:
    """Parse one bAbI file."""
    with open(path, encoding="utf-8") as lines:
        return parse_babi(lines, str(path), task)


class BabiFiles:
    """The 20 bAbI v1.2 tasks read from `data_dir` (`en/` or `en-10k/`).

    Validation is a seeded `val_fraction` of each task's training stories (equal stories kept on one side);
    test is the `*_test.txt` files when every task has one. The vocabularies come from the training files
    (validation stories included, so validation has no unknown answer; test words unseen there are <unk>).
    With `cache`, the tensors are saved in `data_dir/.attnmem_cache/`, or in `~/.cache/attnmem/babi/` when
    `data_dir` is read-only, keyed by the files' sha256 and the options that shape them.
    """

    supported_tasks: ClassVar[list[int]] = ALL_TASKS

    def __init__(self, *, data_dir: str, val_fraction: float = 0.1, split_seed: int = 0, cache: bool = True,
                 download: bool = False) -> None:
        if not 0 < val_fraction < 1:
            raise ValueError(f"data.source.val_fraction must be in (0, 1), got {val_fraction}")
        self.data_dir = Path(data_dir).expanduser()
        self.val_fraction, self.split_seed, self.cache, self.download = val_fraction, split_seed, cache, download
        self.data_files: list[Path] = []

    def prepare(self) -> None:
        """Download the files if asked and missing (once, on the first process)."""
        ensure_babi(self.data_dir, self.download)

    def load(self, tasks: list[int], memory_size: int) -> QAData:
        """The tasks' train, validation and (when every task has a test file) test tensors."""
        ensure_babi(self.data_dir, self.download)
        train, test = find_task_files(self.data_dir, tasks)
        if test and len(test) < len(train):
            log.warning("no test file for task(s) %s in %s: skipping test",
                        ", ".join(str(t) for t in tasks if t not in test), self.data_dir)
            test = {}
        self.data_files = [*train.values(), *test.values()]
        if not self.cache:
            return self._build(train, test, memory_size)
        return self._cached(train, test, tasks, memory_size)

    def _cached(self, train: dict[int, Path], test: dict[int, Path], tasks: list[int], memory_size: int) -> QAData:
        """Load the tensors from the cache, or build and save them there."""
        key = json.dumps({"version": _CACHE_VERSION,
                          "files": [[p.name, hashlib.sha256(p.read_bytes()).hexdigest()] for p in self.data_files],
                          "tasks": tasks, "memory_size": memory_size,
                          "val_fraction": self.val_fraction, "split_seed": self.split_seed})
        folder = _cache_dir(self.data_dir)
        path = folder / f"babi-{hashlib.sha256(key.encode()).hexdigest()[:16]}.pt" if folder else None
        if path is not None and path.exists():
            try:
                return QAData(**torch.load(path, weights_only=True))
            # an unreadable cache is rebuilt, never fatal
            except (OSError, RuntimeError, EOFError, TypeError, pickle.UnpicklingError) as error:
                log.warning("ignoring unreadable cache %s (%s)", path, error)
        qa = self._build(train, test, memory_size)
        if path is not None:
            _save(qa, path)
        return qa

    def _build(self, train: dict[int, Path], test: dict[int, Path], memory_size: int) -> QAData:
        """Parse the files, split off validation, build the vocabularies and tensors."""
        examples = [ex for task, path in train.items() for ex in _read(path, task)]
        train_ids, val_ids = split_stories(examples, self.val_fraction, self.split_seed)
        splits = {"train": [examples[i] for i in train_ids], "val": [examples[i] for i in val_ids]}
        tests = [ex for task, path in test.items() for ex in _read(path, task)]
        if tests:
            splits["test"] = tests
        return QAData.from_examples(splits, examples, memory_size=memory_size)
