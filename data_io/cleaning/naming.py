"""Output file names derived from source values (FLAN task names, dmmath modules, tasksource tasks).

The original keeps ASCII letters, digits, ``_``, ``-``, ``.`` and space and replaces every other
character with one ``_`` (nothing collapsed), so ``recast/recast_ner`` becomes ``recast_recast_ner``
(cleaners.md §1.3). Both forms below apply that same rule: one per value, one per Arrow column.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

# One pattern for both forms; it matches a single code point, so each is replaced by one "_".
_UNSAFE = r"[^A-Za-z0-9_\-. ]"
_UNSAFE_RE = re.compile(_UNSAFE)


def safe_name(text: str) -> str:
    """``text`` with every character outside ``[A-Za-z0-9_-. ]`` replaced by ``_``."""
    return _UNSAFE_RE.sub("_", text)


def safe_names(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """:func:`safe_name` applied to every string of an Arrow column, without a Python loop."""
    return pc.replace_substring_regex(values, _UNSAFE, "_")
