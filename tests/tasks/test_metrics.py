"""The family modules' sums: named fields, slices, minima, one read per epoch, reduced across processes."""

from __future__ import annotations

import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from attnmem.tasks.metrics import Sums, counted


def test_sums_by_hand_then_zero_for_the_next_epoch():
    sums = Sums(("loss", "correct", "count"), slices=3, minima=["low"])
    sums.add(torch.tensor([0.5, 1.0, 2.0]), 2)
    sums.add_rows(torch.tensor([0, 2, 0]), torch.tensor([[1.0, 1.0, 1.0], [2.0, 0.0, 1.0], [3.0, 0.0, 1.0]]))
    sums.lower("low", torch.tensor(0.25, dtype=torch.float64))
    sums.lower("low", torch.tensor(0.75, dtype=torch.float64))  # not lower: kept
    got = sums.read()
    assert list(got) == ["loss", "correct", "count", "low"]
    assert got["loss"].tolist() == [4.0, 0.0, 2.5] and got["correct"].tolist() == [1.0, 0.0, 1.0]
    assert got["count"].tolist() == [2.0, 0.0, 3.0] and got["low"].item() == 0.25
    assert got["count"].dtype == torch.float64
    assert [name for name, _ in counted(got, ["a", "b", "c"])] == ["a", "c"]  # b counted nothing
    assert counted(got, ["a", "b", "c"])[1][1] == {"loss": 2.5, "correct": 1.0, "count": 3.0, "low": 0.25}
    again = sums.read()
    assert again["count"].tolist() == [0.0, 0.0, 0.0] and again["low"].item() == float("inf")


def test_the_torchmetrics_entry_points_give_the_same_columns():
    sums = Sums(("x", "count"))
    sums.update(torch.tensor([3.0, 1.0]))
    got = sums.compute()  # torchmetrics squeezes a one-element result
    assert sums.update_called and {k: v.tolist() for k, v in got.items()} == {"x": 3.0, "count": 1.0}


def _two_processes(rank: int, port: int, results: dict) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        sums = Sums(("x", "count"), slices=2, minima=["low"])
        sums.add(torch.tensor([1.0 + rank, 1.0]), rank)  # each process fills its own slice
        sums.add(torch.tensor([10.0, 1.0]), 0)
        sums.lower("low", torch.tensor(5.0 - rank, dtype=torch.float64))
        got = sums.read()
        results[rank] = {k: v.tolist() for k, v in got.items()}
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_read_sums_slices_and_takes_the_minimum_over_processes():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    results = mp.Manager().dict()
    mp.spawn(_two_processes, args=(port, results), nprocs=2)
    expected = {"x": [21.0, 2.0], "count": [3.0, 1.0], "low": 4.0}  # slice 0: 1 + 10 + 10; slice 1: 2
    assert results[0] == expected and results[1] == expected
