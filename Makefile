# Two commands: `make train` (installs the `train` extra) and `make test` (the `dev` extra); `make typecheck` runs
# mypy (pyproject's [tool.mypy]), `make docs` builds the documentation site into site/. Torch is installed only
# when the venv has none, from TORCH_SPEC, so a user's own CUDA build is kept (pyproject only asks for torch>=2.3,<3).
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
ARGS ?=

.PHONY: venv dev train test typecheck docs bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

venv: $(BIN)/python
	@$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install -q $(TORCH_SPEC)
	$(BIN)/pip install -q -e ".[train]"

dev: $(BIN)/python
	@$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install -q $(TORCH_SPEC)
	$(BIN)/pip install -q -e ".[dev]"

train: venv
	$(BIN)/python train.py $(ARGS)

test: dev
	$(BIN)/python -m pytest $(ARGS)

# mypy on the package, --strict's flags on the public API (nn, attention, blocks, models.contract): [tool.mypy]
typecheck: dev
	$(BIN)/mypy

# the site from docs/ and the docstrings (MkDocs Material + mkdocstrings), warnings as errors; the two variables
# silence the banners some plugins print about MkDocs 2 (the docs extra pins mkdocs<2)
docs: venv
	$(BIN)/pip install -q -e ".[docs]"
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs build --strict

bench: venv
	$(BIN)/python benchmarks/lightning_overhead.py
	$(BIN)/python benchmarks/attend_sdpa.py
	$(BIN)/python benchmarks/threads.py

clean:
	rm -rf outputs .pytest_cache .mypy_cache site
