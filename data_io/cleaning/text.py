"""Python string operations on whole Arrow columns, with Python's exact semantics.

Vectorised cleaners must produce the rows that ``str.strip()`` would: Arrow's
``utf8_trim_whitespace`` uses a different idea of whitespace (Python also strips ``\\x1c`` to
``\\x1f`` and ``\\x85``), so :func:`py_strip` trims exactly the characters ``str.isspace``
accepts.
"""

from __future__ import annotations

import sys
from functools import cache

import pyarrow as pa
import pyarrow.compute as pc


@cache
def python_whitespace() -> str:
    """Every character ``str.strip()`` removes (computed once, on first use: ~0.1 s)."""
    return "".join(ch for ch in map(chr, range(sys.maxunicode + 1)) if ch.isspace())


def py_strip(column: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """``str.strip()`` applied to every string of ``column``; nulls stay null."""
    return pc.utf8_trim(column, characters=python_whitespace())
