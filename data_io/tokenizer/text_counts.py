"""Training on raw text (``train-tokenizer --text-field FIELD``): the sources ``prepare`` reads
(``.txt``, JSONL, Parquet, each text or JSONL file optionally ``.gz .zst .bz2 .xz``, and
``datasets`` sources: Hub ids, ``hf download`` and ``save_to_disk`` folders), read by
``data_io.formats.raw_text``, each document one text. Documents go to the Rust counter
(``_core.SourceCounter``) in batches, counted without the GIL on its threads in the memory
budget; each source's counts become one run in a scratch folder beside the output, which the
merge pass then reads (``train_tokenizer(count_parts=...)`` with no row inputs) and which is
removed afterwards.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from data_io.formats.raw_reading import read_documents
from data_io.formats.raw_text import ReadOptions, ReadStats, expand_inputs
from data_io.util.stale import remove_dead_siblings, temporary_prefix

# Documents handed over per call (and at most this many characters): enough for every thread.
BATCH_TEXTS = 8192
BATCH_CHARS = 32 << 20
SCRATCH_NAME = "train-tokenizer"


@dataclass(frozen=True)
class TextCounts:
    folder: Path
    sources: int
    documents: int
    raw_bytes: int  # read from disk (compressed bytes for a compressed file)
    invalid_utf8_lines: int
    empty_sources: list[str]
    skipped_files: list[str]
    seconds: float


def count_text_sources(
    inputs: Sequence[str | os.PathLike[str]],
    folder: Path,
    *,
    read: ReadOptions,
    truncate_len: int,
    count_memory: int | None,
    threads: int | None,
    progress: bool | None,
) -> TextCounts:
    """Count the documents of every source under ``inputs`` into ``folder``."""
    from data_io import _core  # noqa: PLC0415  CLI start-up: the Rust extension loads when work starts

    started = time.perf_counter()
    sources, skipped = expand_inputs(list(inputs), read)
    counter = _core.SourceCounter(
        str(folder), count_memory=count_memory, truncate_len=truncate_len, threads=threads
    )
    stats = ReadStats()
    bar = _bar(sum(s.size for s in sources), progress)
    try:
        for k, source in enumerate(sources):
            batch: list[str] = []
            chars = 0
            for text in read_documents(source, read, stats, bar.update if bar else None):
                batch.append(text)
                chars += len(text)
                if len(batch) >= BATCH_TEXTS or chars >= BATCH_CHARS:
                    counter.add_texts(batch)
                    batch, chars = [], 0
            counter.add_texts(batch)
            counter.finish_source(f"{k:06d}", source.name)
            stats.bytes_read += source.size
    finally:
        if bar is not None:
            bar.close()
    return TextCounts(
        folder=folder,
        sources=len(sources),
        documents=stats.documents,
        raw_bytes=stats.bytes_read,
        invalid_utf8_lines=stats.invalid_utf8_lines,
        empty_sources=stats.empty_sources,
        skipped_files=skipped,
        seconds=time.perf_counter() - started,
    )


def scratch_folder(output: Path) -> Path:
    """Where the counts of a raw-text run go: beside the tokenizer (not /tmp, often memory);
    ones left by a killed run are removed first (and said so)."""
    parent = output.parent
    parent.mkdir(parents=True, exist_ok=True)
    remove_dead_siblings(parent, SCRATCH_NAME, "word-count")
    return parent / f"{temporary_prefix(SCRATCH_NAME)}counts"


def _bar(total: int, progress: bool | None):
    if not (sys.stderr.isatty() if progress is None else progress):
        return None
    from tqdm.auto import tqdm  # noqa: PLC0415  CLI start-up: tqdm, only when a bar is shown

    return tqdm(total=total or None, unit="B", unit_scale=True, desc="counting", file=sys.stderr)
