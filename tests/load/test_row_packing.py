"""Bin plans (sequential, multipack), their on-disk cache, and packed TokenizedRowsDataset items.

Plans are checked against independent oracles: plain-Python next-fit and first-fit-decreasing
loops, and the invariants every plan must keep (each row in exactly one bin, no bin over the
length, sequential order kept, multipack never needing more bins than sequential).
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import torch

import data_io.load.datasets.tokenized_rows as tokenized_rows
from data_io.errors import ConfigError, InputError
from data_io.load.datasets.tokenized_rows import TokenizedRowsDataset
from data_io.load.packing.row_bins import (
    plan_bins,
    plan_multipack,
    plan_sequential,
    plan_unpacked,
    prepare_plan,
)
from tests.load.rows_fixture import random_rows, write_rows


def bins_of(plan) -> list[list[int]]:
    return [plan.bin(b).tolist() for b in range(len(plan))]


def next_fit_oracle(order: list[int], lengths: list[int], capacity: int) -> list[list[int]]:
    bins: list[list[int]] = []
    load = capacity + 1
    for row in order:
        if load + lengths[row] > capacity:
            bins.append([])
            load = 0
        bins[-1].append(row)
        load += lengths[row]
    return bins


def ffd_oracle(order: list[int], lengths: list[int], capacity: int) -> list[list[int]]:
    """First fit decreasing by scanning every bin (quadratic, obviously right)."""
    rows = sorted(order, key=lambda r: -lengths[r])  # sorted() is stable: ties keep order
    bins: list[list[int]] = []
    loads: list[int] = []
    for row in rows:
        for b, load in enumerate(loads):
            if load + lengths[row] <= capacity:
                bins[b].append(row)
                loads[b] += lengths[row]
                break
        else:
            bins.append([row])
            loads.append(lengths[row])
    return bins


def check_invariants(plan, order: np.ndarray, lengths: np.ndarray, capacity: int) -> None:
    flat = plan.rows.tolist()
    assert sorted(flat) == sorted(order.tolist())  # every row exactly once
    assert plan.offsets[0] == 0 and plan.offsets[-1] == len(flat)
    for rows in bins_of(plan):
        assert rows, "no empty bin"
        assert int(lengths[rows].sum()) <= capacity


@pytest.mark.parametrize("seed", range(12))
def test_plans_against_oracles(seed: int) -> None:
    rng = np.random.default_rng(seed)
    capacity = int(rng.integers(8, 200))
    n = int(rng.integers(1, 400))
    lengths = rng.integers(1, capacity + 1, n)
    if seed % 3 == 0:  # mostly short rows, the usual case for packing
        lengths = np.minimum(lengths, rng.integers(1, 20, n))
    order = rng.permutation(n)

    sequential = plan_sequential(order, lengths, capacity)
    check_invariants(sequential, order, lengths, capacity)
    assert sequential.rows.tolist() == order.tolist()  # order kept
    assert bins_of(sequential) == next_fit_oracle(order.tolist(), lengths.tolist(), capacity)

    multipack = plan_multipack(order, lengths, capacity, seed)
    check_invariants(multipack, order, lengths, capacity)
    assert len(multipack) <= len(sequential)
    assert len(multipack) >= -(-int(lengths.sum()) // capacity)  # the volume lower bound
    expected = ffd_oracle(order.tolist(), lengths.tolist(), capacity)
    if len(expected) < len(sequential):
        # Same bins as the oracle (as sets of rows, in fill order); only their order is shuffled.
        assert sorted(bins_of(multipack)) == sorted(expected)
    else:
        assert bins_of(multipack) == bins_of(sequential)


def test_multipack_fills_better_on_typical_data() -> None:
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 600, 5000)
    order = np.arange(5000)
    sequential = plan_sequential(order, lengths, 1024)
    multipack = plan_multipack(order, lengths, 1024, 0)
    volume = -(-int(lengths.sum()) // 1024)
    assert len(multipack) < len(sequential)
    assert len(multipack) <= volume * 1.02  # first-fit-decreasing is near optimal here


def test_multipack_never_worse_than_sequential_on_a_bad_case_for_ffd() -> None:
    # Next-fit packs this order perfectly (2 full bins); FFD fills 3+3+3 first and needs 3.
    lengths = np.array([3, 3, 2, 2, 2, 3, 3, 2])
    order = np.arange(lengths.size)
    sequential = plan_sequential(order, lengths, 10)
    multipack = plan_multipack(order, lengths, 10, 0)
    assert len(sequential) == 2 and len(multipack) == 2


def test_multipack_bin_order_follows_the_seed() -> None:
    rng = np.random.default_rng(1)
    lengths = rng.integers(1, 50, 300)
    order = rng.permutation(300)
    one = bins_of(plan_multipack(order, lengths, 64, 1))
    assert one == bins_of(plan_multipack(order, lengths, 64, 1))
    two = bins_of(plan_multipack(order, lengths, 64, 2))
    assert one != two and sorted(one) == sorted(two)


def test_unpacked_plan_and_plan_errors() -> None:
    plan = plan_unpacked(np.array([2, 0, 1]))
    assert bins_of(plan) == [[2], [0], [1]]
    lengths = np.array([3, 9, 2])

    def describe(row: int) -> str:
        return f"row #{row}"

    with pytest.raises(InputError, match=r"row #1 has 9 tokens, more than .*=8; set max_seq_len"):
        plan_bins("sequential", np.arange(3), lengths, 8, 0, describe)
    with pytest.raises(InputError, match=r"row #2 has no tokens"):
        plan_bins("multipack", np.arange(3), np.array([3, 2, 0]), 8, 0, describe)
    with pytest.raises(ConfigError, match="must be one of sequential, multipack"):
        plan_bins("ffd", np.arange(3), lengths, 8, 0, describe)
    with pytest.raises(ConfigError, match="needs sample_packing_sequence_len"):
        plan_bins("multipack", np.arange(3), lengths, None, 0, describe)
    assert len(plan_sequential(np.arange(0), np.zeros(0, dtype=np.int64), 8)) == 0


# -- the cache --------------------------------------------------------------------------------
def test_prepare_plan_writes_atomically_and_reuses(tmp_path) -> None:
    calls = []

    def build():
        calls.append(1)
        meta = {"note": "x", "longest": 1, "tokens": 2, "bins": 2, "sources": []}
        return plan_unpacked(np.array([1, 0])), meta

    plan, meta, folder, reused = prepare_plan(tmp_path / "p", "abc", 2, build)
    assert not reused and folder == tmp_path / "p" / "abc" and meta["note"] == "x"
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == ["abc"]  # no temporary left
    again, meta2, _, reused2 = prepare_plan(tmp_path / "p", "abc", 2, build)
    assert reused2 and calls == [1] and bins_of(again) == bins_of(plan) and meta2["note"] == "x"
    with pytest.raises(InputError, match=r"abc: cached bin plan is unusable .* delete the folder"):
        prepare_plan(tmp_path / "p", "abc", 1, build)  # row ids beyond the input's rows
    (folder / "bin_offsets.npy").write_bytes(b"garbage")
    with pytest.raises(InputError, match="cached bin plan is unusable"):
        prepare_plan(tmp_path / "p", "abc", 2, build)
    _, _, none, _ = prepare_plan(None, "abc", 2, build)
    assert none is None and len(calls) == 2


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        # A row listed twice is another one lost: a plan holds each input row once.
        (lambda f: np.save(f / "bin_rows.npy", np.array([0, 0, 2, 3])), "exactly once"),
        (lambda f: np.save(f / "bin_rows.npy", np.arange(4.0)), "arrays disagree"),
        (lambda f: (f / "plan.json").write_text('{"version": 1}'), "lacks its longest, tokens"),
        (
            lambda f: (f / "plan.json").write_text(
                json.dumps({"version": 1, "longest": 1, "tokens": 4, "bins": 9, "sources": []})
            ),
            "arrays disagree",
        ),
    ],
)
def test_a_damaged_cached_plan_is_refused_not_reused(tmp_path, damage, said: str) -> None:
    """A cached plan that skips or repeats rows, or whose plan.json lost the counts the
    dataset's summary reads (a KeyError in `data_io pack`), is refused with what to do."""

    def build():
        meta = {"longest": 1, "tokens": 4, "bins": 4, "sources": []}
        return plan_unpacked(np.array([3, 1, 0, 2])), meta

    _, _, folder, _ = prepare_plan(tmp_path / "p", "abc", 4, build)
    damage(folder)
    with pytest.raises(InputError, match=rf"abc: cached bin plan is unusable \(.*{said}.*delete"):
        prepare_plan(tmp_path / "p", "abc", 4, build)


