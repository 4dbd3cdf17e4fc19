"""The one-screen summary ``data_io prepare`` prints of a :class:`PrepareResult`."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from data_io.prepare.result import PrepareResult
from data_io.util.console import summary_console
from data_io.util.words import counted


def _print_same_content(console: Any, same_as: dict[str, str]) -> None:
    """Inputs not read again: their content was prepared under another name (moved, copied)."""
    if not same_as:
        return
    console.print(
        f"  {counted(len(same_as), 'input')} skipped: same content as an input already prepared"
    )
    for name, earlier in list(same_as.items())[:5]:
        console.print(f"    {name} = {earlier}", markup=False)
    if len(same_as) > 5:
        console.print(f"    … and {len(same_as) - 5} more (the API's result.same_content_as)")


def _print_from_parts(console: Any, result: PrepareResult) -> None:
    """Sources taken from the parts an unfinished scaled run (``--executor``) left here."""
    if result.from_parts:
        console.print(
            f"  {len(result.from_parts)} inputs taken from the parts an unfinished --executor "
            "run left here (not read again)"
        )
    if result.settled_plan:
        console.print(
            "  that run's plan is complete now: its parts were removed and `data_io status` "
            "says finalized"
        )


def print_summary(result: PrepareResult) -> None:
    console = summary_console()
    if result.rolled_back:
        console.print(
            f"prepare: rolled back an interrupted run first ({len(result.rolled_back)} files "
            "removed or cut back to the last finished run)"
        )
    if result.nothing_to_do:
        console.print(
            f"prepare: nothing to do: all {len(result.known_inputs)} inputs are already in "
            f"{result.output} with the same content and options "
            f"({result.dataset_tokens['train']:,} train / {result.dataset_tokens['val']:,} val tokens)"
        )
        _print_same_content(console, result.same_content_as)
        _print_from_parts(console, result)
        return
    mb = result.bytes_read / 2**20
    rate = mb / max(result.seconds, 1e-9)
    console.print(
        f"prepare: {len(result.new_inputs)} new inputs ({mb:,.1f} MB, {rate:,.1f} MB/s) -> "
        f"{result.output}"
        + (f"; {len(result.known_inputs)} already prepared" if result.known_inputs else "")
    )
    _print_same_content(console, result.same_content_as)
    _print_from_parts(console, result)
    if result.skipped_files:
        shown = result.skipped_files[:5]
        more = len(result.skipped_files) - len(shown)
        console.print(f"  skipped {len(result.skipped_files)} files, each with its reason:")
        for name in shown:
            console.print(f"    {name}", markup=False)
        if more:
            console.print(f"    … and {more} more (the API's result.skipped_files lists all)")
    cleaning = result.cleaning
    dropped = cleaning.get("dropped", {})
    rows = [
        ("documents read", result.documents_read),
        ("invalid UTF-8 lines replaced", result.invalid_utf8),
        ("unicode-normalised documents", cleaning.get("unicode_normalized", 0)),
        ("whitespace-cleaned documents", cleaning.get("whitespace_cleaned", 0)),
        ("short lines dropped", cleaning.get("short_lines_dropped", 0)),
        ("documents dropped: too short", dropped.get("too_short", 0)),
        ("documents dropped: empty", dropped.get("empty", 0)),
        ("documents dropped: duplicate", result.duplicates),
    ]
    if cleaning.get("controls_removed"):  # NUL and other controls: shown only when there were some
        at = rows.index(("whitespace-cleaned documents", cleaning.get("whitespace_cleaned", 0)))
        rows.insert(at + 1, ("  of them, control characters removed", cleaning["controls_removed"]))
    if result.duplicate_lines:
        rows[-1] = ("documents dropped: every line a duplicate", result.duplicates)
        rows.append(("lines dropped: duplicate", result.duplicate_lines))
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(justify="left")
    table.add_column(justify="right")
    for name, value in rows:
        table.add_row(name, f"{value:,}")
    console.print(table)
    splits = Table(title=None, box=None, pad_edge=False)
    for column in ("split", "documents", "tokens", "shards written", "dataset tokens"):
        splits.add_column(column, justify="right" if column != "split" else "left")
    for split in ("train", "val"):
        splits.add_row(
            split,
            f"{result.documents[split]:,}",
            f"{result.tokens[split]:,}",
            str(len(result.shards_written[split])),
            f"{result.dataset_tokens[split]:,}",
        )
    console.print(splits)
    if result.val_fraction > 0 and result.dataset_tokens["val"] == 0:
        # MyPT's script always puts its last shard in val/; a split by each document's hash
        # can leave a small corpus none.
        total = sum(result.documents.values())
        console.print(
            f"note: val is empty: no document's hash fell in --val-fraction {result.val_fraction:g} "
            f"(about {result.val_fraction * total:.1f} of these {total:,} documents expected); "
            "add documents, raise --val-fraction, or evaluate on another folder",
            markup=False,
        )
    console.print(
        f"dtype {result.dtype}, vocabulary {result.vocab_size:,}, EOS id {result.eos_id}; "
        f"{result.seconds:.1f} s"
    )
