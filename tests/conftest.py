"""Shared fixtures: the embedded example rows and a small tokenizer trained on them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

EXAMPLE_ROWS = Path(__file__).resolve().parent.parent / "data_io" / "example_data" / "rows"


@pytest.fixture(scope="session")
def small_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 600-token byte-level BPE trained by data_io on the example rows (seconds to train)."""
    from data_io.train_tokenizer import train_tokenizer

    out = tmp_path_factory.mktemp("tokenizer") / "tokenizer.json"
    train_tokenizer([EXAMPLE_ROWS], out, vocab_size=600, prefix_config=None, progress=False)
    return out


@pytest.fixture()
def rows_dir(tmp_path: Path) -> Path:
    """A private copy of the example rows that a test may change."""
    target = tmp_path / "rows"
    shutil.copytree(EXAMPLE_ROWS, target)
    return target
