"""Multipack: which sampled rows go into which rank's packed row at every training step.

This is the HRM-Text trainer's "Multipack V2" schedule (formats.md §5), rebuilt with numpy and
the standard library so that it needs no JIT compiler and no torch:

* Rows are consumed in epoch order (the sampler already shuffled them). Each step takes a run of
  consecutive rows and spreads them over ``world_size`` bins of ``capacity`` tokens.
* The run is the longest prefix of a window that the longest-processing-time (LPT) rule can fit:
  the window ends at the first row where the running total reaches ``capacity * world_size``, and
  a binary search over the prefix length keeps the last length whose LPT schedule fits.
* LPT: rows in decreasing length, each into the currently least loaded bin. The bin a row lands
  in decides the rank, so ties are broken exactly as the original's 1-based binary heap does;
  every rank computes the same schedule from the same lengths, with no communication.

Only the per-step work is Python; nothing iterates over the epoch's rows in Python. Feasibility
probes that an O(1) bound already decides skip the LPT simulation (see ``_lpt_fits``).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from data_io.errors import ConfigError, InputError

__all__ = ["MultipackPlanner", "PackingSummary", "StepBounds", "lpt_assign"]


@dataclass(frozen=True)
class StepBounds:
    """One training step: epoch rows ``start .. start + count - 1`` shared by all ranks."""

    index: int
    start: int
    count: int


@dataclass(frozen=True)
class PackingSummary:
    """What a whole epoch's schedule uses and drops (reported, never silent)."""

    steps: int
    rows_used: int
    tokens_used: int
    rows_dropped_last_step: int
    rows_dropped_too_few_rows: int
    tokens_dropped: int
    slots: int  # steps * world_size * capacity: tokens the batches could have held

    @property
    def efficiency(self) -> float:
        """Fraction of the packed tokens that are real tokens rather than padding."""
        return self.tokens_used / self.slots if self.slots else 0.0


def _lpt_fits(desc: list[int], bins: int, capacity: int) -> bool:
    """Whether LPT fits ``desc`` (lengths sorted in decreasing order) into ``bins`` bins.

    Which of several equally loaded bins takes a row does not change the multiset of loads, so
    feasibility can use heapq's tie-breaking; only the final assignment needs the original's.
    """
    # The first ``bins`` rows land one per empty bin (when there are fewer, they trivially fit).
    loads = desc[:bins]
    if len(loads) < bins or loads[0] > capacity:
        return not loads or loads[0] <= capacity
    heapq.heapify(loads)
    for size in desc[bins:]:
        least = loads[0] + size
        if least > capacity:
            return False
        heapq.heapreplace(loads, least)
    return True


def lpt_assign(lengths: np.ndarray, bins: int) -> list[np.ndarray]:
    """Split ``lengths`` over ``bins`` bins by LPT; returns each bin's positions in fill order.

    Rows are taken in decreasing length, equal lengths by decreasing position (a stable ascending
    sort, reversed). The bins form a 1-based min-heap of loads that starts as bin 0..bins-1 in
    heap order; after a row is added to the root the root sinks, swapping with the smaller child
    (the left one on a tie) while it is strictly larger. This is the original's order exactly,
    which decides which rank receives which rows.
    """
    order = np.argsort(lengths, kind="stable")[::-1]
    if bins == 1:
        return [order.astype(np.int64)]
    sizes = lengths[order].tolist()
    heap = [0] * (bins + 1)  # heap[0] is unused: 1-based heap
    owner = [-1, *range(bins)]
    picked: list[list[int]] = [[] for _ in range(bins)]
    for pos, size in zip(order.tolist(), sizes, strict=True):
        heap[1] += size
        picked[owner[1]].append(pos)
        node = 1
        while (node << 1) <= bins:
            child = node << 1
            if child + 1 <= bins and heap[child + 1] < heap[child]:
                child += 1
            if heap[node] <= heap[child]:
                break
            heap[node], heap[child] = heap[child], heap[node]
            owner[node], owner[child] = owner[child], owner[node]
            node = child
    return [np.asarray(p, dtype=np.int64) for p in picked]


