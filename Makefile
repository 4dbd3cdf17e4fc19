# The two commands of the README: `make example` and `make test`. Both install what they need.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Cargo's build folder; CI points it outside the clone so that builds are reused.
export CARGO_TARGET_DIR ?= $(CURDIR)/target
RUST_SOURCES := Cargo.toml $(shell find rust -name '*.rs' 2>/dev/null)

.PHONY: install build example test test-rust test-python lint fmt bench clean

# Python dependencies (and a first build of the extension) into a local virtual environment.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -U pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# Rebuild the extension in place (data_io/_core*.so) when the Rust sources changed.
$(VENV)/.built: $(VENV)/.installed $(RUST_SOURCES)
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release --skip-install -q
	touch $@

build: $(VENV)/.built

example: build
	$(VENV)/bin/data_io example --workdir work/example

test: build test-rust test-python

test-rust:
	cargo test --release --quiet

test-python: build
	$(PY) -m pytest -q

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	cargo fmt --check
	cargo clippy --release --all-targets -- -D warnings
	cargo clippy --release --features python -- -D warnings

fmt: install
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .
	cargo fmt

# Run as modules: `python benchmarks/X.py` would put benchmarks/ first on the import path, where
# benchmarks/tokenize.py shadows the standard library's tokenize module.
bench: build
	$(PY) -m benchmarks.tokenize
	$(PY) -m benchmarks.sample
	$(PY) -m benchmarks.loader
	$(PY) -m benchmarks.clean

clean:
	rm -rf $(VENV) target work data_io/_core*.so
