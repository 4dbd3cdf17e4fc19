"""Writing the epoch folders in a helper thread while the main thread draws the next epoch.

Drawing an epoch (the Philox shuffles) is a serial chain through one generator; gathering its
four arrays and writing them is not, and both ``np.take`` and file writes release the GIL.
So the main thread only draws row ids and hands each epoch to :class:`EpochWriter`, whose
single thread gathers into reused buffers and writes ``epoch_<k>/*.npy``. At most
``in_flight`` epochs of row ids exist at once (they are recycled), so memory stays bounded
whatever the number of epochs.
"""

from __future__ import annotations

import queue
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from data_io.sampling.algorithm import EpochArrays, Rows
from data_io.sampling.pool import npy_header

INDEX_DTYPE = np.dtype("<i8")
IN_FLIGHT = 2  # row-id buffers: one being drawn, one being written


def write_npy(path: Path, header: bytes, array: np.ndarray) -> None:
    """``np.save`` of a 1-D array whose header is already built: one open, two writes."""
    with path.open("wb", buffering=0) as handle:
        for view in (memoryview(header), memoryview(array).cast("B")):
            while view:
                view = view[handle.write(view) :]


class EpochWriter:
    """Gathers and writes epochs on ``executor`` (it must have a single worker thread)."""

    def __init__(
        self,
        staging: Path,
        rows: Rows,
        rows_per_epoch: int,
        executor: ThreadPoolExecutor,
        *,
        in_flight: int = IN_FLIGHT,
    ) -> None:
        self._staging = staging
        self._rows = rows
        self._executor = executor
        self._header = npy_header(INDEX_DTYPE, rows_per_epoch)
        self._arrays = EpochArrays.empty(rows_per_epoch)  # used by the writer thread only
        self._free: queue.Queue[np.ndarray] = queue.Queue()
        for _ in range(in_flight):
            self._free.put(np.empty(rows_per_epoch, dtype=np.int64))
        self._futures: list[Future[None]] = []

    def buffer(self) -> np.ndarray:
        """A free row-id buffer; waits while ``in_flight`` epochs are still being written,
        and raises the writer's error if it failed (instead of waiting forever)."""
        while True:
            self.raise_failure()
            try:
                return self._free.get(timeout=0.05)
            except queue.Empty:
                continue

    def submit(self, epoch: int, row_ids: np.ndarray) -> None:
        """Write ``epoch`` from ``row_ids`` (a buffer from :meth:`buffer`, given back after)."""
        self._futures.append(self._executor.submit(self._write, epoch, row_ids))

    def _write(self, epoch: int, row_ids: np.ndarray) -> None:
        folder = self._staging / f"epoch_{epoch}"
        folder.mkdir()
        for name, array in self._arrays.gather_into(self._rows, row_ids).items():
            write_npy(folder / f"{name}.npy", self._header, array)
        # Given back only on success: after a failure, buffer() raises it instead of
        # handing out a buffer for an epoch that would never be written.
        self._free.put(row_ids)

    def raise_failure(self) -> None:
        for future in self._futures:
            if future.done() and future.exception() is not None:
                future.result()

    def wait(self) -> None:
        """Until every submitted epoch is written; raises the first failure."""
        for future in self._futures:
            future.result()
