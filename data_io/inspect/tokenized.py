"""A tokenized folder (``tokenizer_info.json``; formats.md §3): each task through `data_io
sample`'s own checks, a few rows decoded with their special tokens."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from data_io.errors import InputError
from data_io.formats.prefix_config import PrefixConfig
from data_io.formats.provenance import (
    check_interrupted_tokenize,
    damaged_task_advice,
    read_task_origin,
    repair_command,
    untokenized_sources,
)
from data_io.inspect.report import PREVIEW_CHARS, InspectReport, hf_decode, no_tokenizer
from data_io.sampling.tasks import load_tokenizer_info, read_task, select_task_folders


def inspect_tokenized(folder: Path, documents: int, tokenizer: str | None) -> InspectReport:
    report = InspectReport(str(folder), "tokenized folder")
    try:
        info = load_tokenizer_info(folder)
    except InputError as err:  # not JSON, not an object, a bad vocab_size
        report.problems.append(f"{err}; re-run data_io tokenize into a new folder")
        return report
    vocab = info.get("vocab_size")
    report.facts = {"tokenizer": info.get("tokenizer_path"), "vocab_size": vocab}
    rows_table = []
    first_task: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    # What tokenize and sample take for task folders: the others are named, not read.
    selection = select_task_folders(folder)
    if (skipped := selection.skipped_note()) is not None:
        report.notes.append(skipped)
    sampled = selection.sampled_outputs()
    for suspect, why in selection.suspect:
        if suspect in sampled:  # re-tokenizing has nothing to do with it
            report.problems.append(
                f"{suspect}: a sampled folder (`data_io sample`'s output), not a task, inside "
                f"the tokenized folder, whose sub-folders `data_io sample` reads as tasks (it "
                f"refuses this one); move it out of {folder} (a sample's output_path must lie "
                "outside tokenized_path)"
            )
            continue
        report.problems.append(
            f"{suspect}: task arrays, but {why}: `data_io tokenize` will not replace this "
            f"folder and `data_io sample` refuses it; move it out of {folder} (or delete it if "
            "it is a damaged task), then re-run the tokenize command"
        )
    suspects = {path for path, _ in selection.suspect}
    for task in (path for path in selection.folders if path not in suspects):
        try:  # sample's own checks: dtypes, shapes, the row layout, the tokenizer's record
            read_task(task, PrefixConfig(), read_task_origin(task))
        except InputError as err:
            report.problems.append(
                f"{err}. {damaged_task_advice(task, repair_command(folder, info))}"
            )
            continue
        try:
            arrays = {
                n: np.load(task / f"{n}.npy", mmap_mode="r")
                for n in ("tokens", "inst_start", "inst_len", "resp_start", "resp_len")
            }
        except (OSError, ValueError, EOFError) as err:  # EOFError: an empty file
            report.problems.append(f"{task}: unreadable arrays ({err}); re-run data_io tokenize")
            continue
        rows = {len(arrays[n]) for n in ("inst_start", "inst_len", "resp_start", "resp_len")}
        tokens = arrays["tokens"]
        if len(rows) != 1:
            report.problems.append(f"{task}: the four index arrays differ in length")
            continue
        ends = np.asarray(arrays["resp_start"]) + np.asarray(arrays["resp_len"])
        if len(ends) and int(ends.max()) > len(tokens):
            report.problems.append(f"{task}: a row ends past tokens.npy ({len(tokens)} tokens)")
        if vocab and len(tokens) and int(np.max(tokens)) >= vocab:
            report.problems.append(f"{task}: a token id is not below vocab_size {vocab}")
        rows_table.append({"task": task.name, "rows": rows.pop(), "tokens": len(tokens)})
        if first_task is None:
            first_task = (
                tokens,
                np.asarray(arrays["inst_start"]),
                np.asarray(arrays["resp_start"]),
                ends,
            )
    report.tables["tasks"] = rows_table
    report.facts["tasks"] = len(rows_table)
    # What sample says of an interrupted or unfinished tokenize run, said here too.
    origins = [read_task_origin(task) for task in selection.folders if task not in suspects]
    try:
        report.notes += check_interrupted_tokenize(folder, info, origins)
    except InputError as err:  # tasks lost mid-replacement: sample refuses the folder
        report.problems.append(str(err))
    report.notes += untokenized_sources(folder, info, origins, sampling=False)
    path = tokenizer or info.get("tokenizer_path")
    if documents and first_task is not None and path and (tokenizer or Path(path).exists()):
        tokens, starts, middles, ends = first_task
        for start, middle, end in list(zip(starts, middles, ends, strict=True))[:documents]:
            report.samples.append(row_sample(path, tokens, int(start), int(middle), int(end)))
    elif documents and first_task is not None:
        report.notes.append(f"rows not decoded: {no_tokenizer(path)}; pass --tokenizer PATH")
    return report


def row_sample(tokenizer: str, tokens: np.ndarray, start: int, middle: int, end: int) -> str:
    """One row of the tokenized layout decoded: its instruction (BOQ, tags, text, EOQ) and its
    response (text, EOA), each cut to its head and tail, so that every special token shows."""
    half = PREVIEW_CHARS // 2
    parts = []
    for lo, hi in ((start, middle), (middle, end)):
        text = hf_decode(tokenizer, np.asarray(tokens[lo:hi]).tolist())
        parts.append(text if len(text) <= half else f"{text[: half - 40]} … {text[-40:]}")
    return "".join(parts)
