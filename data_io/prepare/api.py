"""``prepare(...)``: the Python API of ``data_io prepare`` (raw text → train/val token shards)."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from data_io.formats.raw_text import Source
from data_io.prepare.dedup import (
    ONLINE_ASSUMED_DOCUMENT_BYTES,
    ONLINE_ASSUMED_LINE_BYTES,
    ONLINE_BYTES_PER_BAND,
    ONLINE_BYTES_PER_RECORD,
    DedupOverflow,
    OnlineDedup,
)
from data_io.prepare.leftover_parts import SCALE_PARTS, settle_scaled_run
from data_io.prepare.parts import parts_lookup
from data_io.prepare.pipeline import encoder_threads
from data_io.prepare.result import PrepareResult
from data_io.prepare.run import run_new_sources
from data_io.prepare.run_plan import plan_run
from data_io.prepare.state import SPLITS, exclusive

__all__ = ["PrepareResult", "prepare"]


def _one_run_per_folder(function: Callable[..., PrepareResult]) -> Callable[..., PrepareResult]:
    """Run ``prepare`` holding its output folder (``state.exclusive``)."""

    @functools.wraps(function)
    def locked(inputs: Any, output: str | os.PathLike[str], **options: Any) -> PrepareResult:
        with exclusive(Path(output).expanduser()):
            return function(inputs, output, **options)

    return locked


@_one_run_per_folder
def prepare(
    inputs: list[str | os.PathLike[str]] | str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    tokenizer: str = "gpt2",
    tokens_per_shard: int = 10_000_000,
    val_fraction: float = 0.1,
    normalize: bool = True,
    filter: bool = True,
    min_line_chars: int = 2,
    min_doc_chars: int = 20,
    dedup: bool | str = True,
    dedup_memory: str | int = "1GB",
    near_ngram: int = 5,
    near_bands: int = 14,
    near_rows: int = 8,
    text_field: str = "text",
    doc_per_line: bool = False,
    invalid_utf8: str = "replace",
    format: str = "bin",
    dtype: str = "auto",
    seed: int = 0,
    threads: int | None = None,
    eos_token: str | int | None = None,
    split: str = "train",
    hf_config: str | None = None,
    layout: str = "data_io",
    progress: bool | None = None,
    parts: str | os.PathLike[str] | None = None,
) -> PrepareResult:
    """Prepare ``inputs`` into train/val token shards in ``output`` (see ``data_io prepare -h``).

    Incremental: inputs already prepared into ``output`` (same path, same content) are skipped;
    new ones are appended as new shards, the earlier shards are left as they are. ``parts``: a
    folder where ``data_io.scale`` units left pass 1 of some sources (``prepare.parts``); those
    sources are taken from there (default: the parts an unfinished scaled run left in
    ``output``).
    """
    started = time.perf_counter()
    plan = plan_run(
        inputs,
        output,
        tokenizer=tokenizer,
        tokens_per_shard=tokens_per_shard,
        val_fraction=val_fraction,
        normalize=normalize,
        filter=filter,
        min_line_chars=min_line_chars,
        min_doc_chars=min_doc_chars,
        dedup=dedup,
        dedup_memory=dedup_memory,
        near_ngram=near_ngram,
        near_bands=near_bands,
        near_rows=near_rows,
        text_field=text_field,
        doc_per_line=doc_per_line,
        invalid_utf8=invalid_utf8,
        format=format,
        dtype=dtype,
        seed=seed,
        threads=threads,
        eos_token=eos_token,
        split=split,
        hf_config=hf_config,
        layout=layout,
    )
    out, metadata, new = plan.out, plan.metadata, plan.new
    result = PrepareResult(
        str(out), not new, [s.name for s, _ in new], plan.known, plan.skipped, plan.same_as
    )
    result.rolled_back = plan.rolled_back
    result.val_fraction = float(plan.options["val_fraction"])
    # The parts an unfinished scaled run left here, taken unless other parts are given.
    left_by_plan = parts is None and (out / SCALE_PARTS).is_dir()
    if left_by_plan:
        parts = out / SCALE_PARTS
    lookup = None
    if parts is not None:
        plan.digests.wait()  # a part is matched to its source by content
        find = parts_lookup(Path(parts), {s.name: e for s, e in new}, plan.options)

        def lookup(source: Source) -> Any:
            part = find(source)
            if part is not None:
                result.from_parts.append(source.name)
            return part

    if new:
        sources = [s for s, _ in new]
        # Straight to the shards when nothing is left to decide after pass 1: no dedup, or
        # duplicates (documents, lines, near-duplicates) decided as they arrive while their
        # records fit the budget (a run whose records outgrow it is rolled back and goes again
        # with sorted runs).
        mode = plan.options["dedup"]
        # Bytes of input per record the online set would hold: a line, a document, or one of
        # a document's near-dedup bands.
        bands = plan.options.get("near_dedup", {}).get("bands", 1)
        record = {"line": ONLINE_ASSUMED_LINE_BYTES, "near": ONLINE_ASSUMED_DOCUMENT_BYTES // bands}
        direct = (
            plan.tok.kind != "char"
            and lookup is None
            and (
                mode is False
                or OnlineDedup.fits(
                    sum(s.size for s in sources),
                    plan.budget,
                    record.get(mode, ONLINE_ASSUMED_DOCUMENT_BYTES),
                    ONLINE_BYTES_PER_BAND if mode == "near" else ONLINE_BYTES_PER_RECORD,
                )
            )
        )
        with encoder_threads(threads):
            try:
                run_new_sources(out, metadata, sources, [e for _, e in new], plan, progress,
                                result, lookup, direct)  # fmt: skip
                overflowed = False
            except DedupOverflow:
                # Outside the handler: its traceback would keep the first try's set alive.
                overflowed = True
            if overflowed:
                run_new_sources(out, metadata, sources, [e for _, e in new], plan, progress,
                                result, lookup, direct=False)  # fmt: skip
    elif metadata is not None:
        result.dtype, result.vocab_size = metadata["dtype"], metadata["vocab_size"]
        result.eos_id = metadata["eos_id"]
        result.dataset_tokens = {s: metadata["splits"][s]["tokens"] for s in SPLITS}
    if left_by_plan:
        result.settled_plan = settle_scaled_run(out)
    result.seconds = time.perf_counter() - started
    return result
