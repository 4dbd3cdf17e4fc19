"""``prepare``: raw text to flat token shards, over bounded memory.

Pass 1 reads the new inputs in order, in batches (``formats/raw_reading.py``) and hands each
batch to Rust (``_core.prepare_batch``: read, normalise, filter, hash, encode, on the encoder's
threads) in a background thread while the next batch is read. Then, one of two ways:

- a ``ShardSink``: with no de-duplication, or exact duplicates decided as they arrive
  (``OnlineDedup``), pass 1 writes the kept documents straight into the shard writers;
- a ``Spool``: pass 1 appends every document's tokens to a spool file in the run's work folder,
  the de-duplication (sorted runs in a budget, or near-duplicate bands) decides which to keep,
  and pass 2 copies the kept documents' tokens, in order, into the shard writers.

The output depends only on the inputs and the options, never on the number of threads or the
way taken.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from data_io import _core
from data_io.errors import ConfigError
from data_io.formats.raw_reading import DocumentReader
from data_io.formats.raw_text import ReadOptions, ReadStats, Source
from data_io.prepare.dedup import HashDedup, NearDedup, OnlineDedup
from data_io.prepare.lines import LineDedup, LineSpool
from data_io.prepare.normalize import CleanOptions, CleanStats
from data_io.prepare.progress import ProgressBar
from data_io.prepare.split import is_val
from data_io.prepare.tokenizers import PrepTokenizer
from data_io.util.fs import close_named, write_to
from data_io.util.threads import checked_threads

__all__ = [
    "ShardSink",
    "Spool",
    "check_dtype",
    "check_threads",
    "encode_inputs",
    "encoder_threads",
    "write_shards",
]

_PASS2_DOCUMENTS = 1 << 16
_U64 = (1 << 64) - 1


@dataclass
class Spool:
    """What pass 1 leaves in the work folder: tokens, one length and one val flag per document
    (and, in a ``scale`` unit's part, each document's hash, and its ``bands`` MinHash bands
    under ``--dedup near``: the finalize step de-duplicates)."""

    folder: Path
    documents: int = 0
    tokens: int = 0
    with_hashes: bool = False
    bands: int = 0
    files: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        names = ("tokens", "lengths", "val") + (("hashes",) if self.with_hashes else ())
        names += ("bands",) if self.bands else ()
        self.files = {
            name: open(self.folder / f"{name}.bin", "wb")  # noqa: SIM115 (closed by close)
            for name in names
        }

    def append(
        self,
        ids: NDArray[np.uint32],
        offsets: NDArray[np.int64],
        val: NDArray[Any],
        hashes: NDArray[np.uint64] | None = None,
        bands: NDArray[np.uint64] | None = None,
    ) -> None:
        # Written from the array's own buffer: a copy of every token (tobytes) costs as much.
        write_to(self.files["tokens"], np.ascontiguousarray(ids, dtype=np.uint32).data)
        write_to(self.files["lengths"], np.diff(offsets).astype(np.int64).tobytes())
        write_to(self.files["val"], val.astype(np.bool_).tobytes())
        if self.with_hashes:
            assert hashes is not None
            write_to(self.files["hashes"], np.ascontiguousarray(hashes, dtype=np.uint64).tobytes())
        if self.bands:
            assert bands is not None and bands.shape[1:] == (self.bands, 2)
            write_to(self.files["bands"], np.ascontiguousarray(bands, dtype=np.uint64).tobytes())
        self.documents += len(offsets) - 1
        self.tokens += len(ids)

    def close(self) -> None:
        close_named(self.files.values())

    def arrays(self) -> tuple[NDArray[np.uint32], NDArray[np.int64], NDArray[np.bool_]]:
        def load(name: str, dtype: Any) -> Any:
            path = self.folder / f"{name}.bin"
            if path.stat().st_size == 0:
                return np.zeros(0, dtype=dtype)
            return np.memmap(path, dtype=dtype, mode="r")

        return load("tokens", np.uint32), load("lengths", np.int64), load("val", np.bool_)


class ShardSink:
    """Where pass 1 puts documents when nothing is left to decide after it (no de-duplication,
    or duplicates decided as they arrive): straight into the train and val shard writers, in
    order, so no token is spooled and copied again. The spool's interface."""

    def __init__(self, writers: dict[str, Any]) -> None:
        self.writers = writers
        self.documents = 0
        self.tokens = 0
        self.per_split = {"train": 0, "val": 0}

    def append(
        self,
        ids: NDArray[np.uint32],
        offsets: NDArray[np.int64],
        val: NDArray[Any],
        hashes: NDArray[np.uint64] | None = None,
        bands: NDArray[np.uint64] | None = None,
    ) -> None:
        lengths = np.diff(offsets)
        in_val = val.astype(np.bool_)
        for split, chosen in (("train", ~in_val), ("val", in_val)):
            count = int(np.count_nonzero(chosen))
            if count == len(chosen):
                self.writers[split].add(ids)
            elif count:
                self.writers[split].add(ids[np.repeat(chosen, lengths)])
            self.per_split[split] += count
        self.documents += len(lengths)
        self.tokens += len(ids)

    def append_split(
        self, ids: NDArray[np.uint32], offsets: NDArray[np.int64], val_documents: int
    ) -> None:
        """A batch encoded split by split (``prepare_batch(split=...)``): its train documents'
        ids first, then its ``val_documents`` val documents' ids, each in order."""
        train_documents = len(offsets) - 1 - val_documents
        cut = int(offsets[train_documents])
        if cut:
            self.writers["train"].add(ids[:cut])
        if cut < len(ids):
            self.writers["val"].add(ids[cut:])
        self.per_split["train"] += train_documents
        self.per_split["val"] += val_documents
        self.documents += train_documents + val_documents
        self.tokens += len(ids)

    def close(self) -> None:
        pass


