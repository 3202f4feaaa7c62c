"""The linear-start callback asks its model for `LinearStartable` (models/contract.py); its schedule is tested with
MemN2N in tests/models/test_memn2n.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from torch import nn

from attnmem.callbacks.linear_start import LinearStart
from attnmem.core.errors import UserError
from attnmem.models.memn2n import MemN2N


def test_the_callback_refuses_a_net_without_linear_start_in_one_line():
    with pytest.raises(UserError, match="Linear has no linear start"):
        LinearStart().on_train_start(SimpleNamespace(), SimpleNamespace(net=nn.Linear(2, 2)))


def test_the_callback_checks_every_replica_and_sets_their_flags():
    nets = [MemN2N(vocab_size=8, num_answers=3, memory_size=4, sentence_len=3) for _ in range(2)]
    members = [SimpleNamespace(net=n) for n in nets]  # a `RunModule` of two replicas, as `Replicas` is
    module = SimpleNamespace(family_modules=lambda: members, curves_prefix=lambda: "replicas/0/")
    callback = LinearStart(epochs=1, lr=None)
    callback.on_train_start(SimpleNamespace(fit_loop=SimpleNamespace(max_epochs=3)), module)
    callback.on_train_epoch_start(SimpleNamespace(current_epoch=0), module)
    assert [n.linear_start for n in nets] == [True, True]
    members.append(SimpleNamespace(net=nn.Linear(2, 2)))
    with pytest.raises(UserError, match="callbacks.linear_start: Linear"):
        callback.on_train_start(SimpleNamespace(fit_loop=SimpleNamespace(max_epochs=3)), module)
