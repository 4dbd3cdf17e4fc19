"""The Python cleaner ``prepare`` ran before its raw-text path moved to Rust (issue 26), kept
here as the oracle of ``rust/prepare/clean.rs``: the same rules as ``data_io.prepare.normalize``
states, written independently with ``re`` and ``unicodedata``."""

from __future__ import annotations

import re
import unicodedata

from data_io.prepare.normalize import CleanOptions, CleanStats

__all__ = ["clean_batch"]

# C0 controls but tab and newline, DEL and C1 controls: never wanted in training text.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_TRAILING_SPACE = re.compile(r"[ \t\u00a0\u3000]+$", re.MULTILINE)
_BLANK_RUNS = re.compile(r"\n{3,}")


def _normalize(text: str, stats: CleanStats) -> str:
    if not text.isascii() and not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
        stats.unicode_normalized += 1
    cleaned = text
    if "\r" in cleaned:
        cleaned = cleaned.replace("\r\n", "\n").replace("\r", "\n")
    # Each step runs only where it can change something; the cheap checks (a substring search
    # or a byte translation, at C speed) keep the regexes off the common, clean document.
    if _has_control(cleaned):
        without = _CONTROL.sub("", cleaned)
        stats.controls_removed += without != cleaned
        cleaned = without
    if _has_trailing_space(cleaned):
        cleaned = _TRAILING_SPACE.sub("", cleaned)
    if "\n\n\n" in cleaned:
        cleaned = _BLANK_RUNS.sub("\n\n", cleaned)
    cleaned = cleaned.strip()
    if cleaned != text:
        stats.whitespace_cleaned += 1
    return cleaned


# The C0 controls but tab, newline and CR (gone by then), and DEL, as bytes: UTF-8 never uses
# bytes below 0x80 inside a multi-byte character, so deleting them finds exactly these.
_CONTROL_BYTES = bytes([*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F])
_C1_LEAD = b"\xc2"  # U+0080..U+00BF in UTF-8: the C1 controls are among them
_TRAILING = (" ", "\t", "\u00a0", "\u3000")  # _TRAILING_SPACE's set


def _has_control(text: str) -> bool:
    """Whether ``_CONTROL`` matches ``text``."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data.translate(None, _CONTROL_BYTES)) != len(data):
        return True
    return _C1_LEAD in data and _CONTROL.search(text) is not None


def _has_trailing_space(text: str) -> bool:
    """Whether ``_TRAILING_SPACE`` matches: one of its characters before a newline or the end."""
    if text.endswith(_TRAILING) or " \n" in text or "\t\n" in text:
        return True
    return not text.isascii() and ("\u00a0\n" in text or "\u3000\n" in text)


def _drop_short_lines(text: str, minimum: int, stats: CleanStats) -> str:
    if minimum <= 1:
        return text  # every non-blank line has at least one non-space character
    lines = text.split("\n")
    # A stripped line starts and ends with non-space characters, so one of length >= 2 has at
    # least two: with minimum 2 (the default) the stripped lengths decide without counting.
    if minimum == 2 and 1 not in set(map(len, map(str.strip, lines))):
        return text
    kept = [line for line in lines if not line.strip() or len("".join(line.split())) >= minimum]
    if len(kept) == len(lines):
        return text
    stats.short_lines_dropped += len(lines) - len(kept)
    return "\n".join(kept).strip()


def clean_batch(texts: list[str], options: CleanOptions, stats: CleanStats) -> list[str]:
    """The documents of ``texts`` that survive, normalised; the drops are counted by reason."""
    kept: list[str] = []
    for text in texts:
        if options.normalize:
            text = _normalize(text, stats)
        if options.filter:
            text = _drop_short_lines(text, options.min_line_chars, stats)
        if not text or text.isspace():  # (as `not text.strip()`, without a copy)
            stats.dropped["empty"] += 1
        elif options.filter and len(text) < options.min_doc_chars:
            stats.dropped["too_short"] += 1
        else:
            kept.append(text)
    return kept
