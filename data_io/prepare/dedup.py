"""Exact document de-duplication by 128-bit hash, in a fixed memory budget.

Each document's text is hashed (BLAKE2b, 16 bytes) and recorded with its number in the run.
Records gather in a preallocated buffer; when it is full it is sorted and spilled to disk as a
sorted run. At the end the runs (and the hashes of documents kept by earlier runs of the same
output folder, each numbered 0 so that they win) are merged in chunks; in the merged order,
equal hashes are adjacent and sorted by document number, so every record after the first of its
hash is a duplicate: its document is dropped. The result is the same as keeping the first
occurrence with an in-memory set, for any corpus size.

Lines (``--dedup line``, ``lines.py``) too: the records are the lines' hashes, numbered by line.
Near-duplicates (``--dedup near``) go through the same machinery: a document's records are its
MinHash LSH bands (``rust/prepare/near.rs``: band number, band hash), and a document is dropped
when any of its bands was seen in an earlier document: the first document of a group of
near-duplicates stays.

Memory: the buffer (24 bytes per record, up to 48 while it grows; sorted in place, in Rust) never
exceeds the budget, and neither does the merge (K runs read in chunks sized budget / (80 K)). The
accounting is exact for these arrays (``peak_bytes``); Python's own overhead is not counted.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from data_io import _core
from data_io.errors import ConfigError
from data_io.util.fs import naming, write_to

__all__ = [
    "DEDUP_MODES",
    "DedupOverflow",
    "HashDedup",
    "NearDedup",
    "OnlineDedup",
    "dedup_mode",
    "hash_texts",
    "parse_memory",
]

DEDUP_MODES = ("doc", "line", "near", "none")

_RECORD = 24  # hi, lo, document number + 1: three uint64
_SORT_FACTOR = 48  # bytes per record of capacity: the old and the new buffer while it grows (the
# last step can start from almost the capacity); it is sorted in place
_MERGE_FACTOR = 80  # bytes per chunk record while merging (chunks, concatenation, sort)
_MIN_BUDGET = 4096
_FIRST_BUFFER = 1 << 16  # records
_MIN_CHUNK = 256  # records per run and merge step below which runs are merged in groups first
_UNITS = {"": 1, "B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}


def parse_memory(value: str | int) -> int:
    """Bytes in ``value``: an int, or text such as ``512MB``, ``1GB`` (binary units)."""
    if isinstance(value, int) and not isinstance(value, bool):
        number, unit = value, ""
    elif not isinstance(value, str):
        number, unit = -1, ""
    else:
        text = str(value).strip().upper().replace("IB", "B")
        digits = text.rstrip("KMGTB")
        unit = text[len(digits) :]
        if unit and not unit.endswith("B"):
            unit += "B"
        try:
            number = float(digits)
        except ValueError:
            number = -1
        if unit not in _UNITS:
            number = -1
    size = int(number * _UNITS.get(unit, 1))
    if number < 0 or size < _MIN_BUDGET:
        raise ConfigError(
            f"--dedup-memory {value!r} is not a size of at least {_MIN_BUDGET} bytes; pass e.g. "
            "--dedup-memory 1GB (units B, KB, MB, GB, TB)"
        )
    return size


def dedup_mode(value: object) -> str:
    """``doc``, ``line``, ``near`` or ``none`` from the API's ``dedup`` (True and False: doc
    and none)."""
    if value is True or value is False:
        return "doc" if value else "none"
    if value not in DEDUP_MODES:
        raise ConfigError(
            f"dedup must be one of {', '.join(DEDUP_MODES)} (or True/False), got {value!r}"
        )
    return str(value)


# The most MinHash permutations (bands x rows) near-dedup takes: datasketch's users pick 128-512.
MAX_PERMUTATIONS = 1024


@dataclass(frozen=True)
class NearDedup:
    """The parameters of ``--dedup near`` (rust/prepare/near.rs): ``ngram``-word shingles,
    ``bands`` LSH bands of ``rows`` MinHash values. Defaults: 5, 14, 8 (112 permutations; the
    threshold (1/14)^(1/8) is a Jaccard similarity of 0.72, found 65% of the time; 0.68 is found
    half the time)."""

    ngram: int = 5
    bands: int = 14
    rows: int = 8
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("ngram", "bands", "rows"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1024:
                raise ConfigError(f"near_{name} must be an integer 1..1024, got {value!r}")

    def check_permutations(self) -> None:
        """Refuse more than ``MAX_PERMUTATIONS`` (checked for new folders and new values only:
        a folder made before the limit keeps its recorded bands and rows)."""
        if self.bands * self.rows > MAX_PERMUTATIONS:
            # Each permutation costs a product for every shingle of every document: 1024 x 1024
            # (accepted before) asks 9,362 times the default's work for no finer threshold.
            raise ConfigError(
                f"near_bands x near_rows ({self.bands} x {self.rows} = {self.bands * self.rows}) "
                f"is the number of MinHash permutations and must be at most {MAX_PERMUTATIONS}; "
                f"pick the threshold (1/bands)^(1/rows) with fewer: 14 x 8 = 112 (0.72), "
                f"20 x 5 = 100 (0.55), 16 x 16 = 256 (0.84)"
            )

    def threshold(self) -> float:
        """The usual LSH threshold (1/bands)^(1/rows): near the steepest rise of the chance
        1 - (1 - s^rows)^bands that a pair of similarity s shares a band (0.72 and 65% with the
        defaults, whose half-way point is 0.68)."""
        return float((1 / self.bands) ** (1 / self.rows))

    def as_tuple(self) -> tuple[int, int, int, int]:
        return (self.ngram, self.bands, self.rows, self.seed)


def hash_texts(texts: list[str]) -> NDArray[np.uint64]:
    """The 128-bit BLAKE2b hash of each text's UTF-8 bytes, as ``(n, 2)`` uint64 (hi, lo):
    ``hashlib.blake2b(text.encode(), digest_size=16)``, computed in Rust on the encoder's
    threads (``rust/prepare/hash.rs``; tests hold it to hashlib)."""
    return _core.hash_texts(texts)


class DedupOverflow(Exception):
    """The hashes outgrew ``OnlineDedup``'s budget: the run goes again with sorted runs."""


