"""Bin plans for tokenized rows: which rows go into which packed item, cached on disk.

A plan is two flat int64 arrays: ``rows`` (row ids, bin after bin) and ``offsets`` (bin ``b`` is
``rows[offsets[b]:offsets[b + 1]]``), so it is O(rows) memory whatever the number of bins, and two
``.npy`` files on disk. Row ids index the concatenation of the sources.

* ``sequential``: rows in the given order (the seeded shuffle of the concatenation); a new bin
  starts when the next row does not fit. Bins keep the order, so a bin is a run of consecutive
  rows. One ``searchsorted`` over the prefix sums per bin: O(bins · log rows).
* ``multipack``: first-fit-decreasing (longest rows first, each into the first bin with room;
  equal lengths keep their given order), then the bins are shuffled with the seed so that
  training does not see every long row first. When the sequential plan of the same rows needs
  no more bins (rare, but first-fit-decreasing is not optimal), that plan is used instead:
  multipack is never worse than sequential. ``MultipackPlanner`` in ``packing.py`` balances a
  fixed number of ranks per step (LPT) rather than filling bins of a capacity, so only the idea
  is shared, not the code.
* ``None``: one row per item, in the given order.

Rows longer than the bin are an error naming the row (set ``max_seq_len`` on its source to cut
it): a bin never silently drops tokens.

``prepare_plan`` caches a plan under ``<dataset_prepared_path>/<digest>/`` (the digest covers the
inputs' fingerprints and every option), writing to a temporary folder that is renamed into place
when complete, so a folder there is always whole; the next run with the same digest reads it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from data_io.errors import ConfigError, InputError, OutputError
from data_io.util.fs import publish_mode
from data_io.util.stale import remove_dead_siblings, temporary_prefix

__all__ = [
    "MAX_SEQUENCE_LEN",
    "METHODS",
    "BinPlan",
    "check_sequence_len",
    "plan_bins",
    "plan_multipack",
    "plan_sequential",
    "plan_unpacked",
    "prepare_plan",
]

METHODS = ("sequential", "multipack")
_PLAN_VERSION = 1
_PLAN_FILES = ("bin_rows.npy", "bin_offsets.npy", "plan.json")
# The longest bin: an item's cu_seqlens are int32 (as flash-attn's varlen kernels take them), and
# every item is allocated whole, 8 bytes a token per column.
MAX_SEQUENCE_LEN = 2**31 - 1


def check_sequence_len(value: Any, key: str = "sample_packing_sequence_len") -> None:
    """Refuse a bin length past ``MAX_SEQUENCE_LEN`` (a typo such as 10**12 would otherwise pass
    ``pack`` and fail allocating the first item); ``key`` names it as the caller's config does."""
    if value is not None and not isinstance(value, bool) and value > MAX_SEQUENCE_LEN:
        raise ConfigError(
            f"{key}={value} is more than {MAX_SEQUENCE_LEN} (2**31 - 1), the longest bin: items "
            "are allocated whole and their cu_seqlens are int32; set it to the model's context "
            "length (e.g. 4096)"
        )


@dataclass(frozen=True)
class BinPlan:
    """Row ids per bin as flat arrays (see the module docstring)."""

    rows: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return int(self.offsets.shape[0]) - 1

    def bin(self, index: int) -> np.ndarray:
        return self.rows[int(self.offsets[index]) : int(self.offsets[index + 1])]


def _check_lengths(lengths: np.ndarray, capacity: int, describe: Callable[[int], str]) -> None:
    if lengths.size and int(lengths.min()) < 1:
        row = int(np.argmin(lengths))
        raise InputError(f"{describe(row)} has no tokens; a row needs at least one")
    if lengths.size and int(lengths.max()) > capacity:
        row = int(np.argmax(lengths))
        raise InputError(
            f"{describe(row)} has {int(lengths[row])} tokens, more than "
            f"sample_packing_sequence_len={capacity}; set max_seq_len <= {capacity} on its "
            "source to truncate such rows, or raise sample_packing_sequence_len"
        )


def plan_unpacked(order: np.ndarray) -> BinPlan:
    order = np.asarray(order, dtype=np.int64)
    return BinPlan(order, np.arange(order.shape[0] + 1, dtype=np.int64))


