"""What every kind of folder's inspection gives back (``InspectReport``) and the helpers they share:
text previews and the tokenizer that decodes ids."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from data_io.tokenizer.files import resolve_tokenizer

PREVIEW_CHARS = 200


_PREVIEW_TAIL = 70  # characters kept from a long text's end (where EOQ / EOA are)


@dataclass
class InspectReport:
    path: str
    kind: str
    facts: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    samples: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Problems found but not listed (a rows file names its first few; a note counts the rest).
    unlisted_problems: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def problem_count(self) -> int:
        return len(self.problems) + self.unlisted_problems


def preview(text: str) -> str:
    """``text``, or its head and tail when long: a row's end (EOQ, EOA) stays in view."""
    if len(text) <= PREVIEW_CHARS:
        return text
    return text[: PREVIEW_CHARS - _PREVIEW_TAIL] + " … " + text[-_PREVIEW_TAIL:]


@functools.lru_cache(maxsize=4)
def _load_tokenizer(tokenizer: str) -> Any:
    from tokenizers import Tokenizer  # noqa: PLC0415  heavy: tokenizers, only to decode with the HF library

    return Tokenizer.from_file(str(resolve_tokenizer(tokenizer)))


def hf_decode(tokenizer: str, ids: list[int]) -> str:
    """``ids`` as text, special tokens included (BOQ, tags, EOQ, EOA: the layout shows)."""
    return str(_load_tokenizer(tokenizer).decode(ids, skip_special_tokens=False))


def no_tokenizer(path: str | None) -> str:
    """Why rows were not decoded: the recorded tokenizer is not here, or none is recorded."""
    return "no tokenizer is recorded" if not path else f"the tokenizer {path} is not here"
