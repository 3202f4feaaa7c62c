"""On a CUDA GPU (skipped without one): trainer=gpu trains in bf16-mixed, and the models' float32 parts hold there."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import FAST

from attnmem.runtime import run

pytestmark = pytest.mark.gpu

TINY = [*FAST, "data.source.num_train=256", "data.source.num_val=64", "data.source.num_test=64", "trainer.max_epochs=3"]


def test_gpu_trainer_trains_in_bf16_mixed(compose_cfg, tmp_path):
    cfg = compose_cfg("trainer=gpu", *TINY, run_dir=tmp_path / "gpu")
    run.train(cfg)
    metrics = json.loads((tmp_path / "gpu" / "metrics.json").read_text())
    expected = "bf16-mixed" if torch.cuda.is_bf16_supported(including_emulation=False) else "16-mixed"
    assert cfg.trainer.precision == expected
    assert metrics["test/acc"] > 0.3 and all(v == v for v in metrics.values())  # learned something, no NaN


def test_attend_weights_are_float32_under_cuda_autocast():
    from attnmem.attention import Cosine, attend

    q, k, v = (torch.randn(2, 4, 8, device="cuda") for _ in range(3))
    with torch.autocast("cuda", dtype=torch.bfloat16):
        _, weights = attend(q, k, v, Cosine(query_dim=8, key_dim=8, beta=50.0).cuda())
    _, exact = attend(q, k, v, Cosine(query_dim=8, key_dim=8, beta=50.0).cuda())
    assert weights.dtype == torch.float32
    torch.testing.assert_close(weights, exact, atol=1e-5, rtol=0)
