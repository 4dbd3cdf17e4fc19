"""Normalisation and filtering of documents (MyPT's defaults, each step counted and switchable).

Normalisation (``normalize``):
  * Unicode NFC (composed characters: "é" typed two ways becomes one text, so it tokenizes and
    de-duplicates the same);
  * whitespace clean-up: ``\\r\\n`` and ``\\r`` become ``\\n``, control characters other than
    tab and newline are removed, trailing spaces of every line are stripped, runs of blank
    lines become one blank line, and the document is stripped.

Filtering (``filter``):
  * lines (not blank) with fewer than ``min_line_chars`` non-space characters are dropped;
  * documents with fewer than ``min_doc_chars`` characters left are dropped.

Documents that are empty after these steps are always dropped (they would add only an EOS).
Every change is counted, so the summary says what each step did. The steps run in Rust
(``rust/prepare/clean.rs``, inside ``_core.prepare_batch``); tests/prepare/clean_oracle.py is
the Python cleaner they are held to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from data_io.errors import ConfigError

__all__ = ["CleanOptions", "CleanStats"]


@dataclass(frozen=True)
class CleanOptions:
    normalize: bool = True
    filter: bool = True
    min_line_chars: int = 2
    min_doc_chars: int = 20

    def __post_init__(self) -> None:
        for name in ("min_line_chars", "min_doc_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{name} must be an integer >= 0, got {value!r}")

    def identity(self) -> dict[str, Any]:
        return {
            "normalize": self.normalize,
            "filter": self.filter,
            "min_line_chars": self.min_line_chars if self.filter else None,
            "min_doc_chars": self.min_doc_chars if self.filter else None,
        }


@dataclass
class CleanStats:
    unicode_normalized: int = 0  # documents NFC changed
    whitespace_cleaned: int = 0  # documents the whitespace clean-up changed
    controls_removed: int = 0  # of those, documents it removed control characters (NUL, ...) from
    short_lines_dropped: int = 0
    dropped: dict[str, int] = field(default_factory=lambda: {"too_short": 0, "empty": 0})

    def add(self, other: CleanStats) -> None:
        """Add the counts of ``other`` (a batch cleaned in another process)."""
        self.unicode_normalized += other.unicode_normalized
        self.whitespace_cleaned += other.whitespace_cleaned
        self.controls_removed += other.controls_removed
        self.short_lines_dropped += other.short_lines_dropped
        for reason, count in other.dropped.items():
            self.dropped[reason] += count

    def as_dict(self) -> dict[str, Any]:
        return {
            "unicode_normalized": self.unicode_normalized,
            "whitespace_cleaned": self.whitespace_cleaned,
            "controls_removed": self.controls_removed,
            "short_lines_dropped": self.short_lines_dropped,
            "dropped": dict(self.dropped),
        }
