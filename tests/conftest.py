"""Shared fixtures: the embedded example rows and a small tokenizer trained on them."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

EXAMPLE_ROWS = Path(__file__).resolve().parent.parent / "data_io" / "example_data" / "rows"


@pytest.fixture(scope="session", autouse=True)
def _encoder_load_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The encoders' load cache in the session's own folder, not the user's ~/.cache (the
    tests load hundreds of tokenizers; child processes inherit the variable)."""
    folder = tmp_path_factory.mktemp("encoder_cache")
    before = os.environ.get("DATA_IO_ENCODER_CACHE")
    os.environ["DATA_IO_ENCODER_CACHE"] = str(folder)
    yield
    if before is None:
        del os.environ["DATA_IO_ENCODER_CACHE"]
    else:
        os.environ["DATA_IO_ENCODER_CACHE"] = before


@pytest.fixture()
def python_sigint() -> Iterator[None]:
    """A terminal's Ctrl-C as a test sends it, whatever earlier tests in this worker process
    left: Python's own SIGINT handler (a native library installs its own: polars through
    signal-hook when it is imported) and SIGINT unblocked (a mask). Children started meanwhile
    inherit both across exec: a blocked mask, or an ignored SIGINT, left a child's Ctrl-C
    pending for ever, and its run went on (fresh clones' full runs, never a test alone)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    yield
    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    signal.signal(signal.SIGINT, before)


@pytest.fixture(scope="session")
def small_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 600-token byte-level BPE trained by data_io on the example rows (seconds to train)."""
    from data_io.tokenizer.train import train_tokenizer

    out = tmp_path_factory.mktemp("tokenizer") / "tokenizer.json"
    train_tokenizer([EXAMPLE_ROWS], out, vocab_size=600, prefix_config=None, progress=False)
    return out


@pytest.fixture()
def rows_dir(tmp_path: Path) -> Path:
    """A private copy of the example rows that a test may change."""
    target = tmp_path / "rows"
    shutil.copytree(EXAMPLE_ROWS, target)
    return target


@contextlib.contextmanager
def mounted_tmpfs(mount_point: Path, size: str) -> Iterator[Path]:
    """A real tmpfs of `size` at `mount_point` for the duration of the block.

    Mounting needs root and mount permission (as in CI containers); elsewhere the test is
    skipped, and each caller has a test that fakes the same condition without a mount.
    """
    mount_point.mkdir(exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; a faked test covers the logic")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=False)


def sampler_config(tmp_path: Path, corpus: Path, *extra: str):
    """Sampler options over `corpus`, writing to `tmp_path/out`: 2 epochs, `b__` tasks capped
    at 5; `extra` adds or replaces keys."""
    from data_io.sampling import parse_overrides

    rules = tmp_path / "rules.yaml"
    if not rules.exists():
        rules.write_text("- prefix: b__\n  max_per_file: 5\n")
    defaults = [
        f"tokenized_path={corpus}",
        f"output_path={tmp_path / 'out'}",
        f"prefix_config_path={rules}",
        "epochs=2",
    ]
    # A key in `extra` replaces its default: the sampler refuses a key given twice.
    given = {item.partition("=")[0] for item in extra}
    return parse_overrides(
        [item for item in defaults if item.partition("=")[0] not in given] + list(extra)
    )


class _Kept(logging.Handler):
    def __init__(self, kept: list[str]) -> None:
        super().__init__()
        self.kept = kept

    def emit(self, record: logging.LogRecord) -> None:
        self.kept.append(record.getMessage())


@contextlib.contextmanager
def logged_by_datasets() -> Iterator[list[str]]:
    """The messages ``datasets``' JSON reader logs inside the block (its own handler writes to
    the stderr it found at import, which the capture fixtures do not see)."""
    kept: list[str] = []
    handler = _Kept(kept)
    logger = logging.getLogger("datasets.packaged_modules.json.json")
    logger.addHandler(handler)
    try:
        yield kept
    finally:
        logger.removeHandler(handler)