def encode_inputs(
    sources: list[Source],
    read: ReadOptions,
    clean: CleanOptions,
    tokenizer: PrepTokenizer,
    dedup: HashDedup | None,
    seed: int,
    val_fraction: float,
    spool: Spool | ShardSink | LineSpool,
    bar: ProgressBar,
    parts: Callable[[Source], Any] | None = None,
    near: NearDedup | None = None,
    online: OnlineDedup | None = None,
    lines: LineDedup | None = None,
) -> tuple[ReadStats, CleanStats]:
    """Pass 1: read, clean, hash and encode every document of ``sources`` into ``spool`` (a
    ``Spool``, or a ``ShardSink``).

    ``near``: de-duplicate by the documents' MinHash bands (``--dedup near``), not their hashes.
    ``online``: drop exact duplicates here, as they arrive (``dedup`` is then None).
    ``lines``: de-duplicate lines (``--dedup line``, ``lines.py``): decided here, or recorded
    (``spool`` is then a ``LineSpool``) for the decision after the run.

    ``parts``: for a source, the part a ``scale`` unit already encoded (``prepare.parts``) or
    None; a source with a part is replayed from it, in its place among the others, so that the
    documents are numbered, de-duplicated and split exactly as if it had been read here.
    """
    stats, clean_stats = ReadStats(), CleanStats()
    group: list[Source] = []

    def read_group() -> None:
        if group:
            _encode_group(
                group,
                read,
                clean,
                tokenizer,
                dedup,
                seed,
                val_fraction,
                spool,
                bar,
                stats,
                clean_stats,
                near,
                online,
                lines,
            )
            group.clear()

    for source in sources:
        part = parts(source) if parts is not None else None
        if part is None:
            group.append(source)
            continue
        read_group()
        part.replay(dedup, seed, val_fraction, spool, stats, clean_stats, lines)
        bar.advance_bytes(source.size)
    read_group()
    return stats, clean_stats


