"""A dtype named in a metadata file, read without trusting the file."""

from __future__ import annotations

import numpy as np

__all__ = ["dtype_or_none"]


def dtype_or_none(value: object) -> np.dtype | None:
    """numpy's dtype for the string ``value``, or None for anything else. numpy's parser raises
    TypeError, ValueError or SyntaxError on malformed strings (``"in|1,"``: found by fuzzing
    the shard metadata), each of which means "not a dtype" to a reader of outside files."""
    if not isinstance(value, str):
        return None
    try:
        return np.dtype(value)
    except (TypeError, ValueError, SyntaxError):
        return None
