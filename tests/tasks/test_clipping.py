"""Gradient clipping per weight matrix by its spectral norm (the MemN2N reference code's rule)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnmem.core.errors import UserError
from attnmem.tasks.clipping import clip_per_weight, spectral_norm, weight_matrices


def with_grad(values: list) -> nn.Parameter:
    param = nn.Parameter(torch.zeros(torch.tensor(values).shape))
    param.grad = torch.tensor(values, dtype=torch.float32)
    return param


def test_spectral_norm_is_the_largest_singular_value():
    assert float(spectral_norm(torch.tensor([[3.0, 0.0], [0.0, 4.0], [0.0, 0.0]]))) == pytest.approx(4.0)
    assert float(spectral_norm(torch.tensor([[1.0, 1.0, 1.0, 1.0]]))) == pytest.approx(2.0)  # a wide matrix
    rows = torch.randn(7, 3, generator=torch.Generator().manual_seed(0))
    assert float(spectral_norm(rows)) == pytest.approx(float(torch.linalg.matrix_norm(rows, ord=2)), rel=1e-5)


def test_each_group_is_clipped_by_the_spectral_norm_of_its_rows_together():
    # [E; T] = [[3, 0], [0, 0], [0, 4]]: spectral norm 4 (its Frobenius norm 5); the vector's length is 5
    embed, table, vector = with_grad([[3.0, 0.0], [0.0, 0.0]]), with_grad([[0.0, 4.0]]), with_grad([3.0, 4.0])
    small = with_grad([[0.3, 0.0]])
    clip_per_weight([[embed, table], [vector], [small]], max_norm=2.0)
    torch.testing.assert_close(embed.grad, torch.tensor([[1.5, 0.0], [0.0, 0.0]]))  # scaled by 2 / 4
    torch.testing.assert_close(table.grad, torch.tensor([[0.0, 2.0]]))
    torch.testing.assert_close(vector.grad, torch.tensor([1.2, 1.6]))  # scaled by 2 / 5
    torch.testing.assert_close(small.grad, torch.tensor([[0.3, 0.0]]))  # below the limit: untouched


def test_weight_matrices_take_the_nets_groups_and_every_other_parameter_alone():
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b, self.c = nn.Linear(2, 2, bias=False), nn.Linear(2, 2, bias=False), nn.Linear(2, 1)

        def weight_matrices(self) -> list[list[nn.Parameter]]:
            return [[self.a.weight, self.b.weight]]

    net = Net()
    expected = [[net.a.weight, net.b.weight], [net.c.weight], [net.c.bias]]
    assert [[id(p) for p in g] for g in weight_matrices(net)] == [[id(p) for p in g] for g in expected]
    assert len(weight_matrices(nn.Linear(2, 2))) == 2  # no groups of its own: each parameter alone


def test_the_qa_task_clips_per_weight_only_by_norm():
    from hydra.utils import instantiate

    from attnmem.core.dims import QADims
    from attnmem.tasks.qa import QATask

    net = nn.Linear(2, 2)
    net.weight.grad = torch.tensor([[30.0, 0.0], [0.0, 40.0]])
    net.bias.grad = torch.tensor([3.0, 4.0])
    dims = QADims(vocab_size=3, num_answers=2, memory_size=1, sentence_len=1, query_len=1, answer_words=[1, 2],
                  tasks=[])
    sgd = instantiate({"_target_": "torch.optim.SGD", "_partial_": True, "lr": 0.1})
    task = QATask(net, optimizer=sgd, dims=dims, clip_per_weight=True)
    task.configure_gradient_clipping(None, 20.0, "norm")
    torch.testing.assert_close(net.weight.grad, torch.tensor([[15.0, 0.0], [0.0, 20.0]]))  # 40 -> 20
    torch.testing.assert_close(net.bias.grad, torch.tensor([3.0, 4.0]))  # length 5: untouched
    with pytest.raises(UserError, match="gradient_clip_algorithm=norm"):
        task.configure_gradient_clipping(None, 20.0, "value")


def test_the_qa_task_clips_with_the_nil_row_then_lets_the_net_zero_it():
    # the MemN2N reference code's Weight.m measures the table with its nil column in it, then Memory.m zeroes it
    from hydra.utils import instantiate

    from attnmem.core.dims import QADims
    from attnmem.tasks.qa import QATask

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(2, 2)

        def after_clipping(self) -> None:
            self.embed.weight.grad[0] = 0

    net = Net()
    net.embed.weight.grad = torch.tensor([[0.0, 40.0], [30.0, 0.0]])  # row 0, the nil word's: spectral norm 40
    dims = QADims(vocab_size=2, num_answers=2, memory_size=1, sentence_len=1, query_len=1, answer_words=[0, 1],
                  tasks=[])
    sgd = instantiate({"_target_": "torch.optim.SGD", "_partial_": True, "lr": 0.1})
    QATask(net, optimizer=sgd, dims=dims, clip_per_weight=True).configure_gradient_clipping(None, 20.0, "norm")
    torch.testing.assert_close(net.embed.weight.grad, torch.tensor([[0.0, 0.0], [15.0, 0.0]]))  # 40 -> 20, then 0


def test_per_weight_clipping_refuses_a_negative_bound():
    weight = torch.nn.Parameter(torch.ones(2, 2))
    weight.grad = torch.ones(2, 2)
    with pytest.raises(ValueError, match="gradient_clip_val must be > 0 for per-weight clipping, got -1"):
        clip_per_weight([[weight]], -1.0)
    assert torch.equal(weight.grad, torch.ones(2, 2))  # untouched: no gradient ascent
