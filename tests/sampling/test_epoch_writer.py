"""The epoch writer thread and the in-place final shuffle it is fed by."""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from data_io.errors import OutputError
from data_io.sampling import epoch_writer, parse_overrides, sample
from data_io.sampling.algorithm import EpochArrays, EpochSampler, Rows
from data_io.sampling.epoch_writer import EpochWriter, write_npy
from data_io.sampling.pool import npy_header
from data_io.sampling.synthetic import random_task, write_corpus

FIELDS = ("inst_start", "inst_len", "resp_start", "resp_len")


def _state(rng: np.random.Generator) -> dict:
    state = rng.bit_generator.state
    return {key: np.asarray(value).tolist() for key, value in state["state"].items()} | {
        key: np.asarray(value).tolist() for key, value in state.items() if key != "state"
    }


@pytest.mark.parametrize("n", [0, 1, 2, 3, 17, 1000, 65_537])
@pytest.mark.parametrize("seed", [0, 5])
def test_in_place_shuffle_is_permutation_then_gather(n: int, seed: int) -> None:
    """What EpochSampler relies on: ``rng.shuffle(x)`` == ``x[rng.permutation(len(x))]``,
    with the generator left in the same state (so later epochs draw the same)."""
    values = np.random.default_rng(99).integers(0, 10**12, n)
    by_permutation = np.random.Generator(np.random.Philox(seed))
    in_place = np.random.Generator(np.random.Philox(seed))
    by_permutation.permutation(7)  # start both mid-stream, with a half-used 64-bit draw
    in_place.permutation(7)
    expected = values[by_permutation.permutation(n)]
    shuffled = values.copy()
    in_place.shuffle(shuffled)
    assert shuffled.tolist() == expected.tolist()
    assert _state(in_place) == _state(by_permutation)


def _rows(n: int) -> Rows:
    rng = np.random.default_rng(3)
    inst_start = np.arange(n, dtype=np.int64) * 1000
    inst_len = rng.integers(2, 50, n)
    return Rows(
        inst_start=inst_start,
        inst_len=inst_len,
        resp_start=inst_start + inst_len,
        resp_len=rng.integers(1, 60, n),
        task_base=np.zeros(1, dtype=np.int64),
        task_rows=np.array([n], dtype=np.int64),
    )


def test_write_npy_bytes_equal_np_save(tmp_path: Path) -> None:
    array = np.random.default_rng(0).integers(-(2**40), 2**40, 1234)
    write_npy(tmp_path / "a.npy", npy_header(np.dtype("<i8"), len(array)), array)
    np.save(tmp_path / "b.npy", array)
    assert (tmp_path / "a.npy").read_bytes() == (tmp_path / "b.npy").read_bytes()
    empty = np.zeros(0, dtype=np.int64)
    write_npy(tmp_path / "c.npy", npy_header(np.dtype("<i8"), 0), empty)
    np.save(tmp_path / "d.npy", empty)
    assert (tmp_path / "c.npy").read_bytes() == (tmp_path / "d.npy").read_bytes()


def test_writer_gathers_each_epoch_and_recycles_buffers(tmp_path: Path) -> None:
    rows = _rows(50)
    per_epoch = 30
    epochs = 6  # more epochs than buffers: each buffer is used several times
    expected = []
    with ThreadPoolExecutor(max_workers=1) as executor:
        writer = EpochWriter(tmp_path, rows, per_epoch, executor, in_flight=2)
        seen_buffers = set()
        for epoch in range(epochs):
            ids = writer.buffer()
            seen_buffers.add(id(ids))
            ids[:] = np.random.default_rng(epoch).integers(0, rows.total, per_epoch)
            expected.append(ids.copy())  # the writer may reuse ``ids`` after writing
            writer.submit(epoch, ids)
        writer.wait()
    assert len(seen_buffers) == 2
    for epoch, ids in enumerate(expected):
        for name in FIELDS:
            written = np.load(tmp_path / f"epoch_{epoch}" / f"{name}.npy")
            assert written.dtype == np.dtype("<i8")
            assert written.tolist() == getattr(rows, name)[ids].tolist()


def test_writer_failure_reaches_the_caller_instead_of_a_hang(tmp_path: Path) -> None:
    rows = _rows(10)
    with ThreadPoolExecutor(max_workers=1) as executor:
        writer = EpochWriter(tmp_path / "missing", rows, 5, executor, in_flight=1)
        ids = writer.buffer()
        ids[:] = 0
        writer.submit(0, ids)  # its folder's parent does not exist: mkdir fails
        with pytest.raises(FileNotFoundError):
            writer.buffer()  # would wait forever for the buffer if the error were lost
        with pytest.raises(FileNotFoundError):
            writer.wait()


