"""The exact epoch algorithm of formats.md §4, steps 1–6, vectorised per task.

For the same inputs and seed the epoch arrays are element for element those of the original
sampler: one ``Philox(seed)`` generator for the whole run, the same ``permutation`` calls in
the same order (a task's permutation is drawn lazily, only when a row must be taken from it),
the same per-task cursor carried across epochs, one final permutation per epoch. Python loops
run per task and per permutation draw, never per row.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from data_io import _core
from data_io.sampling.rng import PhiloxShuffler
from data_io.sampling.tasks import Task

# Why a row is dropped, in the order the checks are made (a row counts under the first).
DROP_SHORT_RESPONSE = "response shorter than min_resp_length"
DROP_INSTRUCTION_FILLS_CONTEXT = "instruction fills the context (truncate mode)"
DROP_TOO_LONG = "longer than the context (drop mode)"
DROP_TRUNCATED_TO_ONE = "truncation leaves a 1-token response (short_truncated=drop)"
DROP_REASONS = (
    DROP_SHORT_RESPONSE,
    DROP_INSTRUCTION_FILLS_CONTEXT,
    DROP_TOO_LONG,
    DROP_TRUNCATED_TO_ONE,
)


@dataclass
class FilteredTask:
    """A task's surviving rows (step 2), offsets already moved into the output pool."""

    task: Task
    pool_offset: int
    inst_start: np.ndarray
    inst_len: np.ndarray
    resp_start: np.ndarray
    resp_len: np.ndarray
    truncated: int = 0
    drops: dict[str, int] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return len(self.inst_start)

    @property
    def rows_per_epoch(self) -> int:
        """``min(max_per_file, n)`` (or ``n``) times ``repeat``: step 4's ``want``."""
        rule = self.task.rule
        base = self.rows if rule.max_per_file is None else min(rule.max_per_file, self.rows)
        return base * rule.repeat


def pool_offsets(tasks: Sequence[Task]) -> list[int]:
    """Step 1: each task's offset in the output pool, from the rows before filtering."""
    offsets, running = [], 0
    for task in tasks:
        offsets.append(running)
        running += int(task.inst_len.sum()) + int(task.resp_len.sum())
    return offsets


def filter_task(
    task: Task,
    pool_offset: int,
    *,
    context_size: int,
    min_resp_length: int,
    short_truncated: str,
) -> FilteredTask:
    """Step 2: drop short responses, then truncate or drop rows longer than the context."""
    inst_len, resp_len = task.inst_len, task.resp_len
    short = resp_len < min_resp_length
    allowed = context_size - np.minimum(inst_len, context_size)
    drops = {reason: 0 for reason in DROP_REASONS}
    drops[DROP_SHORT_RESPONSE] = int(short.sum())
    truncated = 0
    if task.rule.long_context == "truncate":
        fills = ~short & (allowed < 1)
        keep = ~short & ~fills
        cut = keep & (resp_len > allowed)
        drops[DROP_INSTRUCTION_FILLS_CONTEXT] = int(fills.sum())
        new_resp_len = np.minimum(resp_len, allowed)
        if short_truncated == "drop":
            # The original keeps these; the trainer then sees zero causal tokens for the row.
            to_one = cut & (new_resp_len < 2)
            drops[DROP_TRUNCATED_TO_ONE] = int(to_one.sum())
            keep &= ~to_one
            cut &= ~to_one
        truncated = int(cut.sum())
    else:
        too_long = ~short & (resp_len > allowed)
        keep = ~short & ~too_long
        drops[DROP_TOO_LONG] = int(too_long.sum())
        new_resp_len = resp_len
    return FilteredTask(
        task=task,
        pool_offset=pool_offset,
        inst_start=task.inst_start[keep] + pool_offset,
        inst_len=task.inst_len[keep],
        resp_start=task.resp_start[keep] + pool_offset,
        resp_len=new_resp_len[keep],
        truncated=truncated,
        drops=drops,
    )


def filter_tasks(
    tasks: Sequence[Task], *, context_size: int, min_resp_length: int, short_truncated: str
) -> list[FilteredTask]:
    return [
        filter_task(
            task,
            offset,
            context_size=context_size,
            min_resp_length=min_resp_length,
            short_truncated=short_truncated,
        )
        for task, offset in zip(tasks, pool_offsets(tasks), strict=True)
    ]


@dataclass
class Rows:
    """All surviving rows of every task, concatenated in task order (row id = position)."""

    inst_start: np.ndarray
    inst_len: np.ndarray
    resp_start: np.ndarray
    resp_len: np.ndarray
    task_base: np.ndarray  # first row id of each task
    task_rows: np.ndarray  # rows of each task
    # The four columns side by side, (rows, 4): an epoch's gather then reads one cache line
    # per row instead of four.
    table: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        columns = (self.inst_start, self.inst_len, self.resp_start, self.resp_len)
        self.table = (
            np.stack(columns, axis=1) if self.inst_start.size else np.zeros((0, 4), np.int64)
        )

    @classmethod
    def concat(cls, filtered: Sequence[FilteredTask]) -> Rows:
        def cat(name: str) -> np.ndarray:
            parts = [getattr(item, name) for item in filtered]
            return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

        counts = np.array([item.rows for item in filtered], dtype=np.int64)
        base = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        return cls(
            inst_start=cat("inst_start").astype(np.int64, copy=False),
            inst_len=cat("inst_len").astype(np.int64, copy=False),
            resp_start=cat("resp_start").astype(np.int64, copy=False),
            resp_len=cat("resp_len").astype(np.int64, copy=False),
            task_base=base[: len(counts)],
            task_rows=counts,
        )

    @property
    def total(self) -> int:
        return len(self.inst_start)


