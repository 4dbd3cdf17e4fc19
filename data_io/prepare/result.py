"""What a ``prepare`` run did: ``PrepareResult``, which the summary prints and ``--json`` writes."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from data_io.prepare.state import SPLITS


@dataclass
class PrepareResult:
    """What a run did (``nothing_to_do`` when every input was prepared before)."""

    output: str
    nothing_to_do: bool
    new_inputs: list[str]
    known_inputs: list[str]
    skipped_files: list[str]
    # Inputs skipped because their content was prepared under another name: name -> that name.
    same_content_as: dict[str, str] = field(default_factory=dict)
    # Files an interrupted earlier run had left, removed or cut back before this run.
    rolled_back: list[str] = field(default_factory=list)
    # New inputs whose pass 1 a data_io.scale unit had done (taken from its part, not read).
    from_parts: list[str] = field(default_factory=list)
    # This run completed the plan of an unfinished scaled run whose parts it took (its parts
    # deleted, the plan marked finalized).
    settled_plan: bool = False
    documents_read: int = 0
    bytes_read: int = 0
    text_chars: int = 0
    invalid_utf8: int = 0
    cleaning: dict[str, Any] = field(default_factory=dict)
    duplicates: int = 0  # documents dropped as duplicates (under line: left without a line)
    duplicate_lines: int = 0  # lines dropped (--dedup line)
    documents: dict[str, int] = field(default_factory=lambda: {s: 0 for s in SPLITS})
    tokens: dict[str, int] = field(default_factory=lambda: {s: 0 for s in SPLITS})
    dataset_tokens: dict[str, int] = field(default_factory=lambda: {s: 0 for s in SPLITS})
    shards_written: dict[str, list[str]] = field(default_factory=lambda: {s: [] for s in SPLITS})
    dtype: str = ""
    vocab_size: int = 0
    eos_id: int = 0
    dedup_peak_bytes: int = 0
    dedup_runs: int = 0
    seconds: float = 0.0
    val_fraction: float = 0.0  # the run's --val-fraction (the summary notes an empty val)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
