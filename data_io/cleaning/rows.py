"""What a cleaner emits: rows, drops, and the checks every emitted row must pass.

A cleaner yields :class:`Row` objects (one cleaned row), :class:`Drop` markers (a source record
left out, with the reason, so that nothing is lost silently) or, for vectorised cleaners, whole
``pyarrow`` tables with the same columns. The runner validates everything it receives before it
reaches a writer: a bad row is a cleaner defect or a source surprise, never something to write.
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from data_io.util.arrow_strings import is_text_type

#: The closed set of condition tags (formats.md §1); the tokenizer maps each to a special token.
CONDITION_TAGS: frozenset[str] = frozenset({"direct", "cot", "noisy", "synth"})

#: The three row columns, in the order our writers use (readers go by name).
ROW_COLUMNS: tuple[str, str, str] = ("condition", "instruction", "response")

#: Optional fourth column of a cleaner's table: the output file key (see :class:`Row`).
FILE_COLUMN = "file"


class Row(NamedTuple):
    """One cleaned row.

    ``file`` names the output file for cleaners that write several (``"arb_math"``,
    ``"cot"``, ``"train-easy__algebra__linear_1d"``); the writer adds the extension. Cleaners
    that write a single file leave it ``None``.
    """

    condition: str
    instruction: str
    response: str
    file: str | None = None


class Drop(NamedTuple):
    """A source record (or ``count`` of them) deliberately left out, and why.

    Reasons are short, stable phrases ("no boxed answer", "language is not en"): the summary
    groups by them, so keep one phrase per rule. A reason ``no <kind> row: ...`` ("no direct
    row: proof") leaves out one of the rows a record gives, not the record: the summary counts
    those apart, as rows not made (:func:`is_row_drop`), so that records dropped never exceed
    records read.
    """

    reason: str
    count: int = 1


def is_row_drop(reason: str) -> bool:
    """Whether a drop ``reason`` leaves out one row of a record (``no direct row: ...``) rather
    than the whole record."""
    return reason.startswith("no ") and " row: " in reason


class CleanerAssertion(Exception):
    """Raised by a cleaner when the source breaks an invariant of cleaners.md §4.

    The runner adds the record's location (file and row) and turns it into an
    :class:`~data_io.errors.InputError`, so the run stops with a non-zero exit.
    """


class DropCounts(Counter[str]):
    """Dropped source records, counted by reason."""

    def add(self, drop: Drop) -> None:
        if drop.count < 0:
            raise ValueError(
                f"a Drop count cannot be negative (got {drop.count} for {drop.reason!r})"
            )
        self[drop.reason] += drop.count


def condition_problem(condition: str) -> str | None:
    """Why ``condition`` is not a valid tag list, or ``None`` when it is."""
    if not condition:
        return "the condition is empty (the tokenizer needs at least one tag)"
    tags = condition.split(",")
    unknown = [tag for tag in tags if tag not in CONDITION_TAGS]
    if unknown:
        known = ", ".join(sorted(CONDITION_TAGS))
        return f"unknown condition tag(s) {unknown!r} in {condition!r} (known: {known})"
    if len(set(tags)) != len(tags):
        return f"a tag is repeated in condition {condition!r}"
    return None


class ConditionChecker:
    """Validates condition strings and file keys, remembering the ones already seen valid
    (there are only a few), so that checking a row is a handful of set lookups."""

    def __init__(self) -> None:
        self._valid: set[str] = set()
        self._keys: set[str] = set()

    def known_good(self, row: Row, keyed: bool) -> bool:
        """True when ``row`` is certainly valid; False means "ask :func:`row_problem`"."""
        return (
            type(row.condition) is str
            and row.condition in self._valid
            and type(row.instruction) is str
            and type(row.response) is str
            and (type(row.file) is str and row.file in self._keys if keyed else row.file is None)
        )

    def remember_key(self, key: str) -> None:
        """Record an output file key that passed :func:`file_key_problem`."""
        self._keys.add(key)

    def problem(self, condition: object) -> str | None:
        if condition in self._valid:
            return None
        if not isinstance(condition, str):
            return f"condition is {type(condition).__name__}, not a string"
        problem = condition_problem(condition)
        if problem is None:
            self._valid.add(condition)
        return problem


def row_problem(row: Row, checker: ConditionChecker, keyed: bool) -> str | None:
    """Why ``row`` cannot be written, or ``None``. ``keyed``: the output has several files."""
    for name in ROW_COLUMNS:
        value = getattr(row, name)
        if not isinstance(value, str):
            return f"{name} is {type(value).__name__}, not a string"
    problem = checker.problem(row.condition)
    if problem is not None:
        return problem
    problem = file_key_problem(row.file, keyed)
    if problem is None and keyed:
        checker.remember_key(str(row.file))
    return problem


def file_key_problem(key: object, keyed: bool) -> str | None:
    """Why ``key`` cannot name an output file, or ``None``."""
    if not keyed:
        if key is not None:
            return f"the row names output file {key!r} but this cleaner writes a single file"
        return None
    if not isinstance(key, str) or not key:
        return "the row names no output file (Row.file) but this cleaner writes several"
    if "/" in key or "\\" in key or "\0" in key or key.startswith("."):
        return (
            f"output file key {key!r} must be a plain file name (no '/', '\\', NUL or leading '.')"
        )
    return None


def table_problem(table: pa.Table, checker: ConditionChecker, keyed: bool) -> str | None:
    """Why a cleaner's table cannot be written, or ``None``; names the first bad row index."""
    expected = [*ROW_COLUMNS, FILE_COLUMN] if keyed else list(ROW_COLUMNS)
    if sorted(table.column_names) != sorted(expected):
        return f"the table has columns {table.column_names}, expected {expected}"
    for name in expected:
        column = table.column(name)
        if not is_text_type(column.type):
            return f"column {name} has type {column.type}, not a string type"
        if column.null_count:
            first = pc.index(pc.is_null(column), True).as_py()
            return f"{name} is null in row {first} of the table"
    conditions = table.column("condition")
    for value in pc.unique(conditions).to_pylist():
        problem = checker.problem(value)
        if problem is not None:
            first = pc.index(conditions, value).as_py()
            return f"row {first} of the table: {problem}"
    if keyed:
        keys = table.column(FILE_COLUMN)
        for value in pc.unique(keys).to_pylist():
            problem = file_key_problem(value, keyed)
            if problem is not None:
                first = pc.index(keys, value).as_py()
                return f"row {first} of the table: {problem}"
    return None


def require(ok: bool, message: str) -> None:
    """Raise :class:`CleanerAssertion` with ``message`` unless ``ok`` (cleaners.md §4 checks)."""
    if not ok:
        raise CleanerAssertion(message)
