"""Pass 1 of ``prepare`` for one source, done ahead by a ``scale`` unit: the source's documents
read, cleaned, hashed and encoded into a part folder (tokens, lengths and hashes, as the run's
spool holds them, plus a record). The finalize run replays each part in its source's place,
so de-duplication, the split and the shards come out exactly as in one run.

A large file may be shared by several units, each reading a byte range of it
(``formats.ranges``): its parts are replayed one after the other, in file order, and only
when they cover the whole file.

A part is written under a temporary name and renamed when complete; it is used only when it
was made from the same content (SHA-256) with the same options and tokenizer.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from data_io.formats.raw_text import (
    FOLDER_READ_KEYS,
    ReadOptions,
    ReadStats,
    Source,
    empty_input_error,
    recorded_read,
)
from data_io.prepare.dedup import HashDedup, NearDedup
from data_io.prepare.lines import LineDedup, LineSpool, replay_line_part
from data_io.prepare.normalize import CleanOptions, CleanStats
from data_io.prepare.pipeline import Spool, encode_inputs
from data_io.prepare.progress import ProgressBar
from data_io.prepare.split import is_val
from data_io.prepare.tokenizers import PrepTokenizer
from data_io.util.fs import write_json_atomic

RECORD = "part.json"
_REPLAY_DOCUMENTS = 1 << 16


class Part:
    """A finished part: ``replay`` appends its documents as if its source were read now."""

    def __init__(self, folder: Path, record: dict[str, Any]) -> None:
        self.folder = folder
        self.record = record

    def _array(self, name: str, dtype: Any) -> Any:
        path = self.folder / f"{name}.bin"
        if path.stat().st_size == 0:
            return np.zeros(0, dtype=dtype)
        return np.memmap(path, dtype=dtype, mode="r")

    def replay(
        self,
        dedup: HashDedup | None,
        seed: int,
        val_fraction: float,
        spool: Spool | LineSpool,
        stats: ReadStats,
        clean_stats: CleanStats,
        lines: LineDedup | None = None,
    ) -> None:
        if lines is not None:  # --dedup line: the cleaned text and its line hashes
            assert isinstance(spool, LineSpool)
            replay_line_part(self.folder, spool, lines, seed, val_fraction)
            self._add_stats(stats, clean_stats)
            return
        assert isinstance(spool, Spool)
        tokens = self._array("tokens", np.uint32)
        lengths = self._array("lengths", np.int64)
        hashes = self._array("hashes", np.uint64).reshape(-1, 2)
        near = self.record.get("options", {}).get("near_dedup")
        bands = self._array("bands", np.uint64).reshape(-1, near["bands"], 2) if near else None
        first_token = 0
        for start in range(0, len(lengths), _REPLAY_DOCUMENTS):
            stop = min(start + _REPLAY_DOCUMENTS, len(lengths))
            chunk = np.asarray(hashes[start:stop])
            if dedup is not None:
                records = chunk if bands is None else np.asarray(bands[start:stop])
                dedup.add(records, spool.documents)
            offsets = np.concatenate([[0], np.cumsum(lengths[start:stop])]).astype(np.int64)
            ids = np.asarray(tokens[first_token : first_token + int(offsets[-1])])
            spool.append(ids, offsets, is_val(chunk, seed, val_fraction), chunk)
            first_token += int(offsets[-1])
        self._add_stats(stats, clean_stats)

    def _add_stats(self, stats: ReadStats, clean_stats: CleanStats) -> None:
        read = self.record["read"]
        stats.documents += read["documents"]
        stats.bytes_read += read["bytes_read"]
        stats.text_chars += read["text_chars"]
        stats.invalid_utf8_lines += read["invalid_utf8_lines"]
        if self.record.get("span") is None:  # a range's emptiness is its whole file's business
            stats.empty_sources.extend(read["empty_sources"])
        clean_stats.add(CleanStats(**self.record["clean"]))


class PartChain:
    """The parts of a file's byte ranges, replayed in file order as one part of the file."""

    def __init__(self, source: Source, parts: list[Part]) -> None:
        self.source = source
        self.parts = parts

    def replay(
        self,
        dedup: HashDedup | None,
        seed: int,
        val_fraction: float,
        spool: Spool | LineSpool,
        stats: ReadStats,
        clean_stats: CleanStats,
        lines: LineDedup | None = None,
    ) -> None:
        before = stats.documents
        for part in self.parts:
            part.replay(dedup, seed, val_fraction, spool, stats, clean_stats, lines)
        if stats.documents == before:  # as the file read whole: no document in any range
            if self.source.explicit:
                raise empty_input_error(self.source)
            stats.empty_sources.append(self.source.name)