def _encode_group(
    sources: list[Source],
    read: ReadOptions,
    clean: CleanOptions,
    tokenizer: PrepTokenizer,
    dedup: HashDedup | None,
    seed: int,
    val_fraction: float,
    spool: Spool | ShardSink | LineSpool,
    bar: ProgressBar,
    stats: ReadStats,
    clean_stats: CleanStats,
    near: NearDedup | None,
    online: OnlineDedup | None,
    lines: LineDedup | None,
) -> None:
    """Pass 1 over consecutive sources read here; the spool holds all of them at the end.

    This thread reads the next batch while the encoding thread prepares the last one in Rust
    (read, clean, hash and encode on the encoder's threads, the GIL released)."""
    reader = DocumentReader(read, stats, bar)
    numbered = spool.documents  # documents given a number so far
    # Straight into the shards: Rust encodes each batch's train documents, then its val ones.
    split = (
        (seed & _U64, val_fraction)
        if isinstance(spool, ShardSink) and lines is None and tokenizer.core_encoder is not None
        else None
    )

    def prepare(batch: _core.RawDocuments, read_through: int) -> _Prepared:
        """``read_through``: the input bytes read up to this batch's end."""
        encoder = tokenizer.core_encoder
        encoded, texts, hashes, counts, bands, lined = _core.prepare_batch(
            batch,
            text_field=read.text_field,
            fail_invalid=read.invalid_utf8 == "fail",
            normalize=clean.normalize,
            filter=clean.filter,
            min_line_chars=clean.min_line_chars,
            min_doc_chars=clean.min_doc_chars,
            resolve=reader.resolve,
            encoder=encoder,
            eos_id=tokenizer.eos_id if encoder is not None else None,
            near=near.as_tuple() if near is not None else None,
            lines=lines is not None,
            # Exact duplicates decided before encoding: a duplicate is never encoded.
            seen=online.seen if online is not None else None,
            split=split,
        )
        if online is not None:
            online.decided(counts)
            online.project(read_through)
        if lined is not None and lines is not None and lines.online is not None:
            # Decided here: one thread prepares the batches, in order.
            left, ids, offsets = lines.decide(lined, tokenizer)
            lines.online.project(read_through)
            return ids, offsets, hashes[left], counts, bands, None
        if lined is not None:
            return _NO_IDS, _NO_OFFSETS, hashes, counts, bands, lined
        ids, offsets = encoded if encoded is not None else tokenizer.encode(texts or [])
        return ids, offsets, hashes, counts, bands, None

    def drain(future: Future[_Prepared]) -> None:
        nonlocal numbered
        ids, offsets, hashes, counts, bands, lined = future.result()
        stats.documents += counts["documents"]
        stats.text_chars += counts["text_chars"]
        stats.invalid_utf8_lines += counts["invalid_utf8_lines"]
        clean_stats.add(_clean_counts(counts))
        if len(hashes) == 0:
            return
        val = is_val(hashes, seed, val_fraction)
        if lined is not None:  # decided after the run
            assert lines is not None and isinstance(spool, LineSpool)
            lines.record(lined)
            spool.append_lines(lined, val, hashes)
            if tokenizer.core_encoder is None:  # the char vocabulary: every character read
                tokenizer.encode([lined[0].tobytes().decode()])
            numbered += len(hashes)
            return
        if dedup is not None:
            dedup.add(bands if bands is not None else hashes, numbered)
        numbered += len(hashes)
        val_documents = counts.get("val_documents")
        if val_documents is not None:  # encoded split by split (`split` above)
            if val_documents != int(np.count_nonzero(val)):
                raise RuntimeError(
                    f"the batch's train/val split in Rust put {val_documents} documents in val, "
                    f"split.py {int(np.count_nonzero(val))}: a bug, please report it"
                )
            assert isinstance(spool, ShardSink)
            writes.append(writer.submit(_write_split, spool, bar, ids, offsets, val_documents))
        else:
            writes.append(writer.submit(_write, spool, bar, ids, offsets, val, hashes, bands))
        while len(writes) > _WRITES_AHEAD:
            writes.popleft().result()

    # Three threads, each batch passing through them in order: this one reads, "encode"
    # prepares in Rust (on the encoder's pool), "write" appends to the spool or the shards
    # (and hashes the shards). On many cores the encoding is short enough for the rest to
    # decide the speed, so the reading and the writing do not wait for each other.
    pending: Future[_Prepared] | None = None
    writes: deque[Future[None]] = deque()
    with (
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="prepare-encode") as encoder,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="prepare-write") as writer,
    ):
        try:
            try:
                for batch in reader.batches(sources):
                    future = encoder.submit(prepare, batch, bar.bytes_done)
                    if pending is not None:
                        # Taken before it is drained: a batch whose draining failed (a write's
                        # error surfacing) is not drained again below.
                        waiting, pending = pending, None
                        drain(waiting)
                    pending = future
            except Exception:
                if pending is not None:
                    waiting, pending = pending, None
                    drain(waiting)  # an earlier document's error comes first
                raise
            if pending is not None:
                drain(pending)
        finally:
            # Every write done (or failed) before the spool is closed; a write's error (a
            # full disk) is the run's error unless an earlier one is on its way already.
            failures = [w.exception() for w in writes]
            writes.clear()
        failure = next((f for f in failures if f is not None), None)
        if failure is not None:
            raise failure


def _write(
    spool: Spool | ShardSink | LineSpool,
    bar: ProgressBar,
    ids: NDArray[np.uint32],
    offsets: NDArray[np.int64],
    val: NDArray[Any],
    hashes: NDArray[np.uint64],
    bands: NDArray[Any] | None,
) -> None:
    spool.append(ids, offsets, val, hashes, bands)
    bar.advance_tokens(len(ids))


def _write_split(
    sink: ShardSink,
    bar: ProgressBar,
    ids: NDArray[np.uint32],
    offsets: NDArray[np.int64],
    val_documents: int,
) -> None:
    sink.append_split(ids, offsets, val_documents)
    bar.advance_tokens(len(ids))


