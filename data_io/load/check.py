"""```data_io loader-check CONFIG```: build the loader a config describes and show what it found.

Prints the sources (files, tokens, samples, what the window cut drops), the samples and steps per
rank and epoch, the mixture's weights per phase, the eval set, then times the first batches: a
dry run of the data side of a training job, before any GPU is reserved.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from rich.table import Table

from data_io.load.protocols import summary_of
from data_io.util.console import summary_console

if TYPE_CHECKING:
    from data_io.load.config import LoaderConfig
    from data_io.load.order.samplers import MixtureOrder

__all__ = ["check_loader", "print_report"]


def _phase_table(order: MixtureOrder, names: list[str]) -> Table:
    table = Table(title="mixture weights per phase (after mix_temperature)")
    table.add_column("phase")
    table.add_column("start step", justify="right")
    table.add_column("lr_scale", justify="right")
    for name in names:
        table.add_column(name, justify="right")
    for i, phase in enumerate(order.phases):
        weights = [f"{w:.3f}" for w in phase.weights]
        table.add_row(str(i), str(phase.start_step), f"{phase.lr_scale:g}", *weights)
    return table


def check_loader(
    config: LoaderConfig, rank: int = 0, world_size: int = 1, batches: int = 5
) -> dict[str, Any]:
    """Build the loader, time ``batches`` batches; returns the report ``loader-check`` prints."""
    from data_io.load.build import build_dataloader  # noqa: PLC0415  CLI start-up: the loaders import torch
    from data_io.load.config import EVAL_MAIN_SET  # noqa: PLC0415  CLI start-up: the loaders import torch
    from data_io.load.eval import build_eval_loaders  # noqa: PLC0415  CLI start-up: the loaders import torch

    started = time.perf_counter()
    # The loader a training job would get, built the same way.
    loader = build_dataloader(config, rank, world_size)
    built_s = time.perf_counter() - started
    from data_io.load.config import overridden_sources  # noqa: PLC0415  CLI start-up: the loaders import torch

    report: dict[str, Any] = {
        "kind": loader.identity["kind"],
        "overridden": overridden_sources(config.data, config.eval),
        "sources": summary_of(loader.dataset),
        "build_seconds": round(built_s, 3),
        "rank": rank,
        "world_size": world_size,
        "batch_size": config.train.batch_size,
        "seq_len": config.train.seq_len,
        "batches_asked": batches,
    }
    if loader.order is not None:
        report["samples_per_epoch"] = loader.order.epoch_length
        report["steps_per_epoch"] = len(loader)
        report["samples_per_rank_per_epoch"] = len(loader) * config.train.batch_size
    timings = []
    # Tokens of each batch as handed out: packed rows' items are sample_packing_sequence_len
    # (or the longest row) long, not train.seq_len, and a last batch may be short.
    batch_tokens: list[int] = []
    tick = time.perf_counter()
    shapes: dict[str, list[int]] = {}
    for i, batch in enumerate(loader):
        now = time.perf_counter()
        timings.append(now - tick)
        tick = now
        shapes = {k: list(v.shape) for k, v in batch.items()}
        ids = batch.get("input_ids")
        fallback = config.train.batch_size * config.train.seq_len
        batch_tokens.append(int(ids.numel()) if ids is not None else fallback)
        if i + 1 >= batches:
            break
    report["batch_shapes"] = shapes
    report["batches_timed"] = len(timings)  # fewer than asked when this rank's epoch ends
    report["first_batch_seconds"] = round(timings[0], 3) if timings else None
    if len(timings) > 1:
        rest = sum(timings[1:])
        tokens = sum(batch_tokens[1:])
        report["tokens_per_second_after_first"] = round(tokens / rest) if rest else None
    report["tokens_per_source"] = loader.token_counts()
    for name, evaluation in build_eval_loaders(config, rank, world_size).items():
        report["eval" if name == EVAL_MAIN_SET else f"eval {name}"] = {
            "samples": len(evaluation.dataset),
            "steps": evaluation.steps,
            "interval": evaluation.interval,
            "wraps_around": evaluation.steps * evaluation.batch_size * world_size
            > len(evaluation.dataset),
        }
    report["_order"] = loader.order
    report["_names"] = loader.names
    return report


# Kept out of the table (still in --json): what every row repeats or a list per file.
_DETAIL_KEYS = {"seq_len", "files_with_dropped_tail", "files_without_windows"}


# More keys than this and the table is turned: a row per key, a column per source (a packed
# rows source has 17 keys, which folded into a letter or two a column at 80 columns).
_MOST_COLUMNS = 7


def _sources_table(kind: str, sources: dict[str, Any]) -> Table:
    """One row per source and a column per key of the sources' summaries, or, where the keys
    outnumber ``_MOST_COLUMNS``, a row per key and a column per source."""
    rows = sources if kind == "mixture" else {kind: sources}
    table = Table(title="sources")
    columns: list[str] = []
    for summary in rows.values():
        columns += [
            k
            for k, v in summary.items()
            if k not in columns and k not in _DETAIL_KEYS and not isinstance(v, (dict, list))
        ]
    if len(columns) > _MOST_COLUMNS:
        table.add_column("")
        for name in rows:
            table.add_column(name, overflow="fold")
        for column in columns:
            cells = (_cell(summary.get(column)) for summary in rows.values())
            table.add_row(column.replace("_", " "), *cells)
        return table
    table.add_column("source")
    for column in columns:
        table.add_column(column.replace("_", " "), overflow="fold")
    for name, summary in rows.items():
        table.add_row(name, *(_cell(summary.get(c)) for c in columns))
    return table


def _cell(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, list):
        return ", ".join(map(str, value[:5])) + (f" (+{len(value) - 5})" if len(value) > 5 else "")
    return "" if value is None else str(value)


def print_report(report: dict[str, Any], as_json: bool) -> None:
    from data_io.load.order.samplers import MixtureOrder  # noqa: PLC0415  CLI start-up: the loaders import torch

    console = summary_console()
    order, names = report.pop("_order"), report.pop("_names")
    if as_json:
        console.print_json(json.dumps(report, default=str))
        return
    # The items' length as the batches have it: packed rows' bins are not train.seq_len long.
    width = (report["batch_shapes"].get("input_ids") or [None])[-1]
    items = (
        f"items of {width} tokens (train.seq_len {report['seq_len']} does not set them)"
        if width is not None and width != report["seq_len"]
        else f"seq_len {report['seq_len']}"
    )
    console.print(
        f"[bold]loader-check[/bold]: {report['kind']} data, rank {report['rank']} of "
        f"{report['world_size']}, batch {report['batch_size']} x {items}, "
        f"built in {report['build_seconds']} s"
    )
    if report.get("trainer_overrides"):
        console.print(
            f"note: not the loader's, left to the trainer: {', '.join(report['trainer_overrides'])}",
            markup=False,
        )
    for field, by in report["overridden"].items():
        console.print(f"note: {by} overrides {field}, which is not read (KempnerForge's rule)")
    console.print(_sources_table(report["kind"], report["sources"]))
    if "steps_per_epoch" in report:
        console.print(
            f"epoch: {report['samples_per_epoch']:,} samples; this rank: "
            f"{report['steps_per_epoch']:,} steps of {report['batch_size']} "
            f"({report['samples_per_rank_per_epoch']:,} samples)"
        )
    if isinstance(order, MixtureOrder) and names:
        console.print(_phase_table(order, names))
    shapes = ", ".join(f"{k} {tuple(v)}" for k, v in report["batch_shapes"].items())
    console.print(f"batch: {shapes}")
    # Only what was measured: one batch (--batches 1) has no rate after the first.
    timed = [f"first batch: {report['first_batch_seconds']} s"]
    if report.get("tokens_per_second_after_first") is not None:
        timed.append(f"then {report['tokens_per_second_after_first']:,} tokens/s")
    if report["batches_timed"] < report.get("batches_asked", 0):
        timed.append(f"{report['batches_timed']} batches timed: this rank's epoch ends there")
    console.print(
        "; ".join(timed)
        + "; tokens per source: "
        + ", ".join(f"{k} {v:,}" for k, v in report["tokens_per_source"].items())
    )
    for key in [k for k in report if k == "eval" or k.startswith("eval ")]:
        ev = report[key]
        wraps = " (wraps around)" if ev["wraps_around"] else ""
        console.print(
            f"{key}: {ev['samples']:,} samples, {ev['steps']} steps every {ev['interval']} "
            f"steps{wraps}"
        )
