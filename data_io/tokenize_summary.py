"""The one-screen summary printed at the end of ``data_io tokenize``."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from data_io.tokenize import TokenizeResult

# Enough to see what happened on one screen; the rest is counted, not listed.
MAX_LISTED = 15


def print_summary(result: TokenizeResult, console: Console | None = None) -> None:
    console = console or Console(highlight=False, soft_wrap=True)
    done = result.with_status("tokenized")
    unchanged = result.with_status("unchanged")
    failed = result.failed
    read_bytes = sum(f.bytes for f in done)
    rate = read_bytes / result.seconds / 1e6 if result.seconds > 0 else 0.0
    console.print(
        f"[bold]tokenize[/bold] -> {result.output}  (tokenizer {result.tokenizer_path}, "
        f"vocab {result.vocab_size:,}, tokens {result.token_dtype}, {result.threads} threads)"
    )
    console.print(
        f"{len(result.files)} files: {len(done)} tokenized, {len(unchanged)} unchanged, "
        f"{len(failed)} failed; the output holds {sum(f.rows for f in result.files):,} rows, "
        f"{sum(f.tokens for f in result.files):,} tokens"
    )
    console.print(
        f"this run: {sum(f.rows for f in done):,} rows, {sum(f.tokens for f in done):,} tokens "
        f"from {read_bytes / 1e6:,.1f} MB in {result.seconds:.2f} s ({rate:,.1f} MB/s)"
    )
    listed = [*failed, *done]
    if listed:
        table = Table(show_edge=False, pad_edge=False)
        for column in ("task", "status", "why", "rows", "tokens", "bad rows", "s"):
            table.add_column(column, justify="right" if column[0] in "rtbs" else "left")
        for f in listed[:MAX_LISTED]:
            table.add_row(
                f.task,
                f.status,
                f.reason,
                f"{f.rows:,}",
                f"{f.tokens:,}",
                f"{f.bad_rows:,}",
                f"{f.seconds:.2f}",
            )
        console.print(table)
        if len(listed) > MAX_LISTED:
            console.print(f"... and {len(listed) - MAX_LISTED} more")
    bad = [f for f in result.files if f.bad_rows]
    if bad:
        console.print(f"[yellow]skipped {sum(f.bad_rows for f in bad):,} bad row(s):[/yellow]")
        for f in bad[:MAX_LISTED]:
            first = f.bad_row_examples[0] if f.bad_row_examples else ""
            console.print(f"  {f.task}: {f.bad_rows:,} (first: {first})")
    for f in result.files:
        for warning in f.warnings:
            console.print(f"[yellow]warning[/yellow] {f.task}: {warning}")
    if result.removed_orphans:
        console.print(
            f"removed {len(result.removed_orphans)} orphan folder(s): "
            + ", ".join(result.removed_orphans[:MAX_LISTED])
        )
    if result.left_alone:
        console.print("left alone (not written by data_io): " + "; ".join(result.left_alone))
    for f in failed:
        console.print(f"[red]failed[/red] {f.error}")
