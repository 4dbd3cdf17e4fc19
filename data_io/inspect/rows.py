"""Cleaned rows (formats.md §1) and prepare's raw text rows: a ``.jsonl`` / ``.jsonl.gz`` /
``.parquet`` file or a folder of them, every row checked, a few shown."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from data_io.inspect.report import InspectReport, hf_decode, preview
from data_io.util.words import counted

_ROW_FIELDS = ("condition", "instruction", "response")


_TEXT_FIELD = "text"  # prepare's default --text-field: rows with it alone are raw text


ROW_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet")


_PROBLEMS_PER_FILE = 5  # bad rows named per file (the rest are counted)


# -- cleaned rows --------------------------------------------------------------------------------
def is_rows_file(path: Path) -> bool:
    return path.name.lower().endswith(ROW_SUFFIXES)


def rows_files(folder: Path) -> list[Path]:
    """The rows files under ``folder`` (recursively, as tokenize walks it), hidden ones aside."""
    found = []
    for path in sorted(folder.rglob("*")):
        hidden = any(part.startswith(".") for part in path.relative_to(folder).parts)
        if not hidden and path.is_file() and is_rows_file(path):
            found.append(path)
    return found


class _RowsScan:
    """What one file's rows hold: count, columns, problems (the first few named), examples."""

    def __init__(self, path: Path, wanted: int) -> None:
        self.path = path
        self.kind = "rows"  # or "text": prepare's raw text rows (a text field, no row fields)
        self.decided = False  # whether an object row has set the kind yet
        self.rows = 0
        self.columns: dict[str, str] = {}
        self.problems: list[str] = []
        self.bad = 0
        self.examples: list[dict[str, Any]] = []
        self.wanted = wanted

    def problem(self, text: str) -> None:
        self.bad += 1
        if len(self.problems) < _PROBLEMS_PER_FILE:
            self.problems.append(text)

    @property
    def unlisted(self) -> int:
        return self.bad - len(self.problems)

    def unlisted_note(self) -> str | None:
        if self.unlisted <= 0:
            return None
        return (
            f"{self.path}: {self.unlisted} more {'problem' if self.unlisted == 1 else 'problems'} "
            "of the same kinds, not listed (the "
            f"first {len(self.problems)} are)"
        )


def _scan_jsonl(path: Path, wanted: int) -> _RowsScan:
    scan = _RowsScan(path, wanted)
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    number = 0  # the last line read whole: where a damaged file stops being readable
    try:
        with opener(path, "rb") as f:
            for number, raw in enumerate(f, start=1):
                if not raw.strip():
                    continue
                scan.rows += 1
                try:
                    row = json.loads(raw)
                except ValueError as err:
                    scan.problem(f"{path}: line {number} is not JSON ({err}); fix or drop it")
                    continue
                if not isinstance(row, dict):
                    scan.problem(
                        f"{path}: line {number} holds a JSON {type(row).__name__}, not an object "
                        "with condition, instruction and response; fix or drop it"
                    )
                    continue
                for key, value in row.items():
                    scan.columns.setdefault(key, type(value).__name__)
                if not scan.decided:  # the file's first object says which kind it holds
                    scan.decided = True
                    if _is_text_row(row.keys()):
                        scan.kind = "text"
                wrong = [k for k in _ROW_FIELDS if not isinstance(row.get(k), str)]
                if scan.kind == "text":
                    if not isinstance(row.get(_TEXT_FIELD), str):
                        scan.problem(
                            f"{path}: line {number}: no string {_TEXT_FIELD!r} field (the file's "
                            f"first row has one); prepare fails on it: fix or drop the row"
                        )
                    elif len(scan.examples) < wanted:
                        scan.examples.append(row)
                elif wrong and not {"input_ids", "labels"} <= row.keys():
                    scan.problem(
                        f"{path}: line {number}: {', '.join(wrong)} missing or not a string; "
                        "every cleaned row has string condition, instruction and response "
                        "(formats.md §1): fix the cleaner that wrote it"
                    )
                elif len(scan.examples) < wanted:
                    scan.examples.append(row)
    except (OSError, EOFError) as err:
        where = f"after line {number}" if number else "from its start"
        scan.problem(
            f"{path}: unreadable {where} ({err}); the file is damaged or not {path.suffix}: "
            "restore or rewrite it"
        )
    return scan