# Bytes per hash the online set takes (the 16-byte record, or near-dedup's 8-byte band hash with
# its share of the document's 16-byte hash, and the table's spare slots while it grows), and the
# largest document (or line) size assumed when choosing it: a run tries it unless the inputs'
# records could not fit the budget even at that size. As it runs, the set is sized from the
# records per input byte so far, and once enough of the input is read (``_TRUSTED``) a projection
# beyond the budget stops it at once (``DedupOverflow``: the run starts again with sorted runs),
# instead of after most of the input.
ONLINE_BYTES_PER_RECORD = 40
ONLINE_BYTES_PER_BAND = 22
ONLINE_ASSUMED_DOCUMENT_BYTES = 2048
ONLINE_ASSUMED_LINE_BYTES = 256  # --dedup line: its records are lines
# A projection is trusted after a thirty-second of the input, or 256 MB of it.
_TRUSTED_SHARE, _TRUSTED_BYTES = 32, 256 << 20
_PRIOR_ROWS = 1 << 20


class OnlineDedup:
    """Exact duplicates decided as documents arrive (``rust/prepare/seen.rs``): a document is
    kept when its hash is new among the earlier runs' and this run's. The same decisions as
    ``HashDedup``, without a spool: its tokens go straight to the shards."""

    def __init__(self, budget: int, input_bytes: int = 0, bands: int | None = None) -> None:
        """``bands``: the records are near-dedup's bands, of that many (held in half the
        memory); a record naming another band (an earlier run's file, damaged) is refused, as
        one beyond the budget: the run goes again with sorted runs."""
        self._seen = _core.SeenHashes(budget, bands)
        self.duplicates = 0
        self.peak_bytes = 0
        self._input_bytes = input_bytes  # of this run's inputs on disk: sizes the set early
        self._prior = 0  # hashes of earlier runs, not projected

    def project(self, bytes_read: int) -> None:
        """Size the set for the whole run from the records per input byte so far (this run's
        inputs are ``input_bytes`` on disk, ``bytes_read`` of them read), a quarter to spare
        (the records per byte move from file to file: on the race's 163 MB under ``--dedup
        near`` the set needed a quarter more than the first batch projected, and each new table
        is freshly zeroed pages with every record moved over);
        ``DedupOverflow`` once enough is read to trust a projection beyond the budget."""
        if not (self._input_bytes and bytes_read):
            return
        grown = len(self._seen) - self._prior
        total = self._prior + grown * self._input_bytes // bytes_read
        if self._seen.expect(total + total // 4):
            return
        trusted = min(self._input_bytes // _TRUSTED_SHARE, _TRUSTED_BYTES)
        if bytes_read >= trusted and not self._seen.expect(total):
            raise DedupOverflow

    @staticmethod
    def fits(
        input_bytes: int,
        budget: int,
        record_bytes: int = ONLINE_ASSUMED_DOCUMENT_BYTES,
        held_bytes: int = ONLINE_BYTES_PER_RECORD,
    ) -> bool:
        """Whether the records (documents, lines, or bands) of ``input_bytes`` of text could fit
        ``budget`` at one a ``record_bytes`` of text (a generous size: the run itself finds
        out), each taking ``held_bytes`` of the set."""
        records = input_bytes // record_bytes + 1
        return records * held_bytes <= budget

    def load_prior(self, prior: Path) -> None:
        """The hashes kept by earlier runs (a sorted raw (n, 2) uint64 file)."""
        hashes = np.memmap(prior, dtype=np.uint64, mode="r").reshape(-1, 2)
        self._seen.expect(len(hashes))
        for start in range(0, len(hashes), _PRIOR_ROWS):
            self._record(np.ascontiguousarray(hashes[start : start + _PRIOR_ROWS]))
        self._prior = len(self._seen)

    def keep(self, hashes: NDArray[np.uint64]) -> NDArray[np.bool_]:
        """Which of these documents (in order) are new; the others are counted duplicates."""
        new = self._record(np.ascontiguousarray(hashes, dtype=np.uint64))
        self.duplicates += len(new) - int(np.count_nonzero(new))
        return new

    @property
    def seen(self) -> _core.SeenHashes:
        """The set, for ``prepare_batch`` to decide a batch before encoding it."""
        return self._seen

    def decided(self, counts: dict[str, int]) -> None:
        """Count what ``prepare_batch(seen=self.seen)`` decided; ``DedupOverflow`` when the
        batch did not fit (nothing of it was recorded)."""
        if counts["dedup_overflow"]:
            raise DedupOverflow
        self.duplicates += counts["duplicates"]
        self.peak_bytes = max(self.peak_bytes, self._seen.bytes)

    def _record(self, hashes: NDArray[np.uint64]) -> NDArray[np.bool_]:
        new = self._seen.first_seen(hashes)
        if new is None:
            raise DedupOverflow
        self.peak_bytes = max(self.peak_bytes, self._seen.bytes)
        return new

    def write_kept(self, path: Path) -> None:
        """Every hash seen, sorted: the kept-hashes file ``HashDedup.keep_mask`` also writes."""
        temporary = path.with_name(path.name + ".tmp")
        with naming(temporary):
            self._seen.write_sorted(temporary)
        os.replace(temporary, path)


class HashDedup:
    """Collects (hash, document number) records; ``keep_mask`` says which documents to keep."""

    def __init__(self, work: Path, budget: int) -> None:
        self.work = work
        self.budget = budget
        self.capacity = max(1, budget // _SORT_FACTOR)
        # Grown by doubling up to the capacity, so a small corpus does not hold the whole budget
        # (growing from c/2 to c briefly holds 36 bytes per record of c: still in the budget).
        self._buffer = np.empty((min(self.capacity, _FIRST_BUFFER), 3), dtype=np.uint64)
        self._filled = 0
        self.runs: list[Path] = []
        self.spilled = 0  # runs written by the buffer (before any intermediate merge)
        self._next_run = 0
        self.records = 0
        self.peak_bytes = self._buffer.nbytes

    def add(self, hashes: NDArray[np.uint64], first_document: int) -> None:
        """Record ``hashes`` of the documents numbered ``first_document`` onwards: ``(n, 2)``,
        or ``(n, k, 2)`` for ``k`` records per document (near-dedup's bands)."""
        per_document = hashes.shape[1] if hashes.ndim == 3 else 1
        documents = len(hashes)
        hashes = hashes.reshape(-1, 2)
        numbers = np.repeat(
            np.arange(first_document + 1, first_document + 1 + documents, dtype=np.uint64),
            per_document,
        )
        done = 0
        while done < len(hashes):
            if self._filled == len(self._buffer) < self.capacity:
                self._grow()
            room = min(len(self._buffer) - self._filled, len(hashes) - done)
            rows = slice(self._filled, self._filled + room)
            self._buffer[rows, :2] = hashes[done : done + room]
            self._buffer[rows, 2] = numbers[done : done + room]
            self._filled += room
            done += room
            if self._filled == self.capacity:
                self._spill()
        self.records += len(hashes)

    def _grow(self) -> None:
        grown = np.empty((min(self.capacity, 2 * len(self._buffer)), 3), dtype=np.uint64)
        grown[: self._filled] = self._buffer[: self._filled]
        self._note(self._buffer.nbytes + grown.nbytes)
        self._buffer = grown

    def _sorted_buffer(self) -> NDArray[np.uint64]:
        """The filled part of the buffer sorted by (hi, lo, number), in place (in Rust)."""
        part = self._buffer[: self._filled]
        _core.sort_records(part)
        return part

    def _spill(self) -> None:
        run = self.work / f"dedup_run_{self._next_run:05d}.npy"
        self._next_run += 1
        with naming(run):
            np.save(run, self._sorted_buffer())
        self.runs.append(run)
        self.spilled += 1
        self._filled = 0

    def _note(self, in_use: int) -> None:
        self.peak_bytes = max(self.peak_bytes, in_use)

    def keep_mask(
        self, documents: int, prior: Path | None, kept_hashes: Path
    ) -> tuple[NDArray[np.bool_], int]:
        """Which of ``documents`` to keep, and how many are duplicates.

        ``prior`` holds the sorted hashes kept by earlier runs (raw (n, 2) uint64, or None);
        the sorted hashes kept after this run are written to ``kept_hashes`` (same format).
        The mask lives on disk (one byte per document) so that it too stays out of memory.
        """
        if self._filled:
            self._spill()
        self._buffer = np.empty((0, 3), dtype=np.uint64)  # the budget now goes to the merge
        if documents == 0:
            return np.ones(0, dtype=np.bool_), 0
        keep = np.lib.format.open_memmap(
            self.work / "keep.npy", mode="w+", dtype=np.bool_, shape=(documents,)
        )
        keep[:] = True
        self._reduce_runs()
        sources = [_run_chunks(run) for run in self.runs]
        if prior is not None:
            sources.append(_prior_chunks(prior))
        chunk = max(1, self.budget // (_MERGE_FACTOR * max(1, len(sources))))
        temporary = kept_hashes.with_name(kept_hashes.name + ".tmp")
        with open(temporary, "wb") as out:
            last: tuple[int, int] | None = None
            for merged in _merge([s(chunk) for s in sources], self._note):
                first = _first_of_hash(merged, last)
                dropped = merged[~first, 2]
                keep[(dropped[dropped > 0] - 1).astype(np.int64)] = False
                write_to(out, np.ascontiguousarray(merged[first, :2]).tobytes())
                last = (int(merged[-1, 0]), int(merged[-1, 1]))
        os.replace(temporary, kept_hashes)
        keep.flush()
        # Counted from the mask: a near-duplicate can repeat several of its bands.
        duplicates = documents - int(np.count_nonzero(keep))
        for run in self.runs:
            run.unlink()
        return keep, duplicates

    def _reduce_runs(self) -> None:
        """Merge runs in groups until one merge reads chunks of a useful size.

        Reading K runs at once gives each a chunk of budget / (80 K) records; past a fan-in
        where chunks fall under _MIN_CHUNK records the merge would crawl, so runs are first
        merged into longer ones (an external sort's multi-pass merge).
        """
        fan_in = max(2, self.budget // (_MERGE_FACTOR * _MIN_CHUNK))
        while len(self.runs) > fan_in:
            group, self.runs = self.runs[:fan_in], self.runs[fan_in:]
            chunk = max(1, self.budget // (_MERGE_FACTOR * len(group)))
            merged = self.work / f"dedup_run_{self._next_run:05d}.npy"
            self._next_run += 1
            total = sum(np.load(run, mmap_mode="r").shape[0] for run in group)
            target = np.lib.format.open_memmap(merged, "w+", np.uint64, (total, 3))
            at = 0
            for piece in _merge([_run_chunks(run)(chunk) for run in group], self._note):
                target[at : at + len(piece)] = piece
                at += len(piece)
            target.flush()
            del target
            for run in group:
                run.unlink()
            self.runs.append(merged)


def _first_of_hash(merged: NDArray[np.uint64], last: tuple[int, int] | None) -> NDArray[np.bool_]:
    """True where a record's hash differs from the previous record's (across chunks too)."""
    first = np.ones(len(merged), dtype=np.bool_)
    same = (merged[1:, 0] == merged[:-1, 0]) & (merged[1:, 1] == merged[:-1, 1])
    first[1:] = ~same
    if last is not None and len(merged):
        first[0] = (int(merged[0, 0]), int(merged[0, 1])) != last
    return first


_Chunks = Iterator[NDArray[np.uint64]]


def _run_chunks(run: Path):  # type: ignore[no-untyped-def]
    def chunks(size: int) -> _Chunks:
        records = np.load(run, mmap_mode="r")
        for start in range(0, len(records), size):
            yield np.array(records[start : start + size])

    return chunks


def _prior_chunks(prior: Path):  # type: ignore[no-untyped-def]
    """Hashes kept by earlier runs, numbered 0: they sort before, so win over, this run's."""

    def chunks(size: int) -> _Chunks:
        hashes = np.memmap(prior, dtype=np.uint64, mode="r").reshape(-1, 2)
        for start in range(0, len(hashes), size):
            part = hashes[start : start + size]
            block = np.zeros((len(part), 3), dtype=np.uint64)
            block[:, :2] = part
            yield block

    return chunks


def _key_le(block: NDArray[np.uint64], bound: NDArray[np.uint64]) -> int:
    """How many leading records of sorted ``block`` are <= ``bound`` (lexicographic)."""
    hi, lo, number = block[:, 0], block[:, 1], block[:, 2]
    le = (hi < bound[0]) | (
        (hi == bound[0]) & ((lo < bound[1]) | ((lo == bound[1]) & (number <= bound[2])))
    )
    return int(le.sum())


def _merge(sources: list[_Chunks], note) -> Iterator[NDArray[np.uint64]]:  # type: ignore[no-untyped-def]
    """Merge sorted streams of records into sorted pieces, holding one chunk per stream.

    Every record up to the smallest "last record of the current chunk" among streams that have
    more chunks can be emitted: no later record of any stream sorts before it.
    """
    if len(sources) == 1:  # one sorted stream: nothing to merge
        for chunk in sources[0]:
            note(chunk.nbytes)
            yield chunk
        return
    heads: list[NDArray[np.uint64] | None] = [next(s, None) for s in sources]
    while True:
        live = [i for i, head in enumerate(heads) if head is not None and len(head)]
        if not live:
            return
        bounds = [heads[i][-1] for i in live]  # type: ignore[index]
        bound = min(bounds, key=lambda r: (int(r[0]), int(r[1]), int(r[2])))
        taken = []
        for i in live:
            head = heads[i]
            assert head is not None
            count = _key_le(head, bound)
            taken.append(head[:count])
            heads[i] = head[count:] if count < len(head) else next(sources[i], None)
        piece = np.concatenate(taken)
        _core.sort_records(piece)
        held = sum(h.nbytes for h in heads if h is not None)
        note(held + piece.nbytes + sum(t.nbytes for t in taken))
        yield piece
