"""Exact duplicates decided as documents arrive (``OnlineDedup``, pass 1 writing the shards):
the same shards, metadata and kept hashes as the sorted runs' two passes, in one run and
incrementally, and a run whose hashes outgrow the budget started again with sorted runs."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from data_io.prepare import api, prepare
from data_io.prepare.dedup import OnlineDedup
from tests.prepare.helpers import folder_files

TOKENIZER = Path(__file__).resolve().parents[2] / "trained_tokenizers" / "bpe" / "tokenizer.json"


def _corpus(folder: Path, name: str, documents: int, seed: int) -> Path:
    rng = random.Random(seed)
    path = folder / name
    rows = [f"document {rng.randrange(documents // 2)} of the corpus, long enough" for _ in
            range(documents)]  # fmt: skip
    path.write_text("".join(json.dumps({"text": row}) + "\n" for row in rows))
    return path


def _prepare(inputs: list[Path], out: Path, online: bool, monkeypatch, budget: str = "1GB"):
    monkeypatch.setattr(OnlineDedup, "fits", staticmethod(lambda *_: online))
    return prepare(
        inputs, out, tokenizer=str(TOKENIZER), tokens_per_shard=2000, dedup_memory=budget,
        progress=False,
    )  # fmt: skip


def test_online_and_sorted_runs_write_the_same_folder(tmp_path: Path, monkeypatch) -> None:
    first = _corpus(tmp_path, "a.jsonl", 3000, seed=1)
    second = _corpus(tmp_path, "b.jsonl", 2000, seed=2)  # shares documents with the first
    results = {}
    for online in (True, False):
        out = tmp_path / f"out_{online}"
        one = _prepare([first], out, online, monkeypatch)
        two = _prepare([first, second], out, online, monkeypatch)
        results[online] = (one.duplicates, two.duplicates, two.documents, folder_files(out))
    assert results[True][:3] == results[False][:3]
    assert results[True][0] > 0 and results[True][1] > 0
    assert results[True][3].keys() == results[False][3].keys()
    for name, data in results[True][3].items():
        assert data == results[False][3][name], name


def test_hashes_outgrowing_the_budget_start_the_run_again_with_sorted_runs(
    tmp_path: Path, monkeypatch
) -> None:
    corpus = _corpus(tmp_path, "a.jsonl", 20_000, seed=3)
    runs = []
    original = api._run

    def counted(*args, **kwargs):
        runs.append(kwargs.get("direct", args[8] if len(args) > 8 else False))
        return original(*args, **kwargs)

    monkeypatch.setattr(api, "_run", counted)
    small = _prepare([corpus], tmp_path / "small", True, monkeypatch, budget="64KB")
    assert runs == [True, False]  # the online run overflowed and was rolled back
    assert small.dedup_runs > 0
    runs.clear()
    large = _prepare([corpus], tmp_path / "large", True, monkeypatch)
    assert runs == [True]
    assert small.duplicates == large.duplicates > 0
    for split in ("train", "val"):
        names = sorted(p.name for p in (tmp_path / "small" / split).iterdir())
        assert names == sorted(p.name for p in (tmp_path / "large" / split).iterdir())
        for name in names:
            a = np.fromfile(tmp_path / "small" / split / name, dtype=np.uint16)
            b = np.fromfile(tmp_path / "large" / split / name, dtype=np.uint16)
            assert np.array_equal(a, b)


@pytest.mark.parametrize(
    ("size", "budget", "fits"), [(1 << 20, 1 << 20, True), (1 << 30, 1 << 20, False)]
)
def test_the_online_path_is_chosen_when_the_documents_would_fit(size, budget, fits) -> None:
    assert OnlineDedup.fits(size, budget) is fits