def write_part(
    source: Source,
    read: ReadOptions,
    clean: CleanOptions,
    tokenizer: PrepTokenizer,
    folder: Path,
    identity: dict[str, Any],
) -> dict[str, Any]:
    """Pass 1 of ``source`` into the part folder ``folder`` (replaced when it exists); its
    record. ``identity``: the source's entry and the run's options, which a finalize run must
    match for the part to be used. A source with a ``span`` is read in that byte range only."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".tmp-{folder.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        options = identity.get("options", {})
        near = NearDedup(**options["near_dedup"]) if "near_dedup" in options else None
        by_lines = options.get("dedup") == "line"
        spool: Spool | LineSpool = (
            LineSpool(tmp, with_hashes=True)
            if by_lines
            else Spool(tmp, with_hashes=True, bands=near.bands if near is not None else 0)
        )
        try:
            # The val flags are recomputed from the hashes at replay (the seed is the run's).
            stats, clean_stats = encode_inputs(
                [source], read, clean, tokenizer, None, 0, 0.0, spool, ProgressBar(0, False),
                near=near, lines=LineDedup() if by_lines else None,
            )  # fmt: skip
        finally:
            spool.close()
        span = source.span
        # A range of the file: where it starts and ends, in bytes or row groups, of how many.
        total = None if span is None else getattr(span, "total", source.size)
        record = {
            **identity,
            "span": None if span is None else {"start": span.start, "end": span.end, "of": total},
            "documents": spool.documents,
            "tokens": spool.tokens,
            "read": asdict(stats),
            "clean": clean_stats.as_dict(),
        }
        write_json_atomic(tmp / RECORD, record)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return record


def read_part(folder: Path) -> Part | None:
    try:
        return Part(folder, json.loads((folder / RECORD).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def _made_alike(part: Part, entry: dict[str, Any], options: dict[str, Any]) -> bool:
    """Whether ``part`` was made from the content ``entry`` names, with its text chosen as
    ``entry`` says and the run's ``options``. A part made before inputs recorded their own
    text field, split and configuration has them in its options instead."""
    made = part.record.get("options") or {}
    source = part.record.get("source") or {}
    shared = {key: value for key, value in made.items() if key not in FOLDER_READ_KEYS}
    return (
        source.get("sha256") == entry.get("sha256")
        and recorded_read(source, made) == entry.get("read")
        and shared == options
    )


def parts_lookup(
    root: Path, entries: dict[str, dict[str, Any]], options: dict[str, Any]
) -> Callable[[Source], Part | PartChain | None]:
    """For a source of this run, its part under ``root`` when one was made from the same
    content (``entries``: the run's identity of each new source) with the same options; or
    the parts of its byte ranges, when they cover the whole file."""
    found: dict[str, list[Part]] = {}
    if root.is_dir():
        for folder in sorted(root.iterdir()):
            part = None if folder.name.startswith(".") else read_part(folder)
            if part is not None:
                found.setdefault(part.record.get("source", {}).get("name", ""), []).append(part)

    def lookup(source: Source) -> Part | PartChain | None:
        entry = entries.get(source.name)
        if entry is None:
            return None
        usable = [part for part in found.get(source.name, []) if _made_alike(part, entry, options)]
        whole = [part for part in usable if part.record.get("span") is None]
        if whole:
            return whole[0]
        ranged = sorted(usable, key=lambda part: part.record["span"]["start"])
        covered, total = 0, None
        for part in ranged:
            span = part.record["span"]
            if span["start"] != covered or total not in (None, span.get("of")):
                return None  # a range missing (or two plans' ranges mixed): read it here
            covered, total = span["end"], span.get("of")
        # Byte ranges end at the file's size; a compressed file's text ranges and Parquet's row
        # groups at the planned total.
        if source.kind != "parquet" and source.compression is None and total != source.size:
            return None
        return PartChain(source, ranged) if ranged and covered == total else None

    return lookup