class EpochSampler:
    """Steps 3–5: yields, per epoch, the row ids of that epoch in their final order.

    Step 5's ``perm = rng.permutation(rows_in_epoch)`` followed by ``rows[perm]`` is done as
    ``rng.shuffle(rows)`` on the epoch's row ids: ``permutation(n)`` is ``shuffle(arange(n))``,
    and the Fisher–Yates swaps (and so the draws) depend only on ``n``, not on the values
    moved, so the result and the generator state after it are the same, without the
    ``arange``, the extra gather and their two large temporaries.
    """

    def __init__(self, filtered: Sequence[FilteredTask], seed: int) -> None:
        self._rng = PhiloxShuffler(seed)  # numpy's Generator(Philox(seed)), in Rust
        self._rows = [item.rows for item in filtered]
        self._wants = [item.rows_per_epoch for item in filtered]
        bases = np.cumsum([0, *self._rows])
        self._bases = [int(base) for base in bases[:-1]]
        self._perms: list[np.ndarray | None] = [None] * len(filtered)
        self._cursors = [0] * len(filtered)

    @property
    def rows_per_epoch(self) -> int:
        """Rows in every epoch (the fixed buffer size: the original used the corpus size)."""
        return sum(self._wants)

    def _take(self, index: int, out: np.ndarray, position: int) -> int:
        """Step 4 for one task: its rows of this epoch into ``out`` from ``position`` on."""
        n, want, base = self._rows[index], self._wants[index], self._bases[index]
        got = 0
        while got < want:
            perm = self._perms[index]
            if (perm is None or self._cursors[index] >= n) and want - got >= n:
                # A fresh permutation used whole: shuffle the task's row ids in place in
                # ``out`` (same draws as ``permutation(n)``, see the class doc), with no
                # permutation array to allocate, offset and keep (its cursor would be n).
                start = position + got
                ids = out[start : start + n]
                np.add(np.arange(n, dtype=np.int64), base, out=ids)
                self._rng.shuffle(ids)
                self._perms[index], self._cursors[index] = None, 0
                got += n
                continue
            if perm is None or self._cursors[index] >= n:
                perm = self._rng.permutation(n)
                self._perms[index] = perm
                self._cursors[index] = 0
            cursor = self._cursors[index]
            take = min(n - cursor, want - got)
            start = position + got
            np.add(perm[cursor : cursor + take], base, out=out[start : start + take])
            self._cursors[index] = cursor + take
            got += take
        return position + got

    def next_epoch(
        self, out: np.ndarray | None = None, coverage: np.ndarray | None = None
    ) -> np.ndarray:
        """The next epoch's row ids, written into ``out`` (int64, ``rows_per_epoch`` long)
        when given, so that a caller can recycle its buffers. With ``coverage`` (one count
        per row), adds how many times each row is taken in this epoch."""
        rows = np.empty(self.rows_per_epoch, dtype=np.int64) if out is None else out
        if rows.shape != (self.rows_per_epoch,) or rows.dtype != np.int64:
            raise ValueError(f"epoch buffer must be int64 of length {self.rows_per_epoch}")
        position = 0
        for index in range(len(self._rows)):
            position = self._take(index, rows, position)
        if coverage is not None:
            # Counted before the final shuffle: the same ids, but still grouped by task, so
            # the counters are updated region by region instead of at random (2.5x faster).
            coverage += np.bincount(rows, minlength=len(coverage))
        self._rng.shuffle(rows)  # == rows[rng.permutation(len(rows))], see the class doc
        return rows

    def epochs(self, count: int) -> Iterator[np.ndarray]:
        for _ in range(count):
            yield self.next_epoch()


@dataclass
class EpochArrays:
    """The four arrays of one epoch directory (int64, in the epoch's final order)."""

    inst_start: np.ndarray
    inst_len: np.ndarray
    resp_start: np.ndarray
    resp_len: np.ndarray

    @classmethod
    def empty(cls, length: int) -> EpochArrays:
        """Reusable buffers for :meth:`gather_into` (one set per writer thread)."""
        return cls(*(np.empty(length, dtype=np.int64) for _ in range(4)))

    @classmethod
    def gather(cls, rows: Rows, row_ids: np.ndarray) -> EpochArrays:
        return cls.empty(len(row_ids)).gather_into(rows, row_ids)

    def gather_into(self, rows: Rows, row_ids: np.ndarray) -> EpochArrays:
        """Fill these buffers with the rows ``row_ids`` (one pass in Rust, without the GIL)."""
        _core.gather_epoch(
            rows.table, row_ids, self.inst_start, self.inst_len, self.resp_start, self.resp_len
        )
        return self

    def items(self) -> list[tuple[str, np.ndarray]]:
        return [
            ("inst_start", self.inst_start),
            ("inst_len", self.inst_len),
            ("resp_start", self.resp_start),
            ("resp_len", self.resp_len),
        ]


def mean_tokens_per_epoch(rows: Rows, coverage: np.ndarray, epochs: int) -> int:
    """Step 6: ``round(total tokens over all epochs / epochs)``, rounding as the original."""
    total = int(np.dot(coverage, rows.inst_len + rows.resp_len)) if rows.total else 0
    return round(total / epochs)
