"""The recall datamodule: splits from their own seeds, batches, dims, extra test sets, and the packaged configs
composed through Hydra."""

from __future__ import annotations

import pytest
import torch
from hydra.utils import instantiate

from attnmem.core.dims import RecallDims, from_record, to_record
from attnmem.data.recall.datamodule import RecallDataModule
from attnmem.data.recall.induction_heads import InductionHeads
from attnmem.data.recall.mqar import MQAR
from attnmem.runtime import option_types


def small(**kw) -> RecallDataModule:
    args = {"source": MQAR(vocab_size=64, seq_len=32, num_kv_pairs=4), "num_train": 40, "num_val": 12,
            "num_test": 12, "batch_size": 8} | kw
    dm = RecallDataModule(**args)
    dm.setup("fit")
    return dm


def test_splits_batches_and_dims():
    dm = small(test_sets={"len64": {"seq_len": 64}, "kv8": {"seq_len": 64, "num_kv_pairs": 8}})
    assert dm.family == "recall" and dm.family_module == "attnmem.tasks.recall.RecallTask"
    assert dm.dims == RecallDims(vocab_size=64, seq_len=64, test_sets=["len64", "kv8"])
    assert from_record(to_record(dm.dims)) == dm.dims
    sizes = {k: tuple(v["inputs"].shape) for k, v in dm.splits.items()}
    assert sizes == {"train": (40, 32), "val": (12, 32), "test": (12, 32), "test/len64": (12, 64),
                     "test/kv8": (12, 64)}
    assert ((dm.splits["test/kv8"]["targets"] != -100).sum(1) == 8).all()
    assert not torch.equal(dm.splits["val"]["inputs"], dm.splits["test"]["inputs"])  # separate seeds
    batch = next(iter(dm.train_dataloader()))
    assert set(batch) == {"inputs", "targets"} and batch["inputs"].shape == (8, 32)
    assert [len(loader.dataset) for loader in dm.test_dataloader()] == [12, 12, 12]
    again = small(test_sets={"len64": {"seq_len": 64}, "kv8": {"seq_len": 64, "num_kv_pairs": 8}})
    assert all(torch.equal(dm.splits[k]["inputs"], again.splits[k]["inputs"]) for k in dm.splits)
    other = small(seed=1)
    assert not torch.equal(dm.splits["train"]["inputs"], other.splits["train"]["inputs"])


@pytest.mark.parametrize(("options", "fragments"), [
    ({"len64": {"vocab_size": 128}}, ["data.test_sets.len64.vocab_size", "training vocabulary"]),
    ({"len64": {"seq_lenn": 64}}, ["data.test_sets.len64.seq_lenn", "no such option of MQAR", "num_kv_pairs"]),
    ({"kv": {"num_kv_pairs": 9}}, ["data.test_sets.kv (num_kv_pairs=9)", "data.source.num_kv_pairs=9", "[1, 8]"]),
    ({"a b": {"seq_len": 64}}, ["data.test_sets.a b", "letters, digits"]),
])
def test_bad_test_sets_are_one_line(options, fragments):
    dm = RecallDataModule(source=MQAR(vocab_size=64, seq_len=32, num_kv_pairs=4), test_sets=options)
    with pytest.raises(ValueError) as err:
        dm.setup("fit")  # at setup, not while Hydra instantiates (which would wrap the error in a traceback)
    message = str(err.value)
    assert "\n" not in message and all(f in message for f in fragments), message


def test_bad_sizes_are_one_line():
    with pytest.raises(ValueError, match=r"^data.num_train=0 is out of range: it must be >= 1$"):
        RecallDataModule(source=InductionHeads(), num_train=0).setup("fit")
    with pytest.raises(ValueError, match=r"^data.source.seq_len=2 is out of range"):
        RecallDataModule(source=InductionHeads(seq_len=2)).setup("fit")


@pytest.mark.parametrize("data", ["mqar", "selective_copy", "induction_heads"])
def test_packaged_configs_compose_and_instantiate(compose_cfg, data):
    cfg = compose_cfg(f"data={data}", "data.num_train=16", "data.num_val=8", "data.num_test=8", "data.batch_size=4")
    option_types.check(cfg.data)
    dm = instantiate(cfg.data)
    assert isinstance(dm, RecallDataModule)
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    assert batch["inputs"].shape == batch["targets"].shape == (4, cfg.data.source.seq_len)
    assert (batch["inputs"] < dm.dims.vocab_size).all() and (batch["targets"] != -100).any()
    assert dm.dims.test_sets == list(cfg.data.test_sets) and len(dm.test_dataloader()) == 1 + len(cfg.data.test_sets)
    assert dm.dims.seq_len == max(cfg.data.source.seq_len, *(o.seq_len for o in cfg.data.test_sets.values()))


def test_a_bad_option_of_a_composed_config_is_one_line_at_setup(compose_cfg):
    # raised at setup, not while Hydra instantiates: the command line prints it as one line, not a traceback
    dm = instantiate(compose_cfg("data=mqar", "data.source.num_kv_pairs=20").data)
    with pytest.raises(ValueError) as err:
        dm.setup("fit")
    assert str(err.value).startswith("data.source.num_kv_pairs=20 is out of range: it must be in [1, 16]")
