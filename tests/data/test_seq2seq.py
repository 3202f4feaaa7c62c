"""seq2seq data: generated tasks checked against their definitions, seeding, batches, and the parallel-text reader."""

from __future__ import annotations

import logging

import pytest
import torch

from attnmem.core.errors import UserError
from attnmem.data.seq2seq.datamodule import Seq2SeqDataModule
from attnmem.data.seq2seq.parallel_text_files import ParallelTextFiles
from attnmem.data.seq2seq.tensors import BOS, EOS, PAD
from attnmem.data.seq2seq.token_tasks import TokenTasks


def token_tasks(batch_size: int = 64, **kw) -> Seq2SeqDataModule:
    """A datamodule of generated token tasks: `batch_size` is the datamodule's, the rest the source's."""
    return Seq2SeqDataModule(source=TokenTasks(**kw), batch_size=batch_size)


def generated(**kw) -> Seq2SeqDataModule:
    args = {"num_train": 50, "num_val": 20, "num_test": 20, "batch_size": 8} | kw
    dm = token_tasks(**args)
    dm.setup()
    return dm


def parallel_text(batch_size: int = 32, **kw) -> Seq2SeqDataModule:
    """A datamodule of parallel text files: `batch_size` is the datamodule's, the rest the source's."""
    return Seq2SeqDataModule(source=ParallelTextFiles(**kw), batch_size=batch_size)


def rows(data: dict[str, torch.Tensor]) -> list[tuple[list[int], list[int]]]:
    """(source tokens, target tokens without bos/eos) of every example."""
    out = []
    for src, tgt in zip(data["src"].tolist(), data["tgt"].tolist()):
        src = [i for i in src if i != PAD]
        assert tgt[0] == BOS
        end = tgt.index(EOS)
        assert all(i == PAD for i in tgt[end + 1 :])
        out.append((src, tgt[1:end]))
    return out


@pytest.mark.parametrize(
    ("task", "fn"), [("reverse", lambda s: s[::-1]), ("sort", sorted), ("copy_tokens", lambda s: list(s))]
)
def test_generated_targets_follow_the_task_within_the_lengths(task, fn):
    dm = generated(task=task, vocab_size=5, train_lengths=[2, 6], test_lengths=[9])
    for split in ("train", "val", "test"):
        for src, tgt in rows(dm.splits[split]):
            assert tgt == fn(src) and 2 <= len(src) <= 6 and all(4 <= i < 9 for i in src)
    assert {len(src) for src, _ in rows(dm.splits["test1"])} == {9}
    assert len({len(src) for src, _ in rows(dm.splits["train"])}) == 5  # every length of the range occurs


def test_addition_is_lower_endian_decimal_sum():
    dm = generated(task="addition", vocab_size=10, train_lengths=[3, 12])
    itos = dm.vocab["src"]
    assert dm.vocab["tgt"] == itos
    plus = itos.index("+")
    for src, tgt in rows(dm.splits["train"]):
        digits = [itos[i] for i in src]
        split = src.index(plus)
        n1, n2 = ("".join(reversed(digits[:split])), "".join(reversed(digits[split + 1 :])))
        assert 3 <= len(src) <= 12 and src.count(plus) == 1 and split >= 1 and len(src) - split - 1 >= 1
        assert "".join(itos[i] for i in reversed(tgt)) == str(int(n1) + int(n2))


def test_seeded_sets_repeat_and_differ_by_seed_and_split():
    a, b, c = generated(seed=1), generated(seed=1), generated(seed=2)
    assert torch.equal(a.splits["train"]["src"], b.splits["train"]["src"])
    assert not torch.equal(a.splits["train"]["src"][:20], c.splits["train"]["src"][:20])
    assert not torch.equal(a.splits["val"]["src"], a.splits["test"]["src"])


