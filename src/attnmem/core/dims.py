"""What a datamodule tells the model and the family module about its data (`dm.dims`): one dataclass per family.

A model constructor receives the fields whose names are among its parameters (`kwargs`); the family
module reads what it needs by attribute. Sizes that come from the data are never typed in a config.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import torch
from torch import Tensor


@dataclass(frozen=True)
class QADims:
    """A story of sentences and a question in, one answer class out (bAbI, generated bAbI)."""

    vocab_size: int
    num_answers: int
    memory_size: int  # S: sentences a story keeps
    sentence_len: int  # J: one length for statements and questions (as the MemN2N reference code)
    query_len: int
    answer_words: list[int]  # the word id of each answer class
    tasks: list[int]  # the bAbI task numbers trained jointly, for per-task metrics
    pad_id: int = 0
    embeddings: Tensor | None = None  # (V, D) pretrained word vectors in vocabulary order (data.source.embeddings)


@dataclass(frozen=True)
class SequenceDims:
    """Binary vectors in, binary vectors out (the NTM's algorithmic tasks)."""

    input_size: int
    output_size: int
    test_lengths: list[int] = field(default_factory=list)  # one extra test set per length


@dataclass(frozen=True)
class Seq2SeqDims:
    """A source token sequence in, a target token sequence out."""

    src_vocab_size: int
    tgt_vocab_size: int
    pad_id: int
    bos_id: int
    eos_id: int
    max_src_len: int
    max_tgt_len: int
    test_lengths: list[int] = field(default_factory=list)
    src_itos: list[str] | None = None  # id -> token, for BLEU and plots
    tgt_itos: list[str] | None = None
    bleu: bool = False  # whether evaluation reports BLEU (parallel text)


@dataclass(frozen=True)
class SpanDims:
    """A context and a question in, an answer span of the context out (SQuAD, generated span QA)."""

    vocab_size: int
    embeddings: Tensor | None = None  # (V, D) pretrained word vectors in vocabulary order, if given
    char_vocab_size: int = 0  # the ids of the batches' context_chars / question_chars; 0: none (data.word_len=0)


@dataclass(frozen=True)
class PatternsDims:
    """±1 patterns to store, probes to complete (Hopfield networks)."""

    size: int  # N: units per pattern
    num_patterns: int  # K
    partner_size: int = 0  # M: units of the partner y each pattern x is stored with (0: no partners)


@dataclass(frozen=True)
class GraphDims:
    """One graph's node features in, a class per node out (node classification)."""

    num_features: int  # F: features per node
    num_classes: int  # C
    num_nodes: int  # N
    classes: list[str] = field(default_factory=list)  # the name of each class, for plots


@dataclass(frozen=True)
class EmbeddingsDims:
    """Windows of a text corpus in, word vectors learned (NNLM, C&W, word2vec)."""

    vocab_size: int  # V, word id 0 is the padding between documents (no word)
    window: int  # w: a window is 2w+1 words, the centre at index w
    itos: list[str] = field(default_factory=list)  # id -> word, for export, neighbours and analogies


@dataclass(frozen=True)
class CaptionDims:
    """An image in, a caption (a token sequence) out (Show, Attend and Tell)."""

    vocab_size: int
    channels: int  # C of the images (B, C, H, W)
    height: int
    width: int
    pad_id: int
    bos_id: int
    eos_id: int
    max_caption_len: int  # the longest caption, in words
    test_lengths: list[int] = field(default_factory=list)  # one extra test set per caption length
    itos: list[str] = field(default_factory=list)  # id -> word, for BLEU and plots


@dataclass(frozen=True)
class ClassifyDims:
    """A document of sentences of words in, one class out (document classification)."""

    vocab_size: int  # V, word id 0 is padding, 1 an unknown word
    num_classes: int  # C
    classes: list[str] = field(default_factory=list)  # the name of each class, for plots
    itos: list[str] = field(default_factory=list)  # id -> word, for plots
    pad_id: int = 0


@dataclass(frozen=True)
class RecallDims:
    """Token ids in, a token predicted at the scored positions out (MQAR, selective copying, induction heads)."""

    vocab_size: int  # V: input ids and output classes
    seq_len: int  # T: the longest input of any split (the training length, or a longer test set's)
    test_sets: list[str] = field(default_factory=list)  # the names of the extra test sets (test/<name>/acc)


Dims = (QADims | SequenceDims | Seq2SeqDims | SpanDims | PatternsDims | GraphDims | EmbeddingsDims | CaptionDims
        | ClassifyDims | RecallDims)


def kwargs(dims: Dims) -> dict[str, Any]:
    """The fields as a dict, values as they are (no copies: `embeddings` stays the same tensor)."""
    return {f.name: getattr(dims, f.name) for f in fields(dims)}


def to_record(dims: Dims) -> dict[str, Any]:
    """The dims as plain values for a checkpoint: the class name and the fields, a tensor by its shape only."""
    values = {k: {"tensor_shape": list(v.shape)} if isinstance(v, Tensor) else v for k, v in kwargs(dims).items()}
    return {"class": type(dims).__name__, "fields": values}


def from_record(record: dict[str, Any]) -> Dims:
    """The dims `to_record` recorded; a tensor comes back as zeros of its shape (the weights restore it)."""
    classes = {cls.__name__: cls for cls in Dims.__args__}
    values = {k: torch.zeros(v["tensor_shape"]) if isinstance(v, dict) and "tensor_shape" in v else v
              for k, v in record["fields"].items()}
    return classes[record["class"]](**values)
