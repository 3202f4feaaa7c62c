"""Fixtures of the blocks' tests."""

from __future__ import annotations

import pytest

from attnmem.blocks import selective_scan


@pytest.fixture
def chunk_numbers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int | None:
    """`selective_scan.CHUNK_NUMBERS` set to the test's parameter (indirect; None: the default) for the test."""
    if request.param is not None:
        monkeypatch.setattr(selective_scan, "CHUNK_NUMBERS", request.param)
    return request.param