def packed(tmp_path, sources, **options) -> TokenizedRowsDataset:
    options.setdefault("dataset_prepared_path", tmp_path / "prepared")
    options.setdefault("sample_packing_method", "sequential")
    options.setdefault("sample_packing_sequence_len", 64)
    return TokenizedRowsDataset(sources, cache_dir=str(tmp_path / "hf"), **options)


def test_dataset_reuses_the_cache_without_reading_tokens(tmp_path, monkeypatch) -> None:
    path = write_rows(tmp_path / "a.parquet", random_rows(1, 80, longest=40))
    first = packed(tmp_path, [str(path)], sample_packing_method="multipack")
    assert not first.cache_reused
    monkeypatch.setattr(tokenized_rows, "check_rows", lambda *a: pytest.fail("re-validated"))
    second = packed(tmp_path, [str(path)], sample_packing_method="multipack")
    assert second.cache_reused and second.summary() | {"cache_reused": False} == first.summary()
    assert all(
        torch.equal(first[i]["input_ids"], second[i]["input_ids"]) for i in range(len(first))
    )


def test_cache_invalidation(tmp_path) -> None:
    path = write_rows(tmp_path / "a.jsonl", random_rows(1, 50, longest=40))
    base = packed(tmp_path, [str(path)])
    variants = [
        packed(tmp_path, [str(path)], seed=1),
        packed(tmp_path, [str(path)], sample_packing_sequence_len=80),
        packed(tmp_path, [str(path)], sample_packing_method="multipack"),
        packed(tmp_path, [{"path": str(path), "max_seq_len": 20}]),
        packed(tmp_path, [str(path)], shuffle=False),
    ]
    write_rows(path, random_rows(2, 50, longest=40))  # new content: a new plan
    variants.append(packed(tmp_path, [str(path)]))
    folders = {base.cache_folder, *(v.cache_folder for v in variants)}
    assert len(folders) == 7 and not any(v.cache_reused for v in variants)


