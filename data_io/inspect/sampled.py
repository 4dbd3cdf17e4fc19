"""A sampled folder (``metadata.json`` with ``tokenizer_info``; formats.md §4): the pool and every
epoch's row table, read by the loader's own reader."""

from __future__ import annotations

from pathlib import Path

from data_io.errors import InputError
from data_io.formats.sampled import (
    _sampled_epochs,
    check_epochs_present,
    open_epoch,
    open_tokens,
    read_metadata,
)
from data_io.inspect.report import InspectReport, no_tokenizer
from data_io.inspect.tokenized import row_sample


def inspect_sampled(folder: Path, documents: int, tokenizer: str | None) -> InspectReport:
    report = InspectReport(str(folder), "sampled folder")
    try:
        meta = read_metadata(folder)
        tokens = open_tokens(folder, meta)
        check_epochs_present(folder, meta)  # as the loader does: an epoch lost is a problem
        epochs = []
        for epoch in _sampled_epochs(folder):
            index = open_epoch(folder, epoch, len(tokens), meta)
            epochs.append({"epoch": epoch, "rows": index.rows})
    except InputError as err:
        report.problems.append(str(err))
        return report
    report.facts = {
        "tokens": len(tokens),
        "dtype": tokens.dtype.name,
        "max_seq_len": meta.max_seq_len,
        "vocab_size": meta.vocab_size,
        "epochs": len(epochs),
    }
    report.tables["epochs"] = epochs
    path = tokenizer or meta.tokenizer_info.get("tokenizer_path")
    # --tokenizer is used as given (a Hub id too; a wrong one is an error naming it), the
    # folder's recorded tokenizer only where it still is.
    if documents and epochs and path and (tokenizer or Path(path).exists()):
        index = open_epoch(folder, epochs[0]["epoch"], len(tokens), meta, check=False)
        for row in range(min(documents, index.rows)):
            start, middle = int(index.inst_start[row]), int(index.resp_start[row])
            end = middle + int(index.resp_len[row])
            report.samples.append(row_sample(path, tokens, start, middle, end))
    elif documents and epochs:
        report.notes.append(f"rows not decoded: {no_tokenizer(path)}; pass --tokenizer PATH")
    return report
