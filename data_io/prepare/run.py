"""``run_new_sources``: one run over the new sources (pass 1, the dedup, pass 2, the shards
committed, the metadata written); on any failure the folder is rolled back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from data_io.errors import InputError
from data_io.formats.raw_text import Source
from data_io.prepare.dataset_metadata import metadata_after_run
from data_io.prepare.dedup import HashDedup, NearDedup, OnlineDedup
from data_io.prepare.lines import LineDedup, LineSpool, write_line_shards
from data_io.prepare.normalize import CleanStats
from data_io.prepare.pipeline import ShardSink, Spool, check_dtype, encode_inputs, write_shards
from data_io.prepare.progress import ProgressBar
from data_io.prepare.result import PrepareResult
from data_io.prepare.run_plan import RunPlan
from data_io.prepare.shards import ShardWriter, number_across
from data_io.prepare.state import (
    SPLITS,
    STATE_DIR,
    DamagedShards,
    begin_run,
    end_run,
    rollback,
    split_records,
    write_metadata,
)
from data_io.prepare.tokenizers import CHAR_STATE_FILE, PrepTokenizer, write_state


def run_new_sources(
    out: Path,
    metadata: dict[str, Any] | None,
    sources: list[Source],
    entries: list[dict[str, Any]],
    plan: RunPlan,
    progress: bool | None,
    result: PrepareResult,
    parts: Callable[[Source], Any] | None = None,
    direct: bool = False,
) -> None:
    """One run over the new sources; on any failure the folder is rolled back.

    ``direct``: pass 1 writes the shards itself (``ShardSink``), duplicates (documents, lines
    or near-duplicates' bands) dropped as they arrive (``OnlineDedup``; ``DedupOverflow`` when
    its records outgrow the budget). Else pass 1 spools the tokens (the cleaned text, under
    ``line``), and pass 2 copies (or rebuilds and encodes) the documents the dedup keeps."""
    tok, options, budget = plan.tok, plan.options, plan.budget
    run = len(metadata["runs"]) if metadata else 0
    writers: dict[str, ShardWriter] = {}
    hashes = metadata.get("dedup_hashes") if metadata else None
    prior = out / STATE_DIR / hashes if hashes else None
    by_lines = options["dedup"] == "line"
    try:
        # Inside the rollback's reach: a run stopped here (Ctrl-C during the journal's fsync)
        # left its work folder without a journal, and the next run took ``.prepare`` for
        # files prepare did not write.
        work = begin_run(out, run)
        online = None
        if direct:
            writers = _writers(out, metadata, options, tok)
            spool: Spool | ShardSink | LineSpool = ShardSink(writers)
            if options["dedup"]:
                near = options.get("near_dedup") if options["dedup"] == "near" else None
                online = OnlineDedup(
                    budget, sum(s.size for s in sources), near["bands"] if near else None
                )
                if prior is not None:
                    online.load_prior(prior)
        else:
            spool = LineSpool(work) if by_lines else Spool(work)
        dedup = HashDedup(work, budget) if options["dedup"] and not direct else None
        lines = LineDedup(online, dedup) if by_lines else None
        if lines is not None:  # the line records go through ``lines``, not the documents'
            online = dedup = None
        bar = ProgressBar(sum(s.size for s in sources), progress)
        try:
            read_stats, clean_stats = encode_inputs(
                sources,
                plan.read,
                plan.clean,
                tok,
                dedup,
                options["seed"],
                options["val_fraction"],
                spool,
                bar,
                parts,
                NearDedup(**options["near_dedup"]) if "near_dedup" in options else None,
                online,
                lines,
            )
        finally:
            spool.close()
            bar.close()
        if spool.documents == 0 and metadata is None:
            raise InputError(_nothing_left(read_stats.documents, clean_stats))
        tok.finish()
        online = lines.online if lines is not None else online
        if online is not None:
            hashes = f"hashes_{run:05d}.u64"
            online.write_kept(out / STATE_DIR / hashes)
            result.duplicates, result.dedup_peak_bytes = online.duplicates, online.peak_bytes
            if lines is not None:
                result.duplicate_lines, result.duplicates = online.duplicates, lines.emptied
        if isinstance(spool, ShardSink):
            result.documents = spool.per_split
        elif isinstance(spool, LineSpool):
            assert lines is not None and lines.after is not None
            keep = np.zeros(0, dtype=np.bool_)
            if spool.lines:  # (none new: the earlier runs' hashes file stays as it is)
                hashes = f"hashes_{run:05d}.u64"
                keep, result.duplicate_lines = lines.after.keep_mask(
                    spool.lines, prior, out / STATE_DIR / hashes
                )
                result.dedup_peak_bytes = lines.after.peak_bytes
                result.dedup_runs = lines.after.spilled
            writers = _writers(out, metadata, options, tok)
            sink = ShardSink(writers)
            result.duplicates = write_line_shards(spool, keep, tok, sink)
            result.documents = sink.per_split
        else:
            keep = None
            if dedup is not None and spool.documents:
                hashes = f"hashes_{run:05d}.u64"
                keep, result.duplicates = dedup.keep_mask(
                    spool.documents, prior, out / STATE_DIR / hashes
                )
                result.dedup_peak_bytes, result.dedup_runs = dedup.peak_bytes, dedup.spilled
            writers = _writers(out, metadata, options, tok)
            result.documents = write_shards(spool, keep, tok, writers)
        dtype = next(iter(writers.values())).dtype
        records = {s: w.finish() for s, w in writers.items()}
        mypt = options.get("layout") == "mypt"
        if mypt:
            number_across([writers[s] for s in SPLITS])
        for writer in writers.values():
            writer.commit()
        tokenizer_files = tok.save(out)
        if mypt and tok.spec == "gpt2":
            # MyPT's trainer rebuilds its tokenizer from this file (token_kind, chars).
            write_state(out, {"token_kind": "gpt2", "chars": None})
            tokenizer_files.append(CHAR_STATE_FILE)
        for s, w in writers.items():
            result.tokens[s] = w.tokens_added
            result.shards_written[s] = [shard.final.name for shard in w.written]
        result.documents_read = read_stats.documents
        result.bytes_read = sum(s.size for s in sources)
        result.text_chars = read_stats.text_chars
        result.invalid_utf8 = read_stats.invalid_utf8_lines
        result.skipped_files.extend(f"{name} (no documents)" for name in read_stats.empty_sources)
        result.cleaning = clean_stats.as_dict()
        result.dtype, result.vocab_size, result.eos_id = dtype.name, tok.vocab_size, tok.eos_id
        plan.digests.wait()  # the new files' hashes, read while pass 1 ran
        new_metadata = metadata_after_run(
            metadata, run, records, options, tok, tokenizer_files, hashes, entries, result
        )
        result.dataset_tokens = {s: new_metadata["splits"][s]["tokens"] for s in SPLITS}
        write_metadata(out, new_metadata)
        old_hashes = metadata.get("dedup_hashes") if metadata else None
        if old_hashes and old_hashes != hashes:  # merged into the new file: no longer referenced
            (out / STATE_DIR / old_hashes).unlink(missing_ok=True)
    except BaseException as error:
        for writer in writers.values():
            try:
                writer.abandon()
            except OSError as failed:  # the others, and the rollback, still run
                error.add_note(f"while removing this run's shards: {failed}")
        try:
            rollback(out, metadata)
        except DamagedShards as damaged:  # left untouched; the run's own error comes first
            error.add_note(str(damaged))
        raise
    end_run(out, work)


def _writers(
    out: Path, metadata: dict[str, Any] | None, options: dict[str, Any], tok: PrepTokenizer
) -> dict[str, ShardWriter]:
    """The train and val shard writers, in the dtype of the vocabulary (or of earlier runs)."""
    dtype = check_dtype(
        options["dtype"],
        tok.vocab_size,
        metadata and metadata["dtype"],
        growable=tok.kind == "char",
    )
    return {
        s: ShardWriter(
            out / s,
            options["tokens_per_shard"],
            dtype,
            options["format"],
            split_records(metadata, s),
        )
        for s in SPLITS
    }


def _nothing_left(read: int, stats: CleanStats) -> str:
    dropped = ", ".join(f"{count} {why.replace('_', ' ')}" for why, count in stats.dropped.items())
    return (
        f"no document is left to prepare: {read} read, all dropped ({dropped}); pass "
        "--no-filter or a lower --min-doc-chars, or inputs with more text"
    )