def test_packed_items_against_the_rows(tmp_path) -> None:
    rows = random_rows(5, 120, longest=40)
    for r in rows:
        r["logprobs"] = [-0.5] * len(r["input_ids"])
    path = write_rows(tmp_path / "rl.parquet", rows)
    columns = ["input_ids", "labels", "logprobs"]
    for method in ("sequential", "multipack"):
        ds = packed(
            tmp_path,
            [{"path": str(path), "select_columns": columns, "max_seq_len": 30}],
            sample_packing_method=method,
        )
        seen = []
        for i in range(len(ds)):
            item = ds[i]
            cu = item["cu_seqlens"].tolist()
            assert item["cu_seqlens"].dtype == torch.int32 and cu[0] == 0 and cu[-1] == 64
            assert all(v.shape == (64,) for k, v in item.items() if k != "cu_seqlens")
            tags = {r["input_ids"][0]: r for r in rows}
            for lo, hi in itertools.pairwise(cu):
                ids = item["input_ids"][lo:hi].tolist()
                assert item["position_ids"][lo:hi].tolist() == list(range(hi - lo))
                if ids[0] not in tags:  # the padding segment, always last
                    assert hi == 64 and not any(ids)
                    assert set(item["labels"][lo:hi].tolist()) == {-100}
                    continue
                row = tags[ids[0]]
                seen.append(ids[0])
                assert ids == row["input_ids"][:30]
                # the first label is masked: after the shift it would cross a row boundary
                assert item["labels"][lo:hi].tolist() == [-100, *row["labels"][1:30]]
                assert item["logprobs"][lo:hi].tolist() == [-0.5] * (hi - lo)
        assert sorted(seen) == sorted(tags)
        summary = ds.summary()
        assert summary["items"] == len(ds) and summary["truncated_rows"] > 0
        tokens = sum(min(len(r["input_ids"]), 30) for r in rows)
        assert summary["fill_ratio"] == pytest.approx(tokens / (len(ds) * 64), abs=1e-6)


def test_sequential_items_keep_the_shuffled_order(tmp_path) -> None:
    rows = random_rows(6, 60, longest=20)
    path = write_rows(tmp_path / "a.jsonl", rows)
    unpacked = TokenizedRowsDataset(
        [str(path)], dataset_prepared_path=None, seed=9, cache_dir=str(tmp_path / "hf")
    )
    order = [unpacked[i]["input_ids"][0].item() for i in range(len(unpacked))]
    ds = packed(tmp_path, [str(path)], seed=9)
    in_bins = []
    for i in range(len(ds)):
        item = ds[i]
        in_bins += [item["input_ids"][s].item() for s in item["cu_seqlens"][:-1].tolist()]
    assert [t for t in in_bins if t != 0] == order


def test_row_longer_than_the_bin_is_named(tmp_path) -> None:
    rows = random_rows(1, 10, longest=10)
    rows[7] = {"input_ids": list(range(1, 81)), "labels": list(range(1, 81))}
    path = write_rows(tmp_path / "a.jsonl", rows)
    with pytest.raises(InputError, match=r"source 'long' row 7 has 80 tokens, more than"):
        packed(tmp_path, [{"path": str(path), "metrics_name": "long"}], shuffle=False)
    ok = packed(tmp_path, [{"path": str(path), "metrics_name": "long", "max_seq_len": 64}])
    assert ok.summary()["truncated_tokens"] == 16


def test_a_killed_runs_plan_folder_is_removed_by_the_next_one(tmp_path, capsys) -> None:
    """The temporary of a process that is gone goes (said on stderr); this process's stays."""
    import os

    from data_io.load.packing.row_bins import BinPlan, _write
    from data_io.util.stale import temporary_prefix

    target = tmp_path / "cache" / "abc123"
    target.parent.mkdir()
    dead = target.parent / ".abc123.tmp-999999999-x1"  # no such pid
    dead.mkdir()
    (dead / "bin_rows.npy").write_bytes(b"0" * 4096)
    mine = target.parent / f"{temporary_prefix('abc123')}x2"
    mine.mkdir()
    _write(target, BinPlan(np.arange(4, dtype=np.int64), np.array([0, 2, 4])), {"bins": 2})
    assert not dead.exists() and mine.exists() and (target / "plan.json").is_file()
    err = capsys.readouterr().err
    assert "removed 1 packing plan folder left by a killed run (pid 999999999, 4.0 KiB)" in err
    assert str(os.getpid()) not in err
