"""The real bAbI v1.2 files (Weston et al. 2015, arXiv:1502.05698) as a qa source: reader, split and cache.

`BabiFiles` reads `qa{N}_*_{train,test}.txt` from `data_dir` (downloading them when asked, `data/catalog.py`),
splits validation off the training stories and caches the tensors keyed by the files' sha256 (`babi_cache`,
in attnmem's cache folder: nothing is ever written beside the data).
"""

from __future__ import annotations

import io
import logging
import random
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import ClassVar

from attnmem.core.errors import UserError
from attnmem.core.glove import Vectors, read_vectors
from attnmem.core.text import read_utf8
from attnmem.data.catalog import fetch_for, fetch_hint
from attnmem.data.qa.babi_cache import load_cached, save_cached, tensor_path
from attnmem.data.qa.babi_download import FOLDERS
from attnmem.data.qa.babi_text import parse_babi
from attnmem.data.qa.tensors import Example, QAData

__all__ = ["ALL_TASKS", "BabiFiles", "find_task_files", "split_stories"]

log = logging.getLogger(__name__)

ALL_TASKS = list(range(1, 21))


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


def _read(path: Path, task: int) -> list[Example]:
    """Parse one bAbI file: UTF-8 text with at least one question, or one line naming the file and where."""
    text = read_utf8(path, "bAbI files")
    if not text.strip():
        raise UserError(f"{path}: the file is empty (a bAbI file holds stories of 'ID text' lines and questions)")
    examples = parse_babi(io.StringIO(text, newline=None), str(path), task)
    if not examples:
        raise UserError(f"{path}: no question in the file (a question line is "
                        "'ID question?<TAB>answer<TAB>supporting ids')")
    return examples


class BabiFiles:
    """The 20 bAbI v1.2 tasks read from `data_dir` (`en/` or `en-10k/`).

    Validation is a seeded `val_fraction` of each task's training stories (equal stories kept on one side);
    test is the `*_test.txt` files when every task has one. The vocabularies come from the training files
    (validation stories included, so validation has no unknown answer; test words unseen there are <unk>).
    With `cache`, the tensors are saved under `cache_dir` (null: `$ATTNMEM_CACHE`, else `$XDG_CACHE_HOME/attnmem`,
    else `~/.cache/attnmem`) in `babi/`, keyed by the files' sha256 and the options that shape them;
    `data_dir` is only read. `embeddings` names an optional GloVe-format file of word vectors the model starts from.
    """

    supported_tasks: ClassVar[list[int]] = ALL_TASKS

    def __init__(self, *, data_dir: str, val_fraction: float = 0.1, split_seed: int = 0, cache: bool = True,
                 cache_dir: str | None = None, download: bool = False, embeddings: str | None = None) -> None:
        if not 0 < val_fraction < 1:
            raise ValueError(f"data.source.val_fraction must be in (0, 1), got {val_fraction}")
        self.data_dir = Path(data_dir).expanduser()
        self.val_fraction, self.split_seed, self.cache, self.download = val_fraction, split_seed, cache, download
        self.cache_dir, self.embeddings = cache_dir, Path(embeddings) if embeddings else None
        self.data_files: list[Path] = []

    def prepare(self) -> None:
        """Download the files if asked and missing (once, on the first process); else say how to get them."""
        if self.data_dir.is_dir() and any(self.data_dir.glob("qa*_train.txt")):
            return
        where = f"data.source.data_dir={self.data_dir}"
        if self.data_dir.exists() and not self.data_dir.is_dir():
            raise UserError(f"{where} is a file, not a folder: point it at the folder of the qaN_*_train.txt files")
        if not self.download:
            hint = fetch_hint(self.data_dir) or (": point it at an en/ or en-10k/ folder of bAbI v1.2 (`attnmem-data "
                                                 "fetch babi` places them in the data folder's babi/)")
            raise UserError(f"{where}: no bAbI files (qaN_*_train.txt){hint}")
        if not fetch_for(self.data_dir):
            raise UserError(f"data.source.download=true extracts the archive's folders {', '.join(FOLDERS)}, so "
                            f"data.source.data_dir must end in one of them, got {self.data_dir}")

    def load(self, tasks: list[int], memory_size: int, *, fit_memory: bool = False) -> QAData:
        """The tasks' train, validation and (when every task has a test file) test tensors."""
        self.prepare()
        train, test = find_task_files(self.data_dir, tasks)
        if test and len(test) < len(train):
            log.warning("no test file for task(s) %s in %s: skipping test",
                        ", ".join(str(t) for t in tasks if t not in test), self.data_dir)
            test = {}
        self.data_files = [*train.values(), *test.values(), *([self.embeddings] if self.embeddings else [])]
        if not self.cache:
            return self._build(train, test, memory_size, fit_memory)
        return self._cached(train, test, tasks, memory_size, fit_memory)

    def vectors(self, words: Collection[str]) -> Vectors | None:
        """The GloVe-format vectors of those `words` that the `embeddings` file has, when it names one."""
        return None if self.embeddings is None else read_vectors(self.embeddings, words)

    def _cached(self, train: dict[int, Path], test: dict[int, Path], tasks: list[int], memory_size: int,
                fit_memory: bool) -> QAData:
        """Load the tensors from the cache, or build and save them there."""
        options = {"tasks": tasks, "memory_size": memory_size, "val_fraction": self.val_fraction,
                   "split_seed": self.split_seed}
        if fit_memory:  # absent when off, so the caches of earlier runs stay valid
            options["fit_memory"] = True
        path = tensor_path([*train.values(), *test.values()], options, self.cache_dir)  # not the embeddings
        cached = load_cached(path) if path is not None else None
        if cached is not None:
            return cached
        qa = self._build(train, test, memory_size, fit_memory)
        if path is not None:
            save_cached(qa, path)
        return qa

    def _build(self, train: dict[int, Path], test: dict[int, Path], memory_size: int, fit_memory: bool) -> QAData:
        """Parse the files, split off validation, build the vocabularies and tensors."""
        examples = [ex for task, path in train.items() for ex in _read(path, task)]
        train_ids, val_ids = split_stories(examples, self.val_fraction, self.split_seed)
        splits = {"train": [examples[i] for i in train_ids], "val": [examples[i] for i in val_ids]}
        self._check_split(splits, len({(ex.task, ex.story_id) for ex in examples}))
        tests = [ex for task, path in test.items() for ex in _read(path, task)]
        if tests:
            splits["test"] = tests
        return QAData.from_examples(splits, examples, memory_size=memory_size, fit_memory=fit_memory)

    def _check_split(self, splits: dict[str, list[Example]], stories: int) -> None:
        """One line when the training stories leave no training or no validation question."""
        where = f"{self.data_dir} ({stories} training stor{'y' if stories == 1 else 'ies'})"
        if not splits["train"]:
            raise UserError(f"{where}: no training question left, data.source.val_fraction={self.val_fraction} "
                            "took every story (equal stories stay on one side): lower it or add other stories")
        if not splits["val"]:
            raise UserError(f"{where}: no validation question, one story per task cannot be split: "
                            "add stories to the training files")
