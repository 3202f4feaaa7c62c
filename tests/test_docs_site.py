"""The documentation site: every public name has an API page, and `mkdocs build --strict` passes.

The pages are generated at build time by docs/gen_api_pages.py, from the `__all__` lists in the source; these tests
hold it to the imported modules, so a public name without a page, or a page of the wrong object, fails here.
"""

from __future__ import annotations

import importlib
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

GENERATOR = runpy.run_path(str(ROOT / "docs" / "gen_api_pages.py"), run_name="gen_api_pages")  # writes nothing


def _resolve(path: str) -> object:
    """The object at a dotted path: the longest importable module, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(path)


def public_names() -> list[str]:
    """`attnmem.nn.NTM` for each name of each public module's `__all__`, as imported."""
    return [f"{m}.{n}" for m in GENERATOR["MODULES"] for n in importlib.import_module(m).__all__]


def test_every_public_name_has_a_page_of_its_own_object():
    pages = GENERATOR["pages"]()
    assert sorted(pages) == sorted(public_names()), "docs/gen_api_pages.py misses or invents a public name"
    assert len({page for page, _ in pages.values()}) == len(pages)
    for public, (_, target) in pages.items():
        shown, meant = _resolve(target), _resolve(public)
        assert shown is meant or shown == meant, f"the page of {public} shows {target}, another object"


def test_the_generator_follows_the_lazy_names_of_the_root():
    assert GENERATOR["pages"]()["attnmem.load_model"] == ("api/attnmem.load_model.md",
                                                          "attnmem.runtime.load.load_model")


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="needs the docs extra (make docs installs it)")
def test_the_site_builds_with_warnings_as_errors(tmp_path: Path):
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    for public in public_names():
        page = site / "api" / public / "index.html"
        assert page.is_file() and public in page.read_text(encoding="utf-8"), f"no page for {public}"
    library = (site / "library" / "index.html").read_text(encoding="utf-8")
    assert "copy_batch" in library and "binary_cross_entropy_with_logits" in library, (
        "docs/examples/ntm_copy.py is not included in library.md")
