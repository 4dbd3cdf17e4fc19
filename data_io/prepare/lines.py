"""``--dedup line`` (MyPT's mode): exact lines across the corpus, the first occurrence kept.

A document's tokens depend on the lines it keeps, so pass 1 does not encode: ``prepare_batch``
gives each batch's cleaned documents as one UTF-8 buffer with the hashes of their lines
(``rust/prepare/lines.rs``: blank lines are never duplicates; a document that lost a line is
rebuilt from the lines kept; one left without a line is dropped). Then, one of two ways:

- decided as they arrive (``OnlineDedup`` over line hashes, while they fit the budget): the
  batch's lines are judged in order, and ``_core.keep_lines`` rebuilds and encodes the
  documents at once, for the ``ShardSink``;
- decided after the run (the sorted runs of ``HashDedup``, numbered by line): pass 1 spools
  the text (``LineSpool``); pass 2 rebuilds and encodes it, a chunk at a time, into the shards.

The train/val split is by the cleaned document's hash, before any line is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from data_io import _core
from data_io.prepare.dedup import HashDedup, OnlineDedup
from data_io.prepare.split import is_val
from data_io.prepare.tokenizers import PrepTokenizer
from data_io.util.fs import close_named, write_to

__all__ = ["LineArrays", "LineDedup", "LineSpool", "replay_line_part", "write_line_shards"]

# A batch's documents as ``prepare_batch(lines=True)`` gives them: UTF-8 text back to back,
# byte offsets, (lines, 2) hashes of the lines that are not blank, lines per document.
LineArrays = tuple[NDArray[np.uint8], NDArray[np.int64], NDArray[np.uint64], NDArray[np.int64]]

_PASS2_BYTES = 32 << 20  # text rebuilt and encoded per call in pass 2
_REPLAY_DOCUMENTS = 1 << 16


@dataclass
class LineDedup:
    """The line decisions of one run: ``online`` when made as batches arrive, else ``after``
    (sorted runs over every line, decided when pass 1 is done). Counts what it dropped."""

    online: OnlineDedup | None = None
    after: HashDedup | None = None
    lines: int = 0  # lines numbered so far (the sorted runs' record numbers)
    emptied: int = 0  # documents left without a line

    def decide(
        self, batch: LineArrays, tokenizer: PrepTokenizer
    ) -> tuple[NDArray[np.bool_], NDArray[np.uint32], NDArray[np.int64]]:
        """Judge the batch's lines now, in order: which documents are left, and their ids and
        offsets (the batches must come in document order)."""
        assert self.online is not None
        text, offsets, hashes, line_counts = batch
        keep = self.online.keep(hashes)
        left, ids, offs = _keep_and_encode(text, offsets, line_counts, keep, tokenizer)
        self.emptied += len(left) - int(np.count_nonzero(left))
        return left, ids, offs

    def record(self, batch: LineArrays) -> None:
        """Record the batch's line hashes for the decision after the run (none in a scale
        unit's part: its spool keeps them for the finalize run)."""
        hashes = batch[2]
        if self.after is not None:
            self.after.add(hashes, self.lines)
        self.lines += len(hashes)


def _keep_and_encode(
    text: NDArray[np.uint8],
    offsets: NDArray[np.int64],
    line_counts: NDArray[np.int64],
    keep: NDArray[np.bool_],
    tokenizer: PrepTokenizer,
) -> tuple[NDArray[np.bool_], NDArray[np.uint32], NDArray[np.int64]]:
    """Documents rebuilt from the verdicts ``keep``: which are left, their ids and offsets
    (in Rust with the tokenizer's encoder; the ``char`` tokenizer takes the texts)."""
    encoder = tokenizer.core_encoder
    left, encoded, texts = _core.keep_lines(
        text,
        offsets,
        line_counts,
        keep,
        encoder=encoder,
        eos_id=tokenizer.eos_id if encoder is not None else None,
    )
    ids, offs = encoded if encoded is not None else tokenizer.encode(texts or [])
    return left, ids, offs


