"""Is a tokenizer any good: bytes per token and tokens per word on held-out text, per input and
overall, beside reference tokenizers (``data_io train-tokenizer --eval HELD_OUT --compare ...``).

More bytes per token means shorter sequences for the same text (the cost a model pays per
token); fewer tokens per word means words are split less. A "word" here is a run of
non-whitespace characters, so for scripts written without spaces (Chinese, Japanese) tokens per
word is large for every tokenizer and only the comparison between them means something.

Held-out inputs: cleaned rows (``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst``, ``.parquet``: the
instruction and the response are texts; a row with a ``text`` field gives that), plain text
(``.txt``: one text per line, invalid UTF-8 replaced and counted), or folders of these. A bad row
(not JSON, a field missing or not a string) is an error naming its file and line, or with
``on_error="skip"`` (training's ``--on-error skip``) skipped and counted. References: a
``tokenizer.json``, a folder holding one, a Hub id, or the name of a vocabulary built offline
(``gpt2``, ``qwen``: ``data_io.tokenizer.vocabularies``).
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from data_io.errors import ConfigError, DataIoError, InputError, TokenizerError
from data_io.tokenizer.encoder import TextEncoder
from data_io.tokenizer.files import resolve_tokenizer
from data_io.tokenizer.vocabularies import VOCABULARIES, vocabulary_path
from data_io.util.json_kinds import json_kind

__all__ = [
    "HELD_OUT_SUFFIXES",
    "Compression",
    "as_table",
    "check_held_out",
    "evaluate",
    "held_out_files",
    "reference_label",
    "reference_tokenizer",
]

ALL = "all inputs"
HELD_OUT_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".parquet", ".txt")
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
    # Rows skipped as bad (on_error="skip"), and .txt lines whose invalid UTF-8 was replaced.
    bad_rows: int = 0
    invalid_utf8_lines: int = 0

    @property
    def bytes_per_token(self) -> float:
        return self.bytes / self.tokens if self.tokens else 0.0

    @property
    def tokens_per_word(self) -> float:
        return self.tokens / self.words if self.words else 0.0


def reference_tokenizer(spec: str | Path) -> Path:
    """The ``tokenizer.json`` a ``--compare`` argument names, loaded once (from the load cache
    when it was loaded before), so that a missing or damaged one fails before training."""
    try:
        if isinstance(spec, str) and spec in VOCABULARIES:
            path = vocabulary_path(spec)
        else:
            path = resolve_tokenizer(spec)
        TextEncoder(path)
    except DataIoError as exc:
        raise TokenizerError(f"--compare {spec}: {exc}") from None
    return path


def held_out_files(inputs: Sequence[str | Path], left_out: list[Path] | None = None) -> list[Path]:
    """The files of ``inputs`` (folders searched recursively, hidden entries skipped); the
    files of those folders that are not held-out text (by name) go to ``left_out``."""
    files: list[Path] = []
    for item in inputs:
        path = Path(item)
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            every = sorted(
                p
                for p in path.rglob("*")
                if p.is_file()
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
            found = [p for p in every if p.name.lower().endswith(HELD_OUT_SUFFIXES)]
            if left_out is not None:
                left_out.extend(p for p in every if not p.name.lower().endswith(HELD_OUT_SUFFIXES))
            if not found:
                raise InputError(f"{path}: no held-out file in it ({', '.join(HELD_OUT_SUFFIXES)})")
            files.extend(found)
        else:
            raise InputError(f"{path}: no such file or folder to evaluate on")
    return files


def check_held_out(inputs: Sequence[str | Path], *, on_error: str = "fail") -> list[Path]:
    """Read every held-out text once (before training: a bad row must not cost a training
    run); the files of folders left out as not held-out text (``held_out_files``)."""
    left_out: list[Path] = []
    flaws = _Flaws(on_error)
    for path in held_out_files(inputs, left_out):
        for _ in _texts(path, flaws):
            pass
    return left_out


def evaluate(
    held_out: Sequence[str | Path],
    tokenizers: Mapping[str, str | Path],
    *,
    on_error: str = "fail",
) -> list[Compression]:
    """Every tokenizer of ``tokenizers`` (name -> path) on every held-out file, then on all of
    them together (``source == ALL``), in that order. A bad row raises, naming its file and
    line, or with ``on_error="skip"`` is skipped and counted (``Compression.bad_rows``)."""
    if on_error not in ("fail", "skip"):
        raise ConfigError(f"on_error must be 'fail' or 'skip', not {on_error!r}")
    files = held_out_files(held_out)
    encoders = {name: TextEncoder(path) for name, path in tokenizers.items()}
    results: list[Compression] = []
    totals = {name: [0, 0, 0, 0] for name in encoders}
    all_flaws = _Flaws(on_error)
    for path in files:
        counts = {name: [0, 0, 0, 0] for name in encoders}
        flaws = _Flaws(on_error)
        for texts in _batches(_texts(path, flaws)):
            size = sum(len(t.encode("utf-8")) for t in texts)
            words = sum(len(_WORD.findall(t)) for t in texts)
            for name, encoder in encoders.items():
                tokens = len(encoder.encode_batch(texts).ids)
                for total in (counts[name], totals[name]):
                    total[0] += len(texts)
                    total[1] += size
                    total[2] += words
                    total[3] += tokens
        all_flaws.bad_rows += flaws.bad_rows
        all_flaws.invalid_utf8_lines += flaws.invalid_utf8_lines
        results.extend(
            Compression(str(path), name, *c, flaws.bad_rows, flaws.invalid_utf8_lines)
            for name, c in counts.items()
        )
    if len(files) > 1:
        results.extend(
            Compression(ALL, name, *c, all_flaws.bad_rows, all_flaws.invalid_utf8_lines)
            for name, c in totals.items()
        )
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


@dataclass
class _Flaws:
    """What reading held-out files skipped or repaired, and the policy for bad rows."""

    on_error: str
    bad_rows: int = 0
    invalid_utf8_lines: int = 0

    def bad_row(self, message: str) -> None:
        """A bad row: an error under ``fail``, counted under ``skip``."""
        if self.on_error != "skip":
            raise InputError(
                f"{message}; fix or remove the row, or skip and count such rows with "
                "--on-error skip"
            )
        self.bad_rows += 1


_INVALID_BYTE = re.compile("[\udc80-\udcff]")


def _texts(path: Path, flaws: _Flaws) -> Iterator[str]:
    """The texts of one held-out file (empty ones skipped)."""
    name = path.name.lower()
    try:
        if name.endswith(".txt"):
            # Undecodable bytes come through as lone surrogates, to be replaced and counted.
            with open(path, encoding="utf-8", errors="surrogateescape") as f:
                for line in f:
                    if _INVALID_BYTE.search(line):
                        flaws.invalid_utf8_lines += 1
                        line = line.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
                    if line.strip():
                        yield line.rstrip("\n")
        elif name.endswith((".jsonl", ".jsonl.gz", ".jsonl.zst")):
            with _open_jsonl(path) as f:
                for number, line in enumerate(f, 1):
                    if line.strip():
                        yield from _row_texts(line, f"{path}:{number}", flaws)
        elif name.endswith(".parquet"):
            yield from _parquet_texts(path, flaws)
        else:
            suffixes = ", ".join(HELD_OUT_SUFFIXES)
            raise InputError(f"{path}: cannot evaluate on this file; held-out text is {suffixes}")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read it ({exc}); fix or remove the file") from None
    except Exception as exc:
        # zstandard's ZstdError (a damaged .zst) is none of the above.
        if type(exc).__module__.split(".")[0] != "zstandard":
            raise
        raise InputError(f"{path}: cannot read it ({exc}); fix or remove the file") from None


def _open_jsonl(path: Path) -> IO[str]:
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    if path.name.lower().endswith(".zst"):
        import zstandard  # noqa: PLC0415  only for .zst held-out files

        return zstandard.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _row_texts(line: str, where: str, flaws: _Flaws) -> list[str]:
    """The texts of one JSONL row: its ``text``, else its instruction and response (empty ones
    left out); a bad row gives none (under ``on_error="skip"``)."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        flaws.bad_row(f"{where}: not a JSON row ({exc.msg})")
        return []
    if not isinstance(row, dict):
        flaws.bad_row(f"{where}: a row is a JSON object, not {json_kind(row)}")
        return []
    keys = ("text",) if "text" in row else ("instruction", "response")
    for key in keys:
        if key not in row:
            fields = ", ".join(map(str, row)) or "none"
            flaws.bad_row(
                f"{where}: no field {key!r} (the row has {fields}); a held-out row has a "
                "'text', or an 'instruction' and a 'response'"
            )
            return []
        if not isinstance(row[key], str):
            flaws.bad_row(f"{where}: field {key!r} is {json_kind(row[key])}, not a string")
            return []
    return [row[key] for key in keys if row[key]]


def _parquet_texts(path: Path, flaws: _Flaws) -> Iterator[str]:
    import pyarrow.parquet as pq  # noqa: PLC0415  heavy: pyarrow, only for Parquet inputs

    try:
        table = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow's errors for empty, cut or foreign files vary
        raise InputError(f"{path}: not a readable Parquet file ({exc}); fix or remove it") from None
    names = set(table.schema_arrow.names)
    columns = ["text"] if "text" in names else ["instruction", "response"]
    if not set(columns) <= names:
        raise InputError(
            f"{path}: no text column, nor instruction and response columns, to evaluate on "
            f"(it has {', '.join(sorted(names)) or 'none'})"
        )
    first = 0
    for batch in table.iter_batches(columns=columns):
        rows = zip(*(column.to_pylist() for column in batch.columns), strict=True)
        for number, values in enumerate(rows, first):
            kinds = [json_kind(v) for v in values if not isinstance(v, str)]
            if kinds:
                flaws.bad_row(
                    f"{path}: row {number} (counted from 0): a text is {kinds[0]}, not a string"
                )
                continue
            yield from (value for value in values if value)
        first += batch.num_rows


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
