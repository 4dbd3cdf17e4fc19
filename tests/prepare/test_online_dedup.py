"""Exact duplicates decided as documents arrive (``OnlineDedup``, pass 1 writing the shards):
the same shards, metadata and kept hashes as the sorted runs' two passes, in one run and
incrementally, and a run whose hashes outgrow the budget started again with sorted runs."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from data_io.errors import OutputError
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
    original = api.run_new_sources

    def counted(*args, **kwargs):
        runs.append(kwargs.get("direct", args[8] if len(args) > 8 else False))
        return original(*args, **kwargs)

    monkeypatch.setattr(api, "run_new_sources", counted)
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


def test_the_set_is_sized_from_the_records_per_input_byte() -> None:
    online = OnlineDedup(1 << 30, input_bytes=100 << 20)
    rng = np.random.default_rng(0)
    online.keep(rng.integers(0, 2**63, size=(1000, 2), dtype=np.uint64))
    before = online.seen.bytes
    online.project(1 << 20)  # a hundredth read: about 100,000 hashes in all, a tenth to spare
    assert online.seen.bytes >= 110_000 * 17 > before
    grown = online.seen.bytes
    online.keep(rng.integers(0, 2**63, size=(50_000, 2), dtype=np.uint64))
    assert online.seen.bytes == grown  # no doubling on the way


def test_a_projection_beyond_the_budget_stops_the_online_run_once_trusted() -> None:
    online = OnlineDedup(1 << 20, input_bytes=1 << 30)
    rng = np.random.default_rng(1)
    online.keep(rng.integers(0, 2**63, size=(1000, 2), dtype=np.uint64))
    online.project(1 << 20)  # a million hashes projected, but from a thousandth of the input
    online.keep(rng.integers(0, 2**63, size=(20_000, 2), dtype=np.uint64))
    with pytest.raises(api.DedupOverflow):
        online.project(64 << 20)  # a sixteenth read: 336,000 hashes will not fit 1 MB


def test_an_online_run_that_will_not_fit_stops_early(tmp_path: Path, monkeypatch) -> None:
    """The budget holds about two thirds of the hashes: the online run stops once the
    projection is trusted, not when the set overflows, and the sorted runs decide."""
    from data_io.formats import raw_reading
    from data_io.prepare import pipeline

    corpus = _corpus(tmp_path, "a.jsonl", 40_000, seed=4)
    monkeypatch.setattr(raw_reading, "BATCH_BYTES", 32 << 10)
    monkeypatch.setattr(raw_reading, "_READ_BYTES", 32 << 10)
    batches: list[bool] = []
    original_prepare_batch, original_run = pipeline._core.prepare_batch, api.run_new_sources
    direct = [False]

    def counted_batch(*args, **kwargs):
        batches.append(direct[0])
        return original_prepare_batch(*args, **kwargs)

    def counted_run(*args, **kwargs):
        direct[0] = kwargs.get("direct", args[8] if len(args) > 8 else False)
        return original_run(*args, **kwargs)

    monkeypatch.setattr(pipeline._core, "prepare_batch", counted_batch)
    monkeypatch.setattr(api, "run_new_sources", counted_run)
    result = prepare(
        [corpus], tmp_path / "out", tokenizer=str(TOKENIZER), dedup_memory="600KB", progress=False
    )
    online, sorted_runs = batches.count(True), batches.count(False)
    assert sorted_runs > 40 and 0 < online <= sorted_runs // 8, (online, sorted_runs)
    assert result.dedup_runs > 0 and result.duplicates > 0


@pytest.mark.parametrize("bands", [None, 14])
@pytest.mark.parametrize("threads", [1, 2])
def test_the_seen_set_answers_as_one_python_set_on_any_thread_count(
    threads: int, bands: int | None, tmp_path: Path
) -> None:
    """``_core.SeenHashes`` (its shards take a large batch at once on the encoder's threads):
    each record new or not as a Python set taking the records in order says, repeats within a
    batch and across batches, and the kept records sorted as the set's. With ``bands``, the
    records are near-dedup's (band hash, band number), held a band apart."""
    from data_io import _core
    from data_io.prepare.pipeline import encoder_threads

    rng = np.random.default_rng(7)
    distinct = rng.integers(0, 2**64, size=(30_000, 2), dtype=np.uint64)  # every shard's bits
    if bands is not None:  # equal hashes in other bands are other records
        distinct[:, 1] = rng.integers(0, bands, size=len(distinct))
        distinct[1::5, 0] = distinct[0::5, 0][: len(distinct[1::5])]
    records = distinct[rng.integers(0, len(distinct), size=60_000)]
    oracle: set[tuple[int, int]] = set()
    seen = _core.SeenHashes(1 << 30, bands)
    with encoder_threads(threads):
        for start in range(0, len(records), 20_000):  # batches large enough to go in parallel
            batch = np.ascontiguousarray(records[start : start + 20_000])
            expected = []
            for high, low in batch.tolist():
                expected.append((high, low) not in oracle)
                oracle.add((high, low))
            assert seen.first_seen(batch).tolist() == expected
        kept = seen.sorted()
        seen.write_sorted(tmp_path / "kept.u64")
    assert len(seen) == len(oracle)
    assert kept.tolist() == [list(pair) for pair in sorted(oracle)]
    # The kept-hashes file, written shard group by shard group, is the array's bytes.
    assert (tmp_path / "kept.u64").read_bytes() == kept.tobytes()
    with pytest.raises(OutputError, match=r"cannot create .*missing"):
        seen.write_sorted(tmp_path / "missing" / "kept.u64")