class MultipackPlanner:
    """The packing schedule of one epoch, computed step by step as it is consumed.

    ``lengths[i]`` is row i's packed length (``inst_len + resp_len - 1``). ``drop_last`` drops
    the step that reaches the end of the epoch (the original trainer's ``drop_last_batch=True``:
    that step is usually short). A step with fewer rows than ranks always ends the epoch, since
    some rank would get nothing. Step boundaries are remembered, so a worker that skips other
    workers' steps, or a resumed run, never recomputes them.
    """

    def __init__(
        self, lengths: np.ndarray, capacity: int, world_size: int, *, drop_last: bool = True
    ) -> None:
        if capacity < 1:
            raise ConfigError(f"batch_max_length must be at least 1, got {capacity}")
        if world_size < 1:
            raise ConfigError(f"world_size must be at least 1, got {world_size}")
        lengths = np.asarray(lengths, dtype=np.int64)
        if lengths.ndim != 1:
            raise InputError(f"row lengths must be 1-D, got shape {lengths.shape}")
        if lengths.size and int(lengths.min()) < 1:
            row = int(np.argmin(lengths))
            raise InputError(f"row {row} has packed length {int(lengths[row])}; it must be >= 1")
        longest = int(np.argmax(lengths)) if lengths.size else 0
        if lengths.size and int(lengths[longest]) > capacity:
            raise InputError(
                f"row {longest} has {int(lengths[longest])} tokens (inst_len + resp_len - 1), "
                f"more than batch_max_length={capacity}; raise batch_max_length or re-sample "
                "with a smaller context_size"
            )
        self.lengths = lengths
        self.capacity = int(capacity)
        self.world_size = int(world_size)
        self.drop_last = drop_last
        # prefix[i] = tokens in rows 0..i-1: window ends and probe totals are O(1) / O(log n).
        self._prefix = np.concatenate(([0], np.cumsum(lengths)))
        self._starts: list[int] = [0]  # _starts[s] = first row of step s
        self._done_at: int | None = None  # number of steps, once the end has been found

    # -- one step -------------------------------------------------------------------------
    def _step_count(self, start: int) -> int:
        """Rows the step beginning at ``start`` consumes (the binary search of the original)."""
        n_rows = self.lengths.size
        prefix = self._prefix
        base = int(prefix[start])
        target = base + self.capacity * self.world_size
        # First window end whose running total reaches the target; the window includes that row.
        end = min(int(np.searchsorted(prefix, target, side="left")), n_rows)
        window = end - start
        if self.world_size == 1:
            # One bin: "fits" is "total <= capacity", monotone, so the search finds the largest
            # fitting prefix, and the first row always counts.
            fit = int(np.searchsorted(prefix, base + self.capacity, side="right")) - 1 - start
            return max(1, min(fit, window))
        sizes = self.lengths[start:end].tolist()
        running_max = list(accumulate(sizes, max))
        bins, cap = self.world_size, self.capacity
        lo, hi = 1, 1 + window
        while hi - lo > 1:
            mid = (lo + hi) // 2
            total = int(prefix[start + mid]) - base
            if total > bins * cap:
                fits = False  # more tokens than all bins hold
            elif total + running_max[mid - 1] * (bins - 1) <= bins * cap:
                # List scheduling never exceeds total/bins + max*(1 - 1/bins): LPT must fit.
                fits = True
            else:
                fits = _lpt_fits(sorted(sizes[:mid], reverse=True), bins, cap)
            if fits:
                lo = mid
            else:
                hi = mid
        return lo

    def _extend(self, steps_wanted: int) -> None:
        """Compute boundaries until ``steps_wanted`` steps are known or the epoch ends."""
        n_rows = self.lengths.size
        while self._done_at is None and len(self._starts) <= steps_wanted:
            start = self._starts[-1]
            if start >= n_rows:
                self._done_at = len(self._starts) - 1
                break
            count = self._step_count(start)
            nxt = start + count
            if count < self.world_size or (self.drop_last and nxt >= n_rows):
                self._done_at = len(self._starts) - 1
                break
            self._starts.append(nxt)

    # -- public ---------------------------------------------------------------------------
    def step(self, index: int) -> StepBounds | None:
        """Bounds of step ``index``, or None when the epoch has fewer steps."""
        if index < 0:
            raise ConfigError(f"step index must be >= 0, got {index}")
        self._extend(index + 1)
        if index + 1 >= len(self._starts):
            return None
        start = self._starts[index]
        return StepBounds(index, start, self._starts[index + 1] - start)

    def rows_before(self, index: int) -> int:
        """Rows consumed by steps ``0 .. index - 1`` (a prefix of the epoch, since every step
        takes the next run of rows); ``index`` may be the number of steps (the whole schedule)."""
        if index < 0:
            raise ConfigError(f"step index must be >= 0, got {index}")
        self._extend(index)
        if index >= len(self._starts):
            raise ConfigError(
                f"step {index} is past the end of this schedule ({len(self._starts) - 1} steps)"
            )
        return self._starts[index]

    def iter_steps(self, first: int = 0, stride: int = 1) -> Iterator[StepBounds]:
        """Steps ``first, first + stride, ...`` (how DataLoader workers split a rank's share)."""
        index = first
        while (bounds := self.step(index)) is not None:
            yield bounds
            index += stride

    def bins(self, bounds: StepBounds) -> list[np.ndarray]:
        """Every rank's epoch rows for one step, each in packing order."""
        window = self.lengths[bounds.start : bounds.start + bounds.count]
        return [bounds.start + part for part in lpt_assign(window, self.world_size)]

    def num_steps(self) -> int:
        """Steps in the whole epoch (computes every boundary)."""
        self._extend(self.lengths.size + 1)
        assert self._done_at is not None
        return self._done_at

    def summary(self) -> PackingSummary:
        """Rows and tokens used and dropped by the whole schedule, by reason."""
        steps = self.num_steps()
        used_rows = self._starts[steps]
        n_rows = self.lengths.size
        left = n_rows - used_rows
        # What follows the last kept step is either the dropped last step or a too-short tail.
        last_step = 0
        if left and self.drop_last:
            count = self._step_count(used_rows)
            if count >= self.world_size and used_rows + count >= n_rows:
                last_step = left
        return PackingSummary(
            steps=steps,
            rows_used=used_rows,
            tokens_used=int(self._prefix[used_rows]),
            rows_dropped_last_step=last_step,
            rows_dropped_too_few_rows=left - last_step,
            tokens_dropped=int(self._prefix[n_rows] - self._prefix[used_rows]),
            slots=steps * self.world_size * self.capacity,
        )