# Batches prepared and waiting to be written: bounds the memory they hold while the writing
# (a slow disk) catches up.
_WRITES_AHEAD = 2


_Prepared = tuple[
    NDArray[np.uint32],
    NDArray[np.int64],
    NDArray[np.uint64],
    dict[str, int],
    NDArray[Any] | None,
    Any,  # lines.LineArrays of a batch whose lines are decided after the run
]
_NO_IDS = np.zeros(0, dtype=np.uint32)
_NO_OFFSETS = np.zeros(1, dtype=np.int64)


def _clean_counts(counts: dict[str, int]) -> CleanStats:
    return CleanStats(
        unicode_normalized=counts["unicode_normalized"],
        whitespace_cleaned=counts["whitespace_cleaned"],
        controls_removed=counts["controls_removed"],
        short_lines_dropped=counts["short_lines_dropped"],
        dropped={"too_short": counts["too_short"], "empty": counts["empty"]},
    )


def write_shards(
    spool: Spool,
    keep: NDArray[np.bool_] | None,
    tokenizer: PrepTokenizer,
    writers: dict[str, Any],
) -> dict[str, int]:
    """Pass 2: the kept documents' tokens, in order, to the train and val writers."""
    tokens, lengths, val = spool.arrays()
    documents = {"train": 0, "val": 0}
    start_token = 0
    for start in range(0, len(lengths), _PASS2_DOCUMENTS):
        stop = min(start + _PASS2_DOCUMENTS, len(lengths))
        length = np.asarray(lengths[start:stop])
        end_token = start_token + int(length.sum())
        ids = tokenizer.remap(np.asarray(tokens[start_token:end_token]))
        kept = np.ones(stop - start, dtype=np.bool_) if keep is None else keep[start:stop]
        in_val = np.asarray(val[start:stop])
        for split, chosen in (("train", kept & ~in_val), ("val", kept & in_val)):
            documents[split] += int(chosen.sum())
            if chosen.any():
                writers[split].add(ids[np.repeat(chosen, length)])
        start_token = end_token
    return documents


def check_dtype(
    dtype: str, vocab_size: int, recorded: str | None, *, growable: bool = False
) -> np.dtype:
    """The shard dtype: ``auto`` picks the smallest unsigned type holding every id.

    A ``growable`` vocabulary (``char``: later inputs add characters) gets at least uint16
    from ``auto``: uint8 would hold 255 characters, and the dtype is fixed by the first run.
    """
    if recorded is not None:
        chosen = np.dtype(recorded)  # an incremental run keeps the dtype of the earlier shards
    elif dtype == "auto":
        chosen = _smallest_dtype(vocab_size, growable=growable)
    else:
        chosen = np.dtype(dtype)
    if vocab_size - 1 > np.iinfo(chosen).max:
        where = "the existing shards' " if recorded is not None else ""
        raise ConfigError(
            f"the vocabulary has {vocab_size} tokens (ids up to {vocab_size - 1}), too many for "
            f"{where}dtype {chosen.name} (at most {np.iinfo(chosen).max}); "
            + (
                "prepare into a new folder"
                if recorded is not None
                else f"pass --dtype {_smallest_dtype(vocab_size).name} or --dtype auto"
            )
        )
    return chosen


def _smallest_dtype(vocab_size: int, *, growable: bool = False) -> np.dtype:
    """``auto``'s choice: the smallest unsigned type holding ids below ``vocab_size`` (uint16
    at least for a ``growable`` vocabulary), uint32 above that."""
    if vocab_size > 1 << 16:
        return np.dtype(np.uint32)
    small = vocab_size <= 1 << 8 and not growable
    return np.dtype(np.uint8 if small else np.uint16)


def check_threads(threads: object) -> int | None:
    """``threads`` if it is None or an integer from 1 to a few a core; a ConfigError otherwise."""
    return checked_threads(threads)


@contextlib.contextmanager
def encoder_threads(threads: int | None) -> Iterator[None]:
    """Within the block, the encoder runs on ``threads`` threads (None: every core).

    The Rust encoder reads ``RAYON_NUM_THREADS`` at each batch and restarts its pool when the
    count changes, so this applies to every call, not only to the first of the process; the
    variable is restored after, so a later ``tokenize`` or loader in this process is unaffected.
    """
    if check_threads(threads) is None:
        yield
        return
    previous = os.environ.get("RAYON_NUM_THREADS")
    os.environ["RAYON_NUM_THREADS"] = str(threads)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("RAYON_NUM_THREADS", None)
        else:
            os.environ["RAYON_NUM_THREADS"] = previous