def plan_sequential(order: np.ndarray, lengths: np.ndarray, capacity: int) -> BinPlan:
    """Next-fit in ``order``: ``lengths[order[k]]`` is the k-th row's length."""
    order = np.asarray(order, dtype=np.int64)
    prefix = np.concatenate(([0], np.cumsum(lengths[order])))
    starts = [0]
    while starts[-1] < order.shape[0]:
        start = starts[-1]
        # Last k with prefix[k] - prefix[start] <= capacity; rows fit (checked), so k > start.
        starts.append(int(np.searchsorted(prefix, prefix[start] + capacity, side="right")) - 1)
    return BinPlan(order, np.asarray(starts, dtype=np.int64))


def _first_fit(sizes: list[int], capacity: int, max_bins: int) -> np.ndarray:
    """Bin of each size, first fit in the given order (a max-tree over the bins' room).

    Unopened bins sit right of the opened ones with full room, so "leftmost bin with room" opens
    a new bin exactly when no open one fits: no separate bookkeeping.
    """
    width = 1
    while width < max_bins:
        width *= 2
    room = [capacity] * (2 * width)
    where = np.empty(len(sizes), dtype=np.int64)
    for k, size in enumerate(sizes):
        node = 1
        while node < width:
            node = 2 * node if room[2 * node] >= size else 2 * node + 1
        where[k] = node - width
        room[node] -= size
        node //= 2
        while node:
            room[node] = max(room[2 * node], room[2 * node + 1])
            node //= 2
    return where


def plan_multipack(order: np.ndarray, lengths: np.ndarray, capacity: int, seed: int) -> BinPlan:
    """First-fit-decreasing, bins shuffled with ``seed``; never more bins than sequential."""
    order = np.asarray(order, dtype=np.int64)
    sequential = plan_sequential(order, lengths, capacity)
    if order.shape[0] == 0:
        return sequential
    sizes = lengths[order]
    # Decreasing length; a stable sort of the negated lengths keeps equal rows in order.
    by_size = np.argsort(-sizes, kind="stable")
    # First fit leaves at most one bin half empty, so it opens fewer than 2·total/cap + 1 bins.
    bound = min(order.shape[0], 2 * (int(sizes.sum()) + capacity - 1) // capacity + 1)
    bin_of = _first_fit(sizes[by_size].tolist(), capacity, bound)
    n_bins = int(bin_of.max()) + 1
    if n_bins >= len(sequential):
        return sequential
    grouped = np.argsort(bin_of, kind="stable")  # rows of bin 0, bin 1, ... in fill order
    rows = order[by_size][grouped]
    counts = np.bincount(bin_of, minlength=n_bins)
    offsets = np.concatenate(([0], np.cumsum(counts)))
    shuffled = np.random.default_rng(seed).permutation(n_bins)
    pieces = [rows[offsets[b] : offsets[b + 1]] for b in shuffled.tolist()]
    new_offsets = np.concatenate(([0], np.cumsum(counts[shuffled])))
    return BinPlan(np.concatenate(pieces).astype(np.int64), new_offsets.astype(np.int64))


def plan_bins(
    method: str | None,
    order: np.ndarray,
    lengths: np.ndarray,
    capacity: int | None,
    seed: int,
    describe: Callable[[int], str],
) -> BinPlan:
    """The plan for ``method``; ``describe(row)`` names a row id in error messages."""
    if method is None:
        return plan_unpacked(order)
    if method not in METHODS:
        raise ConfigError(
            f"sample_packing_method must be one of {', '.join(METHODS)} or null, got {method!r}"
        )
    if capacity is None:
        raise ConfigError("sample_packing_method needs sample_packing_sequence_len (bin length)")
    lengths = np.asarray(lengths, dtype=np.int64)
    _check_lengths(lengths, capacity, describe)
    if method == "sequential":
        return plan_sequential(order, lengths, capacity)
    return plan_multipack(order, lengths, capacity, seed)


# -- the on-disk cache -----------------------------------------------------------------------
def read_cached_plan(folder: Path, n_rows: int) -> tuple[BinPlan, dict[str, Any]]:
    """A cached plan of ``n_rows`` input rows, checked as the loader uses it; an InputError
    saying why it cannot be used (``data_io inspect`` reports the same)."""

    def broken(why: str) -> InputError:
        return InputError(
            f"{folder}: cached bin plan is unusable ({why}); delete the folder and it is rebuilt"
        )

    name = "bin_rows.npy"
    try:
        rows = np.load(folder / name, allow_pickle=False)
        name = "bin_offsets.npy"
        offsets = np.load(folder / name, allow_pickle=False)
        name = "plan.json"
        meta = json.loads((folder / name).read_text(encoding="utf-8"))
    except (OSError, ValueError, EOFError) as err:  # EOFError: an empty array file
        raise broken(f"{name}: {err}") from err
    if not isinstance(meta, dict) or meta.get("version") != _PLAN_VERSION:
        raise broken(f"plan.json has no version {_PLAN_VERSION}")
    # What the dataset's length and summary read from it.
    counts = [meta.get(key) for key in ("longest", "tokens", "bins")]
    if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts) or (
        not isinstance(meta.get("sources"), list)
    ):
        raise broken("plan.json lacks its longest, tokens, bins or sources")
    if (
        rows.ndim != 1
        or offsets.ndim != 1
        or rows.dtype.kind not in "iu"
        or offsets.dtype.kind not in "iu"
        or offsets.shape[0] < 1
        or offsets[0] != 0
        or offsets[-1] != rows.shape[0]
        or np.any(np.diff(offsets) < 0)
        or (rows.size and (rows.min() < 0 or rows.max() >= n_rows))
        or offsets.shape[0] - 1 != meta["bins"]
    ):
        raise broken(f"arrays disagree with each other or with the {n_rows} input rows")
    # Every plan holds each input row exactly once: a row listed twice is one lost elsewhere.
    if rows.shape[0] != n_rows or np.any(np.bincount(rows, minlength=n_rows) != 1):
        raise broken(f"bin_rows.npy does not hold each of the {n_rows} input rows exactly once")
    return BinPlan(rows.astype(np.int64), offsets.astype(np.int64)), meta


