"""The qa family draws each example's attention over the story's sentences, and quietly nothing for a model whose
weights are over something else (the DNC reader's, over its memory word by word)."""

from __future__ import annotations

import logging

import pytest

from attnmem.runtime import run

SMALL = ["debug=fdr", "trainer.enable_progress_bar=false", "callbacks.plots.num_examples=1", "data.source.num_train=60",
         "data.source.num_val=20", "data.source.num_test=20", "data.batch_size=16"]


@pytest.mark.parametrize(("model", "drawn"), [("memn2n", True), ("dnc_qa", False)])
def test_attention_over_the_story_is_drawn_and_other_weights_skipped_quietly(compose_cfg, tmp_path, caplog, model,
                                                                              drawn):
    with caplog.at_level(logging.WARNING, logger="attnmem.callbacks.plots"):
        run.train(compose_cfg(f"model={model}", *SMALL))
    assert (tmp_path / "run" / "plots" / "attention_0.png").is_file() == drawn
    assert not [r for r in caplog.records if "skipped" in r.getMessage()], caplog.text
