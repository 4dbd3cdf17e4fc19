"""The one-screen summary printed at the end of ``data_io tokenize``.

Sizes are in decimal megabytes (MB = 10^6 bytes), as on the progress bar.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from data_io.tokenize.result import MAX_LISTED, TokenizeResult
from data_io.util.console import summary_console
from data_io.util.words import counted

# Skipped input files are only counted, with this many named as examples.
SKIPPED_EXAMPLES = 3


def print_summary(
    result: TokenizeResult,
    console: Console | None = None,
    *,
    problems: bool = True,
    verbose: bool = False,
) -> None:
    """Print the summary; ``problems=False`` leaves out each failed file's error and the
    MIXED block, for a caller that raises them next (``raise_for_failures``), so that they
    are printed once. Lists stop at ``MAX_LISTED`` entries unless ``verbose``."""
    console = console or summary_console()
    limit = None if verbose else MAX_LISTED
    _print_totals(result, console)
    _print_table(result, console, limit)
    _print_bad_rows_and_warnings(result, console, limit)
    _print_folders(result, console, limit)
    if not problems:
        return
    for f in result.failed:
        console.print(f"[red]failed[/red] {f.error}")
    if result.mixed_warning:
        console.print(f"[bold red]error:[/bold red] {result.mixed_warning}")


def _print_totals(result: TokenizeResult, console: Console) -> None:
    done = result.with_status("tokenized")
    unchanged = result.with_status("unchanged")
    read_bytes = sum(f.bytes for f in done)
    rate = read_bytes / result.seconds / 1e6 if result.seconds > 0 else 0.0
    console.print(
        f"[bold]tokenize[/bold] -> {result.output}  (tokenizer {result.tokenizer_path}, "
        f"vocab {result.vocab_size:,}, tokens {result.token_dtype}, {counted(result.threads, 'thread')})"
    )
    console.print(f"encoder: {result.encoder}{_why(result.encoder_fallback)}", markup=False)
    console.print(
        f"{len(result.files)} files: {len(done)} tokenized, {len(unchanged)} unchanged, "
        f"{len(result.failed)} failed; the output holds {counted(result.output_tasks, 'task')}, "
        f"{result.output_rows:,} rows, {result.output_tokens:,} tokens"
    )
    console.print(
        f"this run: {sum(f.rows for f in done):,} rows, {sum(f.tokens for f in done):,} tokens "
        f"from {read_bytes / 1e6:,.1f} MB in {result.seconds:.2f} s ({rate:,.1f} MB/s)"
    )
    if result.skipped_files:
        examples = ", ".join(result.skipped_files[:SKIPPED_EXAMPLES])
        console.print(
            f"[yellow]skipped {counted(len(result.skipped_files), 'input file')}[/yellow] that "
            f"{'is' if len(result.skipped_files) == 1 else 'are'} not "
            f".jsonl, .jsonl.gz, .jsonl.zst or .parquet, e.g. {examples}"
        )


def _more(hidden: int, indent: str = "") -> str:
    return f"{indent}... and {hidden} more (--verbose lists them all)"


def _why(reason: str | None) -> str:
    """Why the HF encoder runs, read as what it is: a choice, or a tokenizer feature the fast
    encoder does not cover (not a fault of the file)."""
    if not reason:
        return ""
    if "DATA_IO_ENCODER" in reason:
        return f" ({reason})"
    return (
        f" (the fast encoder covers byte-level BPE without extras, and this tokenizer has "
        f"{reason}: the HF encoder gives the same ids, more slowly; the file is fine)"
    )


def _print_table(result: TokenizeResult, console: Console, limit: int | None) -> None:
    listed = [*result.failed, *result.with_status("tokenized")]
    if not listed:
        return
    table = Table(show_edge=False, pad_edge=False)
    for column in ("task", "status", "why", "rows", "tokens", "bad rows", "s"):
        # Task names fold onto a second line rather than lose their end to an ellipsis.
        table.add_column(
            column,
            justify="left" if column in ("task", "status", "why") else "right",
            overflow="fold",
            no_wrap=column not in ("task", "why"),
        )
    for f in listed[:limit]:
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
    if limit is not None and len(listed) > limit:
        console.print(_more(len(listed) - limit))


def _print_bad_rows_and_warnings(
    result: TokenizeResult, console: Console, limit: int | None
) -> None:
    bad = [f for f in result.files if f.bad_rows]
    if bad:
        console.print(
            f"[yellow]skipped {counted(sum(f.bad_rows for f in bad), 'bad row')}:[/yellow]"
        )
        for f in bad[:limit]:
            first = f.bad_row_examples[0] if f.bad_row_examples else "(no example recorded)"
            console.print(f"  {f.task}: {f.bad_rows:,} (first: {first})")
        if limit is not None and len(bad) > limit:
            console.print(_more(len(bad) - limit, "  "))
    for f in result.files:
        for warning in f.warnings:
            console.print(f"[yellow]warning[/yellow] {f.task}: {warning}")


def _print_folders(result: TokenizeResult, console: Console, limit: int | None) -> None:
    if result.removed_orphans:
        hidden = len(result.removed_orphans) - (limit or len(result.removed_orphans))
        console.print(
            f"removed {counted(len(result.removed_orphans), 'orphan folder')} (their source file is gone): "
            + ", ".join(result.removed_orphans[:limit])
            + (f" {_more(hidden)}" if hidden > 0 else "")
        )
    if result.kept:
        console.print(f"kept {counted(len(result.kept), 'task folder')} not in this run's inputs:")
        for item in result.kept[:limit]:
            console.print(f"  {item}")
        if limit is not None and len(result.kept) > limit:
            console.print(_more(len(result.kept) - limit, "  "))
    if result.left_alone:
        console.print("left alone (not written by data_io): " + "; ".join(result.left_alone))
