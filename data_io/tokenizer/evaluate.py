"""Is a tokenizer any good: bytes per token and tokens per word on held-out text, per input and
overall, beside reference tokenizers (``data_io train-tokenizer --eval HELD_OUT --compare ...``).

More bytes per token means shorter sequences for the same text (the cost a model pays per
token); fewer tokens per word means words are split less. A "word" here is a run of
non-whitespace characters, so for scripts written without spaces (Chinese, Japanese) tokens per
word is large for every tokenizer and only the comparison between them means something.

Held-out inputs: cleaned rows (``.jsonl``, ``.jsonl.gz``, ``.parquet``: the instruction and the
response are texts; a row with a ``text`` field gives that), plain text (``.txt``: one text per
line), or folders of these. References: a ``tokenizer.json``, a folder holding one, a Hub id, or
the name of a vocabulary built offline (``gpt2``, ``qwen``: ``data_io.tokenizer.vocabularies``).
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from data_io.errors import InputError
from data_io.tokenizer.encoder import TextEncoder
from data_io.tokenizer.files import resolve_tokenizer
from data_io.tokenizer.vocabularies import VOCABULARIES, vocabulary_path

__all__ = [
    "Compression",
    "as_table",
    "evaluate",
    "held_out_files",
    "reference_label",
    "reference_tokenizer",
]

ALL = "all inputs"
_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet", ".txt")
_WORD = re.compile(r"\S+")
_BATCH_TEXTS = 2048


@dataclass(frozen=True)
class Compression:
    """One tokenizer on one input (or on all of them: ``source == ALL``)."""

    source: str
    tokenizer: str
    texts: int
    bytes: int
    words: int
    tokens: int

    @property
    def bytes_per_token(self) -> float:
        return self.bytes / self.tokens if self.tokens else 0.0

    @property
    def tokens_per_word(self) -> float:
        return self.tokens / self.words if self.words else 0.0


def reference_tokenizer(spec: str | Path) -> Path:
    """The ``tokenizer.json`` a ``--compare`` argument names."""
    if isinstance(spec, str) and spec in VOCABULARIES:
        return vocabulary_path(spec)
    return resolve_tokenizer(spec)


def held_out_files(inputs: Sequence[str | Path]) -> list[Path]:
    """The files of ``inputs`` (folders searched recursively, hidden entries skipped)."""
    files: list[Path] = []
    for item in inputs:
        path = Path(item)
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            found = sorted(
                p
                for p in path.rglob("*")
                if p.is_file()
                and p.name.lower().endswith(_SUFFIXES)
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
            if not found:
                raise InputError(f"{path}: no held-out file in it ({', '.join(_SUFFIXES)})")
            files.extend(found)
        else:
            raise InputError(f"{path}: no such file or folder to evaluate on")
    return files


def evaluate(
    held_out: Sequence[str | Path], tokenizers: Mapping[str, str | Path]
) -> list[Compression]:
    """Every tokenizer of ``tokenizers`` (name -> path) on every held-out file, then on all of
    them together (``source == ALL``), in that order."""
    files = held_out_files(held_out)
    encoders = {name: TextEncoder(path) for name, path in tokenizers.items()}
    results: list[Compression] = []
    totals = {name: [0, 0, 0, 0] for name in encoders}
    for path in files:
        counts = {name: [0, 0, 0, 0] for name in encoders}
        for texts in _batches(_texts(path)):
            size = sum(len(t.encode("utf-8")) for t in texts)
            words = sum(len(_WORD.findall(t)) for t in texts)
            for name, encoder in encoders.items():
                tokens = len(encoder.encode_batch(texts).ids)
                for total in (counts[name], totals[name]):
                    total[0] += len(texts)
                    total[1] += size
                    total[2] += words
                    total[3] += tokens
        results.extend(Compression(str(path), name, *c) for name, c in counts.items())
    if len(files) > 1:
        results.extend(Compression(ALL, name, *c) for name, c in totals.items())
    if not any(r.texts for r in results):
        raise InputError(f"no text in {', '.join(map(str, files))} to evaluate the tokenizer on")
    return results


def _batches(texts: Iterator[str]) -> Iterator[list[str]]:
    batch: list[str] = []
    for text in texts:
        batch.append(text)
        if len(batch) == _BATCH_TEXTS:
            yield batch
            batch = []
    if batch:
        yield batch


def _texts(path: Path) -> Iterator[str]:
    """The texts of one held-out file (empty ones skipped)."""
    name = path.name.lower()
    try:
        if name.endswith(".txt"):
            with open(path, encoding="utf-8", errors="replace") as f:
                yield from (line.rstrip("\n") for line in f if line.strip())
        elif name.endswith((".jsonl", ".jsonl.gz")):
            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rt", encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    if line.strip():
                        yield from _row_texts(_json_row(line, path, number))
        elif name.endswith(".parquet"):
            yield from _parquet_texts(path)
        else:
            raise InputError(
                f"{path}: cannot evaluate on this file; held-out text is {', '.join(_SUFFIXES)}"
            )
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read it ({exc}); fix or remove the file") from None


def _json_row(line: str, path: Path, number: int) -> dict:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{number}: not a JSON row ({exc.msg})") from None
    if not isinstance(row, dict):
        raise InputError(f"{path}:{number}: a row is a JSON object, not {type(row).__name__}")
    return row


def _row_texts(row: Mapping) -> Iterator[str]:
    keys = ("text",) if isinstance(row.get("text"), str) else ("instruction", "response")
    for key in keys:
        value = row.get(key)
        if isinstance(value, str) and value:
            yield value


def _parquet_texts(path: Path) -> Iterator[str]:
    import pyarrow.parquet as pq  # noqa: PLC0415  heavy: pyarrow, only for Parquet inputs

    try:
        table = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow's errors for empty, cut or foreign files vary
        raise InputError(f"{path}: not a readable Parquet file ({exc}); fix or remove it") from None
    names = set(table.schema_arrow.names)
    columns = (
        ["text"] if "text" in names else [c for c in ("instruction", "response") if c in names]
    )
    if not columns:
        raise InputError(f"{path}: no text, instruction or response column to evaluate on")
    for batch in table.iter_batches(columns=columns):
        for column in batch.columns:
            yield from (value for value in column.to_pylist() if isinstance(value, str) and value)


def reference_label(spec: str | Path) -> str:
    """A short name for a ``--compare`` argument: a vocabulary's or Hub id as given, a file by
    its folder (``bpe`` for ``trained_tokenizers/bpe/tokenizer.json``)."""
    path = Path(spec)
    if not path.exists():
        return str(spec)
    if path.is_file() and path.name == "tokenizer.json" and path.parent.name:
        return path.parent.name
    return path.name


def as_table(results: Sequence[Compression]) -> tuple[list[str], list[list[str]]]:
    """The results as a table: a row per input and tokenizer (narrow enough for a terminal);
    inputs are shown relative to the folder they share."""
    sources = [r.source for r in results if r.source != ALL]
    base = os.path.commonpath(sources) if len(set(sources)) > 1 else ""
    header = ["held-out input", "tokenizer", "texts", "KB", "bytes/token", "tokens/word"]
    rows = [
        [
            os.path.relpath(r.source, base) if base and r.source != ALL else r.source,
            r.tokenizer,
            f"{r.texts:,}",
            f"{r.bytes / 1e3:,.1f}",
            f"{r.bytes_per_token:.2f}",
            f"{r.tokens_per_word:.2f}",
        ]
        for r in results
    ]
    return header, rows
