"""Ctrl-C while ``tokenizers``' own trainer runs (``--trainer hf``, the only one for unigram):
it never reads the core's stop flag, so the training ran to its end and wrote the tokenizer
before the KeyboardInterrupt came: 'interrupted', exit 130, and a folder that looks finished.
The core now looks at the flag before writing, and writes nothing."""

from __future__ import annotations

import json
import random
import signal
import threading
import time
from pathlib import Path

import pytest

from data_io.tokenizer.train import train_tokenizer

# Python's own SIGINT handler, unblocked, whatever an earlier test left (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("python_sigint")


def _rows(folder: Path, count: int) -> Path:
    """Rows of words drawn from a few thousand: unigram training time grows with the distinct
    words (a second here, on one thread)."""
    rng = random.Random(3)
    syllables = ["ka", "lo", "mi", "ta", "re", "su", "no", "vi", "xe", "qu", "zo", "pa", "ith"]
    words = ["".join(rng.choices(syllables, k=rng.randint(1, 5))) for _ in range(5000)]
    folder.mkdir()
    with open(folder / "r.jsonl", "w") as file:
        for _ in range(count):
            texts = [" ".join(rng.choices(words, k=50)) for _ in range(2)]
            row = {"condition": "direct", "instruction": texts[0], "response": texts[1]}
            file.write(json.dumps(row) + "\n")
    return folder


def test_ctrl_c_during_the_hf_trainer_writes_no_tokenizer(tmp_path: Path) -> None:
    rows = _rows(tmp_path / "rows", 12_000)
    out = tmp_path / "tok" / "tokenizer.json"
    main = threading.main_thread().ident
    assert main is not None
    timer = threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT))
    started = time.monotonic()
    timer.start()
    try:
        train_tokenizer([rows], out, tokenizer_type="unigram", trainer="hf", vocab_size=2000,
                        prefix_config=None, threads=1, progress=False)  # fmt: skip
    except KeyboardInterrupt:
        pass
    else:
        timer.cancel()
        pytest.fail(f"not interrupted: the training took {time.monotonic() - started:.2f} s")
    timer.join()
    assert not out.exists()  # nothing that looks finished
    assert not out.parent.exists() or list(out.parent.iterdir()) == []