def test_sampler_fills_the_given_buffer_and_checks_it() -> None:
    from data_io.sampling.algorithm import filter_tasks
    from data_io.sampling.tasks import _DEFAULT_RULE, Task, TokenFile

    lengths = np.full(12, 3, dtype=np.int64)
    starts = np.arange(12, dtype=np.int64) * 6
    token_file = TokenFile(Path("unused"), np.dtype("<u2"), 72, 128)
    task = Task("t", _DEFAULT_RULE, False, starts, lengths, starts + 3, lengths, token_file)
    filtered = filter_tasks([task], context_size=100, min_resp_length=2, short_truncated="drop")
    sampler = EpochSampler(filtered, seed=1)
    buffer = np.full(12, -1, dtype=np.int64)
    assert sampler.next_epoch(out=buffer) is buffer
    assert sorted(buffer.tolist()) == list(range(12))
    with pytest.raises(ValueError, match="int64 of length 12"):
        sampler.next_epoch(out=np.zeros(11, dtype=np.int64))
    with pytest.raises(ValueError, match="int64 of length 12"):
        sampler.next_epoch(out=np.zeros(12, dtype=np.int32))


def test_epoch_write_failure_leaves_no_output(tmp_path: Path, monkeypatch) -> None:
    rng = np.random.default_rng(0)
    corpus = write_corpus(tmp_path / "tok", {"a.jsonl": random_task(rng, 30)}, vocab_size=300)
    calls = {"n": 0}
    real = epoch_writer.write_npy

    def failing_write(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 6:  # epoch 1, second array
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(epoch_writer, "write_npy", failing_write)
    (tmp_path / "none.yaml").write_text("[]\n")
    config = parse_overrides(
        [
            f"tokenized_path={corpus}",
            f"output_path={tmp_path / 'out'}",
            f"prefix_config_path={tmp_path / 'none.yaml'}",
            "epochs=4",
            "plot=false",
        ]
    )
    with pytest.raises(OutputError, match="No space left"):
        sample(config, stdout=io.StringIO(), progress=False)
    assert not (tmp_path / "out").exists()
    assert [entry.name for entry in tmp_path.iterdir() if entry.name.startswith(".out")] == []


def test_coverage_counted_before_the_shuffle_equals_bincount_of_the_epoch() -> None:
    """``next_epoch(coverage=...)`` counts each row as often as the epoch holds it (repeats,
    caps walking through a permutation across epochs), and does not change the draws."""
    from data_io.formats.prefix_config import PrefixRule
    from data_io.sampling.algorithm import filter_tasks
    from data_io.sampling.tasks import Task, TokenFile

    tasks = []
    for index, (rows, rule) in enumerate(
        [(7, PrefixRule("a", repeat=3)), (20, PrefixRule("b", max_per_file=6)), (5, None)]
    ):
        lengths = np.full(rows, 3, dtype=np.int64)
        starts = np.arange(rows, dtype=np.int64) * 6
        token_file = TokenFile(Path("unused"), np.dtype("<u2"), rows * 6, 128)
        tasks.append(
            Task(f"{index}", rule or PrefixRule(""), rule is not None, starts, lengths,
                 starts + 3, lengths, token_file)
        )  # fmt: skip
    filtered = filter_tasks(tasks, context_size=100, min_resp_length=2, short_truncated="drop")
    counted, plain = EpochSampler(filtered, seed=4), EpochSampler(filtered, seed=4)
    coverage = np.zeros(32, dtype=np.int64)
    expected = np.zeros(32, dtype=np.int64)
    for _epoch in range(5):
        ids = counted.next_epoch(coverage=coverage)
        assert ids.tolist() == plain.next_epoch().tolist()
        expected += np.bincount(ids, minlength=32)
        assert coverage.tolist() == expected.tolist()
    assert coverage[:7].tolist() == [15] * 7  # repeat 3, five epochs
    assert coverage[7:27].sum() == 30 and coverage[7:27].max() - coverage[7:27].min() <= 1


@pytest.mark.parametrize("count", [0, 1, 40, 100_000])
def test_gather_matches_numpy_take(count: int) -> None:
    rows = _rows(count)
    row_ids = np.random.default_rng(1).integers(0, max(count, 1), 3 * count)
    arrays = EpochArrays.gather(rows, row_ids)
    for name, gathered in arrays.items():
        np.testing.assert_array_equal(gathered, np.take(getattr(rows, name), row_ids))


def test_gather_refuses_ids_outside_the_rows() -> None:
    rows = _rows(10)
    for bad in (-1, 10):
        with pytest.raises(ValueError, match="outside the 10 rows"):
            EpochArrays.gather(rows, np.array([0, bad, 3], dtype=np.int64))
