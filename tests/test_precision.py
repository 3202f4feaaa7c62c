"""Mixed precision: every model trains in bf16 autocast without NaN/inf; the fragile parts run in float32."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import CONF
from omegaconf import OmegaConf
from test_configs import DATA, MODELS, _data_overrides, _family

from attnmem.attention import Cosine, attend, softmax
from attnmem.core.float32 import in_float32
from attnmem.models.ntm import NTM
from attnmem.runtime import run

# bf16 autocast is several times slower than float32 on a CPU: a few dozen steps on one batch
STEPS = 24


def _natural_data(compose_cfg, model: str) -> str:
    """The data yaml a model's defaults pick (several yamls may share one datamodule class)."""
    natural = compose_cfg(f"model={model}")
    same_class = [name for name in DATA if _family("data", name).__name__ == natural.data._target_.rsplit(".", 1)[1]]
    return next(
        (name for name in same_class if OmegaConf.load(CONF / "data" / f"{name}.yaml") == natural.data), same_class[0]
    )


def _bf16() -> torch.autocast:
    return torch.autocast("cpu", dtype=torch.bfloat16)


@pytest.mark.parametrize("model", MODELS)
def test_every_model_trains_in_bf16_mixed(compose_cfg, tmp_path, model):
    data = _natural_data(compose_cfg, model)
    datamodule, module, _ = run.setup(compose_cfg(f"model={model}", *_data_overrides(data, tmp_path)))
    batch = next(iter(datamodule.train_dataloader()))
    if not any(p.requires_grad for p in module.net.parameters()):
        # a memory stored without gradients: retrieval runs in float32 under autocast, so it is exactly float32's
        torch.manual_seed(0)  # the same random update order for both
        full = module.net(batch).pred
        torch.manual_seed(0)
        with _bf16():
            mixed = module.net(batch).pred
        assert torch.isfinite(mixed).all() and torch.equal(mixed.float(), full.float())
        return
    optimizer = module.configure_optimizers()
    optimizer = optimizer["optimizer"] if isinstance(optimizer, dict) else optimizer
    losses = []
    for _ in range(STEPS):
        with _bf16():
            loss = module.training_step(batch, 0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(math.isfinite(x) for x in losses), losses
    assert all(torch.isfinite(p).all() for p in module.net.parameters())
    assert losses[-1] < 0.8 * losses[0], losses


def test_attend_weights_are_float32_under_autocast():
    q, k, v = torch.randn(2, 3, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    mask = torch.tensor([True, True, False, True, False]).expand(2, 3, 5)
    with _bf16():
        context, weights = attend(q, k, v, Cosine(query_dim=8, key_dim=8, beta=50.0), mask=mask)
    assert weights.dtype == torch.float32 and context.dtype == torch.bfloat16
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3), atol=1e-6, rtol=0)
    # with the cosine in float32 the weights are float32's, not those of 16-bit scores times β = 50
    _, exact = attend(q, k, v, Cosine(query_dim=8, key_dim=8, beta=50.0), mask=mask)
    torch.testing.assert_close(weights, exact, atol=1e-6, rtol=0)


def test_softmax_keeps_float64_and_lifts_bf16():
    assert softmax(torch.zeros(3, dtype=torch.float64)).dtype == torch.float64
    scores = torch.tensor([0.0, math.log(3.0)]).bfloat16()
    weights = softmax(scores)
    assert weights.dtype == torch.float32
    # the weights of the (rounded) bf16 scores, to float32 accuracy rather than bf16's 3 digits
    torch.testing.assert_close(weights[1], torch.sigmoid(scores[1].float()), atol=1e-7, rtol=0)


def test_in_float32_turns_autocast_off_and_upcasts():
    @in_float32
    def product(a, b):
        return a @ b, torch.is_autocast_enabled("cpu")

    a, b = torch.randn(4, 4).bfloat16(), torch.randn(4, 4)
    with _bf16():
        out, inside = product(a, b)
    assert out.dtype == torch.float32 and not inside
    assert product(a.float(), b)[0].dtype == torch.float32  # outside autocast: a plain call


def test_ntm_addressing_is_float32_under_autocast():
    from attnmem.attention import Dot

    torch.manual_seed(0)
    net = NTM(input_size=4, output_size=3, score=Dot, controller_size=16, memory_locations=8, memory_width=6)
    with _bf16():
        _, _, weights = net(torch.randn(2, 5, 4), return_attention=True)
    assert weights.dtype == torch.float32
    torch.testing.assert_close(weights[:, -1].sum(-1), torch.ones(2, 2), atol=1e-5, rtol=0)


@pytest.mark.parametrize("update", ["sync", "async"])
def test_hopfield_retrieval_under_autocast_is_float32s(update):
    from attnmem.models.hopfield import Hopfield

    torch.manual_seed(0)
    patterns = torch.randint(0, 2, (12, 100)).float() * 2 - 1  # 1/100 weights are not exact in bf16
    probes = patterns * torch.where(torch.rand(12, 100) < 0.2, -1.0, 1.0)
    results = []
    for autocast in (False, True):
        net = Hopfield(size=100, update=update, max_steps=20)
        torch.manual_seed(1)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            results.append(net({"patterns": patterns, "probes": probes}))
    assert torch.equal(results[0].pred, results[1].pred)
    assert torch.equal(results[0].energy, results[1].energy) and results[1].energy.dtype == torch.float32