def test_batches_are_cut_to_their_longest_row_and_dims_follow_the_contract():
    dm = generated(train_lengths=[1, 20], test_lengths=[25])
    batch = next(iter(dm.val_dataloader()))
    longest = int((batch["src"] != PAD).sum(1).max())
    assert batch["src"].shape == (8, longest) and batch["tgt"].shape[1] == int((batch["tgt"] != PAD).sum(1).max())
    dims = dm.dims
    assert (dims.pad_id, dims.bos_id, dims.eos_id) == (0, 1, 2)
    assert dims.src_vocab_size == dims.tgt_vocab_size == 14 and dims.src_itos[4] == "0"
    assert dims.max_src_len == 25 and dims.max_tgt_len == 27 and dims.test_lengths == [25]
    assert [len(loader.dataset) for loader in dm.test_dataloader()] == [20, 20]


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"task": "rotate"}, "data.source.task"),
        ({"train_lengths": [5, 2]}, "data.source.train_lengths"),
        ({"train_lengths": [0, 2]}, "data.source.train_lengths"),
        ({"task": "addition", "train_lengths": [2, 5]}, ">= 3"),
        ({"batch_size": 0}, "data.batch_size"),
    ],
)
def test_bad_options_name_the_option(kw, message):
    with pytest.raises(ValueError, match=message):
        token_tasks(**kw)


def write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_parallel_text_vocab_from_train_unknown_tokens_and_empty_lines_counted(tmp_path, caplog):
    train = write(tmp_path / "train.tsv", "a b\tx y\n\nb c\ty z\n   \nc\tz\n")
    test = write(tmp_path / "test.tsv", "a d\tx w\n")
    dm = parallel_text(train_file=train, val_file=train, test_file=test, batch_size=2)
    with caplog.at_level(logging.INFO, logger="attnmem.data.seq2seq"):
        dm.setup()
    assert "skipped 2 empty line(s)" in caplog.text
    assert "test split: 2 unknown token(s) mapped to <unk>" in caplog.text
    assert dm.vocab["src"] == ["<pad>", "<bos>", "<eos>", "<unk>", "b", "c", "a"]  # by frequency, then name
    assert dm.splits["test"]["src"].tolist() == [[6, 3]] and dm.splits["test"]["tgt"].tolist() == [[1, 6, 3, 2]]
    assert dm.dims.bleu and dm.data_files and dm.has_test


def test_parallel_text_chars_truncation_and_held_out_validation(tmp_path, caplog):
    train = write(tmp_path / "train.tsv", "".join(f"ab{'c' * (i % 4)}\tba\n" for i in range(20)))
    dm = parallel_text(train_file=train, tokens="char", max_len=3, val_fraction=0.25)
    with caplog.at_level(logging.WARNING, logger="attnmem.data.seq2seq"):
        dm.setup()
    assert caplog.text.count("truncated") == 1 and "10 sequence(s) longer than data.source.max_len=3" in caplog.text
    assert len(dm.splits["train"]["src"]) == 15 and len(dm.splits["val"]["src"]) == 5
    assert dm.splits["train"]["src"].shape[1] == 3 and set(dm.vocab["src"][4:]) == {"a", "b", "c"}
    assert not dm.has_test


@pytest.mark.parametrize("line", ["only source", "a\tb\tc", "\ttarget", "source\t  "])
def test_malformed_line_names_file_and_line(tmp_path, line):
    train = write(tmp_path / "bad.tsv", f"a\tb\n\n{line}\n")
    with pytest.raises(UserError, match=r"bad\.tsv:3: expected 'source<TAB>target'"):
        parallel_text(train_file=train, val_file=train).setup()


def test_parallel_text_checkpoint_vocabulary_wins(tmp_path):
    first = parallel_text(train_file=write(tmp_path / "a.tsv", "a b\tx\n"), val_file=str(tmp_path / "a.tsv"))
    first.setup()
    second = parallel_text(train_file=write(tmp_path / "b.tsv", "q b\ty\n"), val_file=str(tmp_path / "b.tsv"))
    second.load_state_dict(first.state_dict())
    second.setup()
    assert second.vocab == first.vocab and second.splits["train"]["src"].tolist() == [[3, 5]]  # q unknown, b known
