"""Counts in messages: ``1 row``, ``2 rows`` (never ``1 rows``)."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` (with thousands separators) and ``noun``, plural unless ``count`` is 1;
    ``plural`` for a noun that does not just take an ``s``."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"
