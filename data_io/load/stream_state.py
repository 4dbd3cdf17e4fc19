"""The resume state of a stream split over ranks x workers, shared by the streaming datasets.

``{"num_streams": G, "streams": {g: [a, b]}, "worker_shift": s}``: G streams (ranks x workers),
and for some of them the pair that says where stream g stops (``[row, offset]`` for HF text,
``[source, rows]`` for tokenized rows); ``worker_shift`` rotates which worker reads which
stream after a resume (the DataLoader restarts at worker 0). ``StatefulLoader`` records it from
the ``STREAM_KEYS`` each item carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from data_io.errors import ConfigError

__all__ = ["STREAM_KEYS", "parse_stream_state"]

# What every item of a stream carries for the loader: its stream and the point after it.
STREAM_KEYS = ("stream_id", "stream_row", "stream_offset")


def _count(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"resume state: {name} must be an integer >= {minimum}, got {value!r}")
    return value


def parse_stream_state(
    state: Any, allowed: set[str], pair: tuple[str, str]
) -> tuple[int | None, dict[int, tuple[int, int]], int]:
    """``(G, {g: (a, b)}, worker_shift)`` from ``state``, every value checked (``pair`` names
    a and b in the errors); ``G`` is None for a state that never started."""
    shape = f"{{'num_streams': G, 'streams': {{g: [{pair[0]}, {pair[1]}]}}}}"
    if not isinstance(state, Mapping) or set(state) - allowed:
        raise ConfigError(
            f"a stream's resume state is {shape}, got {state!r}; pass what state_dict() or "
            "the loader recorded"
        )
    shift = _count("worker_shift", state.get("worker_shift", 0), 0)
    total = state.get("num_streams")
    streams = state.get("streams") or {}
    if total is None:
        if streams:
            raise ConfigError("resume state: 'streams' given without 'num_streams'")
        return None, {}, shift
    total = _count("num_streams (ranks x workers)", total, 1)
    if not isinstance(streams, Mapping):
        raise ConfigError(f"resume state: 'streams' must be a mapping, got {streams!r}")
    parsed: dict[int, tuple[int, int]] = {}
    for key, value in streams.items():
        try:
            stream = int(key)  # JSON turns the keys into strings
        except (TypeError, ValueError):
            raise ConfigError(f"resume state: stream id {key!r} is not an integer") from None
        if not 0 <= stream < total:
            raise ConfigError(f"resume state: stream {stream} is outside 0..{total - 1}")
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise ConfigError(f"resume state: stream {stream} must map to [{', '.join(pair)}]")
        first = _count(f"stream {stream} {pair[0]}", value[0], 0)
        second = _count(f"stream {stream} {pair[1]}", value[1], 0)
        parsed[stream] = (first, second)
    return total, parsed, shift
