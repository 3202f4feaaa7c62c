"""docs/examples/ntm_copy.py, the training loop docs/library.md shows, still teaches the NTM to copy.

It runs as a reader would run it (its `train()`, plain PyTorch): under one bit error per sequence on fresh
sequences of lengths 1-5, within a minute on one CPU core.
"""

from __future__ import annotations

import runpy
import time

import pytest
from conftest import ROOT


@pytest.mark.slow
def test_the_ntm_copy_example_learns_to_copy():
    example = runpy.run_path(str(ROOT / "docs" / "examples" / "ntm_copy.py"))  # not as __main__: nothing runs yet
    start = time.perf_counter()
    errors = example["train"](seed=0)
    seconds = time.perf_counter() - start
    assert errors < 1.0, f"the example's NTM makes {errors:.2f} bit errors per sequence after training"
    assert seconds <= 60, f"the example took {seconds:.0f} s (at most 60 s)"
