"""What ``data_io train-tokenizer`` prints of a :class:`TrainResult` (one line, then caveats)
and of an evaluation on held-out text (a table)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.table import Table

from data_io.tokenizer.evaluate import ALL, HELD_OUT_SUFFIXES, Compression, as_table
from data_io.tokenizer.train import MIN_FREQUENCY, TrainResult
from data_io.util.console import summary_console
from data_io.util.stale import format_bytes
from data_io.util.words import counted


def caveats(result: TrainResult) -> list[str]:
    """What the user asked for and did not get, each on a line of its own."""
    lines = []
    asked = result.requested_vocab_size
    if asked is not None and result.vocab_size < asked:
        why = (
            "the unigram trainer found no more pieces worth keeping in the texts"
            if result.tokenizer_type == "unigram"
            else f"the texts hold no more pairs seen at least {MIN_FREQUENCY} times"
        )
        # --prefix-config none adds texts only where max_per_file cut a file (never with
        # --text-field, where the prefix config does not apply).
        every_text = " (--prefix-config none uses every text)" if result.limited else ""
        lines.append(
            f"note: the vocabulary has {result.vocab_size:,} tokens, not the {asked:,} asked: "
            f"{why}; train on more texts{every_text} or ask for fewer with --vocab-size"
        )
    if result.invalid_utf8_lines:
        lines.append(
            f"note: invalid UTF-8 replaced with U+FFFD on {counted(result.invalid_utf8_lines, 'line')} "
            "of the raw text (trained on as replaced); re-encode those files as UTF-8 to keep "
            "their characters"
        )
    if result.missing_roles:
        flags = ", ".join("--" + role.replace("_", "-") for role in result.missing_roles)
        lines.append(
            f"note: tokenizer_config.json names no {', '.join(result.missing_roles)} (the "
            f"pipeline's tokens are not among --special-tokens); set them with {flags} TOKEN"
        )
    return lines


def summary_line(result: TrainResult) -> str:
    """One line: what was written, from how many texts and files."""
    bad = sum(f.bad_rows for f in result.files)
    return (
        f"train-tokenizer -> {result.output} (+ config.json, tokenizer_config.json): "
        f"vocab {result.vocab_size:,}, {result.texts_used:,} texts from "
        f"{counted(len(result.files), 'file')} ({len(result.limited)} limited by max_per_file), "
        f"{counted(bad, 'bad row')} skipped, {result.seconds:.1f} s"
    )


def counting_line(result: TrainResult) -> str | None:
    """The Rust trainer's passes: text counted, distinct words, time per pass, memory, spills
    and counts reused (None for tokenizers' trainers)."""
    counting = result.counting
    if counting is None:
        return None
    mb = counting.counted_bytes / 1e6
    rate = mb / counting.count_seconds if counting.count_seconds > 0 else 0.0
    read = f"counted {mb:,.1f} MB of text in {counting.count_seconds:.1f} s ({rate:,.1f} MB/s)"
    if counting.reused_files:
        read = (
            f"{counting.text_bytes / 1e6:,.1f} MB of text: the counts of "
            f"{counted(len(counting.reused_files), 'file')} read back, {mb:,.1f} MB counted; "
            f"{counting.count_seconds:.1f} s"
        )
    parts = [
        read,
        f"{counting.words:,} distinct pre-tokens of {counting.pieces:,}",
        # BPE's merge pass, or unigram's EM passes over the same counts.
        f"{'EM passes' if result.tokenizer_type == 'unigram' else 'merged'} in "
        f"{counting.merge_seconds:.1f} s",
    ]
    if result.peak_rss is not None:
        parts.append(f"peak memory {format_bytes(result.peak_rss)}")
    spill = counting.spill
    if spill.runs:
        parts.append(
            f"counts spilled past --count-memory {format_bytes(counting.count_memory)}: "
            f"{counted(spill.runs, 'run')}, {format_bytes(spill.run_bytes)} in {spill.spill_dir} (removed)"
        )
    if counting.counts_dir:
        parts.append(f"counts kept in {counting.counts_dir}")
    return "; ".join(parts)


def print_summary(result: TrainResult) -> None:
    """What a run printed: the line, the passes, the caveats, and the files not read."""
    print(summary_line(result))
    counting = counting_line(result)
    if counting:
        print(counting)
    for line in caveats(result):
        print(line)
    if result.skipped_files:
        # Raw text's files each say why (not read by name, or no documents).
        are = "is" if len(result.skipped_files) == 1 else "are"
        why = "" if result.text_field is not None else f" that {are} not rows"
        print(
            f"skipped {counted(len(result.skipped_files), 'input file')}{why}, e.g. "
            + ", ".join(result.skipped_files[:3])
        )


def print_evaluation(results: Sequence[Compression], left_out: Sequence[Path] = ()) -> None:
    """Bytes per token (higher: shorter sequences) and tokens per word, per held-out input;
    then what the reading skipped, replaced or left out."""
    header, rows = as_table(results)
    table = Table(title="held-out text: bytes per token (higher is better), tokens per word")
    for k, name in enumerate(header):
        table.add_column(name, justify="left" if k < 2 else "right")
    for row in rows:
        table.add_row(*row)
    summary_console().print(table)
    for line in evaluation_notes(results, left_out):
        print(line)


def evaluation_notes(results: Sequence[Compression], left_out: Sequence[Path] = ()) -> list[str]:
    """The held-out rows skipped, lines repaired and files not read, each on a line."""
    per_file = {r.source: r for r in results if r.source != ALL}.values()
    bad = sum(r.bad_rows for r in per_file)
    replaced = sum(r.invalid_utf8_lines for r in per_file)
    lines = []
    if bad:
        lines.append(f"note: held-out: {counted(bad, 'bad row')} skipped (--on-error skip)")
    if replaced:
        lines.append(
            f"note: held-out: invalid UTF-8 replaced with U+FFFD on {counted(replaced, 'line')} of .txt"
        )
    if left_out:
        lines.append(
            f"note: held-out: {counted(len(left_out), 'file')} left out, not held-out text by name "
            f"({', '.join(HELD_OUT_SUFFIXES)}), e.g. {', '.join(map(str, left_out[:3]))}"
        )
    return lines