@dataclass
class LineSpool:
    """What pass 1 leaves in the work folder when lines are decided after the run: the cleaned
    documents' text, and per document its bytes, its lines (not blank) and its val flag (and,
    in a ``scale`` unit's part, ``with_hashes``: each document's hash and its lines' hashes,
    for the finalize run)."""

    folder: Path
    documents: int = 0
    lines: int = 0
    tokens: int = 0  # none: pass 1 does not encode
    with_hashes: bool = False
    files: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        names = ("text", "bytes", "counts", "val")
        names += ("hashes", "line_hashes") if self.with_hashes else ()
        self.files = {
            name: open(self.folder / f"lines_{name}.bin", "wb")  # noqa: SIM115 (closed by close)
            for name in names
        }

    def append_lines(
        self, batch: LineArrays, val: NDArray[Any], hashes: NDArray[np.uint64] | None = None
    ) -> None:
        text, offsets, line_hashes, line_counts = batch
        write_to(self.files["text"], np.ascontiguousarray(text).data)
        write_to(self.files["bytes"], np.diff(offsets).astype(np.int64).tobytes())
        write_to(self.files["counts"], np.ascontiguousarray(line_counts, dtype=np.int64).tobytes())
        write_to(self.files["val"], val.astype(np.bool_).tobytes())
        if self.with_hashes:
            assert hashes is not None
            write_to(self.files["hashes"], np.ascontiguousarray(hashes, dtype=np.uint64).tobytes())
            write_to(self.files["line_hashes"], np.ascontiguousarray(line_hashes).tobytes())
        self.documents += len(line_counts)
        self.lines += int(line_counts.sum())

    def close(self) -> None:
        close_named(self.files.values())

    def arrays(self) -> dict[str, Any]:
        return _line_arrays(self.folder, self.with_hashes)


def _line_arrays(folder: Path, with_hashes: bool) -> dict[str, Any]:
    """A ``LineSpool``'s files, memory-mapped."""

    def load(name: str, dtype: Any) -> Any:
        path = folder / f"lines_{name}.bin"
        if path.stat().st_size == 0:
            return np.zeros(0, dtype=dtype)
        return np.memmap(path, dtype=dtype, mode="r")

    arrays = {
        "text": load("text", np.uint8),
        "bytes": load("bytes", np.int64),
        "counts": load("counts", np.int64),
        "val": load("val", np.bool_),
    }
    if with_hashes:
        arrays["hashes"] = load("hashes", np.uint64).reshape(-1, 2)
        arrays["line_hashes"] = load("line_hashes", np.uint64).reshape(-1, 2)
    return arrays


def replay_line_part(
    folder: Path, spool: LineSpool, lines: LineDedup, seed: int, val_fraction: float
) -> None:
    """A scale unit's part (a ``LineSpool`` with hashes, in ``folder``) appended to the run's
    ``spool``, its lines recorded in ``lines``, as if its source were read now."""
    arrays = _line_arrays(folder, with_hashes=True)
    documents = len(arrays["counts"])
    ends = np.cumsum(arrays["bytes"])
    line_ends = np.cumsum(arrays["counts"])
    for start in range(0, documents, _REPLAY_DOCUMENTS):
        stop = min(start + _REPLAY_DOCUMENTS, documents)
        first_byte = int(ends[start - 1]) if start else 0
        first_line = int(line_ends[start - 1]) if start else 0
        offsets = np.zeros(stop - start + 1, dtype=np.int64)
        offsets[1:] = ends[start:stop] - first_byte
        batch = (
            np.asarray(arrays["text"][first_byte : int(ends[stop - 1])]),
            offsets,
            np.asarray(arrays["line_hashes"][first_line : int(line_ends[stop - 1])]),
            np.asarray(arrays["counts"][start:stop]),
        )
        lines.record(batch)
        hashes = np.asarray(arrays["hashes"][start:stop])
        spool.append_lines(batch, is_val(hashes, seed, val_fraction))


def write_line_shards(
    spool: LineSpool,
    keep: NDArray[np.bool_],
    tokenizer: PrepTokenizer,
    sink: Any,
) -> int:
    """Pass 2: every spooled document rebuilt from the verdicts ``keep`` (one per line, in
    order), encoded and handed to ``sink`` (a ``ShardSink``) in order. Returns the documents
    left without a line."""
    arrays = spool.arrays()
    sizes, counts, val = arrays["bytes"], arrays["counts"], arrays["val"]
    ends = np.cumsum(sizes)
    line_ends = np.cumsum(counts)
    emptied = 0
    start = 0
    while start < spool.documents:
        first_byte = int(ends[start - 1]) if start else 0
        # Whole documents up to about _PASS2_BYTES of text (at least one).
        stop = max(start + 1, int(np.searchsorted(ends, first_byte + _PASS2_BYTES, "right")))
        stop = min(stop, spool.documents)
        first_line = int(line_ends[start - 1]) if start else 0
        last_line = int(line_ends[stop - 1])
        offsets = np.zeros(stop - start + 1, dtype=np.int64)
        offsets[1:] = ends[start:stop] - first_byte
        text = np.asarray(arrays["text"][first_byte : int(ends[stop - 1])])
        left, ids, offs = _keep_and_encode(
            text,
            offsets,
            np.ascontiguousarray(counts[start:stop]),
            np.ascontiguousarray(keep[first_line:last_line]),
            tokenizer,
        )
        emptied += len(left) - int(np.count_nonzero(left))
        if len(offs) > 1:
            sink.append(tokenizer.remap(ids), offs, np.asarray(val[start:stop])[left])
        start = stop
    return emptied
