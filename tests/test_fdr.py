"""Every model yaml × every data yaml it accepts runs `debug=fdr` end to end: fit, validate, test, metrics.json."""

from __future__ import annotations

import json

import pytest
from test_configs import PAIRS, _data_overrides

from attnmem.runtime import run


@pytest.mark.parametrize(("model", "data"), PAIRS)
def test_fast_dev_run_end_to_end(compose_cfg, tmp_path, model, data):
    # one example plot: the plotting code runs for every family, at a quarter of the default's cost
    cfg = compose_cfg(
        f"model={model}",
        f"data={data}",
        "debug=fdr",
        "trainer.enable_progress_bar=false",
        "callbacks.plots.num_examples=1",
        *_data_overrides(data, tmp_path),
    )
    run.train(cfg)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["global_step"] == 1
    assert any(k.startswith("val/") for k in metrics), metrics