def _write(folder: Path, plan: BinPlan, meta: dict[str, Any]) -> None:
    """Write into a temporary sibling and rename it to ``folder`` once every file is complete."""
    parent = folder.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        remove_dead_siblings(parent, folder.name, "packing plan")  # of killed runs
        tmp = Path(tempfile.mkdtemp(prefix=temporary_prefix(folder.name), dir=parent))
        publish_mode(tmp)
    except OSError as err:
        raise OutputError(
            f"{parent}: cannot create the plan cache ({err}); set dataset_prepared_path to a "
            "writable folder"
        ) from err
    try:
        np.save(tmp / "bin_rows.npy", plan.rows)
        np.save(tmp / "bin_offsets.npy", plan.offsets)
        (tmp / "plan.json").write_text(json.dumps({"version": _PLAN_VERSION, **meta}, indent=1))
        try:
            os.rename(tmp, folder)
        except OSError:
            # Another process prepared the same digest meanwhile: its plan is the same one.
            if not (folder / "plan.json").is_file():
                raise
    except OSError as err:
        raise OutputError(
            f"{folder}: cannot write the plan cache ({err}); check the space"
        ) from err
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def prepare_plan(
    prepared_path: str | os.PathLike[str] | None,
    digest: str,
    n_rows: int,
    build: Callable[[], tuple[BinPlan, dict[str, Any]]],
) -> tuple[BinPlan, dict[str, Any], Path | None, bool]:
    """The cached plan for ``digest`` if there is one, else ``build()`` stored there.

    Returns the plan, its JSON metadata, the cache folder (None without ``prepared_path``) and
    whether it was reused.
    """
    if prepared_path is None:
        plan, meta = build()
        return plan, meta, None, False
    folder = Path(prepared_path) / digest
    if (folder / "plan.json").is_file():
        plan, meta = read_cached_plan(folder, n_rows)
        return plan, meta, folder, True
    plan, meta = build()
    _write(folder, plan, meta)
    return plan, meta, folder, False
