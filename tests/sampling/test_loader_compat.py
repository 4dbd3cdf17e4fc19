"""The sampler's output passes the loader's own checks (data_io.formats.sampled), every epoch."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

sampled_folder = pytest.importorskip("data_io.formats.sampled")

from data_io.sampling import parse_overrides, sample  # noqa: E402
from data_io.sampling.synthetic import random_task, write_corpus  # noqa: E402


@pytest.mark.parametrize("vocab_size", [200, 65_536, 100_000])
def test_loader_accepts_the_output(tmp_path: Path, vocab_size: int) -> None:
    rng = np.random.default_rng(vocab_size)
    tasks = {"a.jsonl": random_task(rng, 50, max_inst=90), "b.jsonl": random_task(rng, 30)}
    corpus = write_corpus(tmp_path / "tok", tasks, vocab_size=vocab_size)
    rules = tmp_path / "rules.yaml"
    rules.write_text("- prefix: b\n  repeat: 3\n")
    out = tmp_path / "out"
    result = sample(
        parse_overrides(
            [
                f"tokenized_path={corpus}",
                f"output_path={out}",
                f"prefix_config_path={rules}",
                "epochs=3",
                "context_size=100",
                "plot=false",
            ]
        ),
        stdout=io.StringIO(),
        progress=False,
    )
    meta = sampled_folder.read_metadata(out)
    assert meta.max_seq_len == 100 and meta.total_length == result.total_length
    assert meta.vocab_size == vocab_size
    tokens = sampled_folder.open_tokens(out)
    assert tokens.dtype == result.pool_dtype
    for epoch in range(3):
        index = sampled_folder.open_epoch(out, epoch, len(tokens), meta, check=True)
        assert index.rows == result.rows_per_epoch
