"""A pyarrow string array as Rust reads it in place: its UTF-8 bytes and the offsets of each
string into them, taken from the array's own buffers (no Python string per text)."""

from __future__ import annotations

from typing import Any

import numpy as np


def is_text_type(kind: Any) -> bool:
    """Whether a pyarrow type is a string type: ``string``, ``large_string`` or ``string_view``
    (the last only where the installed pyarrow knows it: 16 and later)."""
    import pyarrow as pa  # noqa: PLC0415  only Arrow input needs it (and it brought pyarrow itself)

    view = getattr(pa.types, "is_string_view", None)
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind) or (view and view(kind)))


def string_layout(texts: Any) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 bytes of a pyarrow ``string``, ``large_string`` or ``string_view`` array
    without nulls, and its ``len + 1`` offsets (int64) into them: read from its buffers in
    place (a string view array is cast to ``large_string`` first, one copy)."""
    import pyarrow as pa  # noqa: PLC0415  only Arrow input needs it (and it brought pyarrow itself)

    if pa.types.is_string_view(texts.type):
        texts = texts.cast(pa.large_string())
    if len(texts) == 0:
        return np.empty(0, np.uint8), np.zeros(1, np.int64)
    _, offsets_buffer, data_buffer = texts.buffers()
    width = np.int64 if pa.types.is_large_string(texts.type) else np.int32
    offsets = np.frombuffer(offsets_buffer, dtype=width)[
        texts.offset : texts.offset + len(texts) + 1
    ]
    data = (
        np.frombuffer(data_buffer, dtype=np.uint8)
        if data_buffer is not None
        else np.empty(0, np.uint8)
    )
    return data, offsets.astype(np.int64, copy=False)
