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
from data_io.prepare.tokenizers import PrepTokenizer

__all__ = ["LineArrays", "LineDedup", "LineSpool", "write_line_shards"]

# A batch's documents as ``prepare_batch(lines=True)`` gives them: UTF-8 text back to back,
# byte offsets, (lines, 2) hashes of the lines that are not blank, lines per document.
LineArrays = tuple[NDArray[np.uint8], NDArray[np.int64], NDArray[np.uint64], NDArray[np.int64]]

_PASS2_BYTES = 32 << 20  # text rebuilt and encoded per call in pass 2


@dataclass
class LineDedup:
    """The line decisions of one run: ``online`` when made as batches arrive, else ``after``
    (sorted runs over every line, decided when pass 1 is done). Counts what it dropped."""

    online: OnlineDedup | None = None
    after: HashDedup | None = None
    lines: int = 0  # lines numbered so far (the sorted runs' record numbers)
    emptied: int = 0  # documents left without a line

    @property
    def duplicate_lines(self) -> int:
        return self.online.duplicates if self.online is not None else 0

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
        """Record the batch's line hashes for the decision after the run."""
        assert self.after is not None
        hashes = batch[2]
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
    documents' text, and per document its bytes, its lines (not blank) and its val flag."""

    folder: Path
    documents: int = 0
    lines: int = 0
    tokens: int = 0  # none: pass 1 does not encode
    files: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.files = {
            name: open(self.folder / f"lines_{name}.bin", "wb")  # noqa: SIM115 (closed by close)
            for name in ("text", "bytes", "counts", "val")
        }

    def append_lines(self, batch: LineArrays, val: NDArray[Any]) -> None:
        text, offsets, _, line_counts = batch
        self.files["text"].write(np.ascontiguousarray(text).data)
        self.files["bytes"].write(np.diff(offsets).astype(np.int64).tobytes())
        self.files["counts"].write(np.ascontiguousarray(line_counts, dtype=np.int64).tobytes())
        self.files["val"].write(val.astype(np.bool_).tobytes())
        self.documents += len(line_counts)
        self.lines += int(line_counts.sum())

    def close(self) -> None:
        for f in self.files.values():
            f.close()

    def arrays(self) -> dict[str, Any]:
        def load(name: str, dtype: Any) -> Any:
            path = self.folder / f"lines_{name}.bin"
            if path.stat().st_size == 0:
                return np.zeros(0, dtype=dtype)
            return np.memmap(path, dtype=dtype, mode="r")

        return {
            "text": load("text", np.uint8),
            "bytes": load("bytes", np.int64),
            "counts": load("counts", np.int64),
            "val": load("val", np.bool_),
        }


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
