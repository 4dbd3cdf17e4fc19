"""Stage 3's API: ``tokenize`` (cleaned rows -> per-file token arrays, formats.md §3) and the
options it hands the Rust core (``tokenize_options``: also what a scale-out plan records).

The work runs in the Rust core (``data_io._core.tokenize``) with the GIL released.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from data_io.errors import ConfigError, OutputError
from data_io.tokenize.options import (
    DEFAULT_BATCH_ROWS,
    DEFAULT_BOQ,
    DEFAULT_EOA,
    DEFAULT_EOQ,
    DEFAULT_TOKENIZER,
    TokenizeOptions,
    conditions_pairs,
)
from data_io.tokenize.result import TokenizeResult
from data_io.tokenizer.files import resolve_tokenizer


def parse_conditions(text: str) -> dict[str, str]:
    """``direct=<|a|>,cot=<|b|>`` -> {"direct": "<|a|>", "cot": "<|b|>"}; "" -> {}."""
    mapping: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        tag, sep, token = item.partition("=")
        if not sep or not tag or not token:
            raise ConfigError(
                f"--conditions item {item!r} is not TAG=TOKEN (e.g. direct=<|object_ref_start|>)"
            )
        if tag in mapping:
            raise ConfigError(f"--conditions gives tag {tag!r} twice")
        mapping[tag] = token
    return mapping


def tokenize(
    inputs: Sequence[str | Path],
    output: str | Path,
    *,
    tokenizer_path: str | Path = DEFAULT_TOKENIZER,
    boq: str = DEFAULT_BOQ,
    eoq: str = DEFAULT_EOQ,
    eoa: str = DEFAULT_EOA,
    conditions: Mapping[str, str] | None = None,
    on_error: str = "fail",
    threads: int | None = None,
    token_dtype: str = "uint32",
    progress: bool | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    check: bool = True,
    parts: str | Path | None = None,
) -> TokenizeResult:
    """Tokenize every ``.jsonl`` (also ``.jsonl.gz``, ``.jsonl.zst``; any case) and
    ``.parquet`` file under ``inputs`` into ``output``.

    Incremental: files whose content, tokenizer and options are unchanged are kept; a task
    folder not produced by this run is removed only if data_io wrote it and its recorded
    source file is gone (others are kept and listed in ``kept``). With ``check`` (default), a
    failed file, a MIXED output (see ``mixed``) or no row at all raises after all the work is
    done; the result is attached as ``.result``. ``progress=None`` shows a bar when stderr is a terminal.
    ``parts``: a folder where ``data_io.scale`` units left encoded parts of files; a file whose
    parts are all there and current is assembled from them instead of encoded.
    """
    from data_io import _core  # noqa: PLC0415  CLI start-up: the Rust extension loads when work starts

    if parts is None:
        # Parts a scaled-out run left (finished units of an unfinished run) are used too.
        left = Path(output) / ".data_io_scale" / "parts"
        parts = left if left.is_dir() else None
    options = checked_options(
        inputs,
        output,
        tokenizer_path=tokenizer_path,
        boq=boq,
        eoq=eoq,
        eoa=eoa,
        conditions=conditions,
        on_error=on_error,
        threads=threads,
        token_dtype=token_dtype,
        progress=progress,
        batch_rows=batch_rows,
        parts=parts,
    )
    result = TokenizeResult.from_json(_core.tokenize(options.to_json()))
    if check:
        result.raise_for_failures()
    return result


def _not_another_stages_output(output: Path) -> None:
    """Tokenize leaves foreign entries of its output alone (a user's notes), but its tasks
    written beside another stage's whole output would mix two datasets in one folder."""
    if (output / "dataset_metadata.json").is_file():
        other = "holds `data_io prepare`'s shards (dataset_metadata.json)"
    elif (output / "metadata.json").is_file() and (output / "epoch_0").is_dir():
        other = "is a sampled folder (`data_io sample`'s output)"
    else:
        return
    raise OutputError(
        f"{output} {other}; tokenize into another folder (a new one, or one an earlier "
        "`data_io tokenize` wrote)"
    )


def tokenize_options(inputs: Sequence[str | Path], output: str | Path, **options: Any) -> dict:
    """The options of ``tokenize`` checked and made plain (JSON-ready, the tokenizer resolved
    to its file), as a ``scale`` manifest records them: ``checked_options``'
    ``TokenizeOptions.to_dict`` (the same keyword arguments)."""
    return checked_options(inputs, output, **options).to_dict()


def checked_options(
    inputs: Sequence[str | Path],
    output: str | Path,
    *,
    tokenizer_path: str | Path = DEFAULT_TOKENIZER,
    boq: str = DEFAULT_BOQ,
    eoq: str = DEFAULT_EOQ,
    eoa: str = DEFAULT_EOA,
    conditions: Mapping[str, str] | None = None,
    on_error: str = "fail",
    threads: int | None = None,
    token_dtype: str = "uint32",
    progress: bool | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    parts: str | Path | None = None,
) -> TokenizeOptions:
    """``tokenize``'s arguments as ``TokenizeOptions``: each value checked, the tokenizer
    resolved to its file, an output that is another stage's refused."""
    options = TokenizeOptions(
        inputs=tuple(str(p) for p in inputs),
        output=str(output),
        boq=boq,
        eoq=eoq,
        eoa=eoa,
        conditions=conditions_pairs(conditions),
        on_error=on_error,
        threads=threads,
        token_dtype=token_dtype,
        progress=sys.stderr.isatty() if progress is None else progress,
        batch_rows=batch_rows,
        parts=None if parts is None else str(parts),
    )
    _not_another_stages_output(Path(output))
    return dataclasses.replace(options, tokenizer_path=str(resolve_tokenizer(tokenizer_path)))
