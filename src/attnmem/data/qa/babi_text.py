"""The bAbI v1.2 text format (Weston et al. 2015, arXiv:1502.05698): the tokeniser and the parser.

Both qa sources read through `parse_babi`: the files as they are, the generator's stories as text in the
same format, so the generator exercises the reader too.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

from attnmem.core.errors import UserError
from attnmem.data.qa.tensors import Example

_LINE = re.compile(r"(\d+) (.*)")
_WORD = re.compile(r"[^\s.,?!;:]+")  # punctuation only ends sentences in bAbI, so drop it
_EXPECTED = "expected 'ID text' or 'ID question?<TAB>answer<TAB>supporting ids'"
# bAbI's longest sentences have about 15 words; a sentence sets the width of every memory slot of its split, so a
# damaged line of a million words would ask for terabytes
MAX_WORDS = 200


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
            raise UserError(f"{source}:{lineno}: {_EXPECTED}, got {_shown(line)}")
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
            story.append(_statement(text, f"{source}:{lineno}"))
            continue
        query, answer, supports = _parse_question(text, slot, f"{source}:{lineno}")
        pending.append({"story": tuple(story), "query": query, "answer": answer, "supports": supports})
    close_story()
    return examples


def _statement(text: str, where: str) -> tuple[str, ...]:
    """A statement line's words; a question mark means a question whose tabs were lost (its answer with them)."""
    if "?" in text:
        raise UserError(f"{where}: a question without a TAB-separated answer (tabs turned into spaces?): "
                        f"{_EXPECTED}, got {_shown(text)}")
    return _words(text, where)


def _words(text: str, where: str) -> tuple[str, ...]:
    """The words of a sentence of at most `MAX_WORDS`."""
    words = tokenize(text)
    if len(words) > MAX_WORDS:
        raise UserError(f"{where}: a sentence of {len(words):,} words, more than the {MAX_WORDS} a bAbI line holds "
                        f"(is the line damaged, or the file not bAbI text?): {_shown(text)}")
    return words


def _shown(text: str) -> str:
    """`text` quoted, cut to 80 characters."""
    return repr(text) if len(text) <= 80 else f"{text[:77]!r}... ({len(text):,} characters)"


def _parse_question(text: str, slot: dict[int, int], where: str) -> tuple[tuple[str, ...], str, tuple[int, ...]]:
    """Split a question line's text into query words, answer and supporting statement indices."""
    fields = text.split("\t")
    if len(fields) not in (2, 3) or not fields[0].strip() or not fields[1].strip():
        raise UserError(f"{where}: {_EXPECTED}, got {_shown(text)}")
    if len(fields[1].split()) > 1:  # a tab between the answer and the supporting ids became a space
        raise UserError(f"{where}: the answer {fields[1].strip()!r} holds a space (a TAB turned into one?): "
                        f"{_EXPECTED}, got {_shown(text)}")
    supports = []
    for token in (fields[2] if len(fields) == 3 else "").split():
        if not token.isdigit() or int(token) not in slot:
            raise UserError(f"{where}: supporting id {token!r} is not an earlier statement of this story")
        supports.append(slot[int(token)])
    return _words(fields[0], where), fields[1].strip().lower(), tuple(supports)