def _scan_parquet(path: Path, wanted: int) -> _RowsScan:
    import pyarrow as pa  # noqa: PLC0415  heavy: pyarrow, only for Parquet/Arrow data
    import pyarrow.parquet as pq  # noqa: PLC0415  heavy: pyarrow, only for Parquet/Arrow data

    scan = _RowsScan(path, wanted)
    try:
        parquet = pq.ParquetFile(path)
    except Exception as err:  # pyarrow's errors for empty, truncated or foreign files vary
        scan.problem(f"{path}: not a readable Parquet file ({err}); rewrite it")
        return scan
    schema = parquet.schema_arrow
    scan.rows = parquet.metadata.num_rows
    scan.columns = {field.name: str(field.type) for field in schema}
    text_types = (pa.string(), pa.large_string())
    tokenized = {"input_ids", "labels"} <= scan.columns.keys()
    present = [name for name in _ROW_FIELDS if name in scan.columns]
    if _is_text_row(scan.columns.keys()):
        scan.kind = "text"
        present = [_TEXT_FIELD]
    if not tokenized:
        missing = [name for name in _ROW_FIELDS if name not in scan.columns]
        if missing and scan.kind == "rows":
            scan.problem(
                f"{path}: no column {', '.join(missing)}; cleaned rows have the string columns "
                "condition, instruction and response (formats.md §1)"
            )
        for name in present:
            kind = schema.field(name).type
            if kind not in text_types and str(kind) != "string_view":
                scan.problem(
                    f"{path}: column {name} is {kind}, not a string column (formats.md §1); "
                    "rewrite it as string"
                )
    try:
        for batch in parquet.iter_batches(batch_size=65536):
            if not tokenized:
                for name in present:
                    nulls = batch.column(name).null_count
                    if nulls and scan.kind == "text":
                        scan.problem(f"{path}: {counted(nulls, f'null {name} value')}; prepare fails on "
                                     "a null text: drop those rows")  # fmt: skip
                    elif nulls:
                        scan.problem(f"{path}: {counted(nulls, f'null {name} value')}; every row needs "
                                     "all three fields (formats.md §1)")  # fmt: skip
            if len(scan.examples) < wanted:
                scan.examples += batch.slice(0, wanted - len(scan.examples)).to_pylist()
    except Exception as err:  # a damaged page: pyarrow raises OSError or ArrowInvalid
        scan.problem(f"{path}: unreadable data ({err}); the file is damaged, rewrite it")
    return scan


def _is_text_row(fields: Any) -> bool:
    """Whether a row (or a Parquet schema) is prepare's raw text: a text field (whatever its
    first value) and none of the cleaned rows' fields nor tokenized rows' ids."""
    fields = set(fields)
    return (
        _TEXT_FIELD in fields
        and not fields & set(_ROW_FIELDS)
        and not {"input_ids", "labels"} <= fields
    )


def _show_row(row: dict[str, Any], tokenizer: str | None) -> str:
    if _TEXT_FIELD in row and not any(k in row for k in _ROW_FIELDS):
        text = row[_TEXT_FIELD]
        return preview(text) if isinstance(text, str) else f"(no text: {text!r})"
    if "input_ids" in row and not isinstance(row.get("instruction"), str):
        if not tokenizer:
            return preview(f"{len(row['input_ids'])} token ids (pass --tokenizer to decode)")
        return preview(hf_decode(tokenizer, [int(i) for i in row["input_ids"]]))
    condition = row.get("condition")
    return preview(
        f"[{condition}] {row.get('instruction')!s} → {row.get('response')!s}"
        if condition
        else f"{row.get('instruction')!s} → {row.get('response')!s}"
    )


def inspect_rows(
    where: Path, files: list[Path], documents: int, tokenizer: str | None
) -> InspectReport:
    scans = [
        _scan_parquet(path, documents)
        if path.name.lower().endswith(".parquet")
        else _scan_jsonl(path, documents)
        for path in files
    ]
    columns: dict[str, str] = {}
    for scan in scans:
        for name, kind in scan.columns.items():
            columns.setdefault(name, kind)
    tokenized = {"input_ids", "labels"} <= columns.keys()
    text = [scan for scan in scans if scan.kind == "text"]
    kind = "tokenized rows" if tokenized else "cleaned rows"
    if text and len(text) == len(scans):
        kind = f"raw text rows (prepare's input, field {_TEXT_FIELD!r})"
    report = InspectReport(str(where), kind)
    report.facts = {
        "files": len(scans),
        "rows": sum(scan.rows for scan in scans),
        "columns": ", ".join(f"{name} ({kind})" for name, kind in columns.items()),
    }
    base = where if where.is_dir() else where.parent
    report.tables["files"] = [
        {"file": str(scan.path.relative_to(base)), "rows": scan.rows, "problems": scan.bad}
        for scan in scans
    ]
    for scan in scans:
        report.problems += scan.problems
        report.unlisted_problems += max(scan.unlisted, 0)
        report.notes += filter(None, [scan.unlisted_note()])
    if text and len(text) < len(scans):
        report.problems.append(
            f"{where} mixes raw text rows ({', '.join(str(s.path.relative_to(base)) for s in text[:3])}"
            f"{', ...' if len(text) > 3 else ''}) with cleaned rows; prepare reads the first, "
            "tokenize the second: keep them in separate folders"
        )
    extra = sorted(set(columns) - set(_ROW_FIELDS) - {"input_ids", "labels"})
    if text:
        extra = []
    if extra and not tokenized:
        report.notes.append(
            f"column(s) beyond condition, instruction and response: {', '.join(extra)}; the "
            "tokenizer reads only those three"
        )
    examples = [row for scan in scans for row in scan.examples][:documents]
    try:
        report.samples = [_show_row(row, tokenizer) for row in examples]
    except Exception as err:  # tokenizers raises a bare Exception for a bad file
        report.problems.append(f"cannot decode the rows with --tokenizer {tokenizer}: {err}")
    return report
