"""The sampling run end to end: read, filter, sample epochs, copy the pool, report, publish.

Three streams of work overlap on a 2-core node: a "pool" thread copies the token pool (in the
Rust core, without the GIL); an "epochs" thread gathers and writes each epoch's index arrays
while the main thread draws the next one (the Philox shuffles: one serial chain through a
single generator); then the main thread renders the report while the others finish, and joins
them last. All of it but the rendering releases the GIL.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

import numpy as np
from tqdm import tqdm

from data_io.errors import ConfigError, DataIoError, InputError, OutputError
from data_io.formats.prefix_config import format_overlaps, load_prefix_config
from data_io.formats.provenance import (
    check_interrupted_tokenize,
    check_provenance,
    damaged_task_advice,
    repair_command,
    untokenized_sources,
)
from data_io.sampling import output
from data_io.sampling.algorithm import (
    EpochSampler,
    FilteredTask,
    Rows,
    filter_tasks,
    mean_tokens_per_epoch,
)
from data_io.sampling.config import SampleConfig
from data_io.sampling.epoch_writer import INDEX_DTYPE, EpochWriter
from data_io.sampling.pool import CopyJob, check_token_ids, npy_header, pool_dtype, write_pool
from data_io.sampling.report import (
    Analytics,
    markdown_cell,
    plot_link,
    preload_matplotlib,
    relink_plot,
    write_markdown,
    write_plot,
)
from data_io.sampling.tasks import (
    INDEX_NAMES,
    Task,
    load_tokenizer_info,
    no_tokenize_running,
    read_tasks,
    select_task_folders,
)
from data_io.util.console import on_terminal
from data_io.util.words import counted

PLOT_NAME = "analytics.png"
REPORT_NAME = "analytics.md"  # the Markdown report, kept so that a reused output can show it


@dataclass
class SampleResult:
    """What a run produced (the files are under ``output_path``)."""

    output_path: Path
    reused: bool
    epochs: int
    rows_per_epoch: int
    total_length: int
    pool_tokens: int
    pool_dtype: np.dtype
    analytics: Analytics | None  # None when an existing output was reused
    plot_path: Path | None


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _plot_target(config: SampleConfig, target: Path) -> Path | None:
    """Where the PNG goes; a ``plot_path`` outside the output that cannot be written is
    refused now, before the epochs are drawn, not found when the sample is done."""
    if not config.plot:
        return None
    if config.plot_path is None:
        return target / PLOT_NAME
    plot = Path(config.plot_path).absolute()
    if plot.parent == target:
        return plot
    fix = "choose another plot_path, or pass plot=false"
    if plot.is_dir():
        raise ConfigError(f"config key 'plot_path': {plot} is a folder; name the PNG file ({fix})")
    if not plot.parent.is_dir():
        raise ConfigError(
            f"config key 'plot_path': the folder {plot.parent} does not exist; create it or {fix}"
        )
    if not os.access(plot.parent, os.W_OK | os.X_OK):
        raise ConfigError(
            f"config key 'plot_path': the folder {plot.parent} is not writable by this user; {fix}"
        )
    return plot


def _marker_config(config: SampleConfig, tasks: list[Task]) -> dict[str, object]:
    """The settings that change the output (not where it goes, nor reuse/plot switches)."""
    keys = ("seed", "epochs", "context_size", "min_resp_length", "short_truncated")
    settings: dict[str, object] = {key: getattr(config, key) for key in keys}
    if config.compat != "none":
        # Only when set: outputs built before the key existed stay reusable.
        settings["compat"] = config.compat
    settings["tokenized_path"] = str(Path(config.tokenized_path).absolute())
    # The rules as applied, not the YAML file: a comment edit does not force a rebuild.
    settings["rules"] = {task.name: asdict(task.rule) for task in tasks}
    return settings


def _for_stdout(stored: str, plot: Path | None, target: Path, report_dir: Path) -> str:
    """The stored report as printed: it will be saved in ``report_dir`` (stdout is usually
    redirected to a file in the current folder, ``> show_analytics.md``), so the figure is
    linked from there."""
    if plot is None:
        return stored
    return relink_plot(stored, plot_link(plot, target), plot_link(plot, report_dir))


def resolve_output(given: Path) -> Path:
    """The folder the output is built in: a symbolic link is followed (the output is built
    beside its target, on its file system, and the link keeps pointing at it), never
    replaced by a folder. The placement checks then apply to the resolved path."""
    resolved = given.resolve()
    if resolved != given:
        _log(f"sample: output_path {given} is a symbolic link (or under one): writing {resolved}")
    return resolved


def _with_task_advice(exc: InputError, tokenized: Path, jobs: list[CopyJob], repair: str) -> str:
    """A token-id error of the pool copy, plus how to repair the task it names (the copy's
    messages start with ``<tokens.npy>: task <name>:``)."""
    message = str(exc)
    for job in jobs:
        if message.startswith(f"{job.source.path}: task {job.task}:"):
            return f"{message}\n{damaged_task_advice(tokenized / job.task, repair)}"
    return message


def _check_not_empty(
    config: SampleConfig, tokenized: Path, filtered: list[FilteredTask], per_epoch: int
) -> None:
    """An empty sample is a mistake (wrong folder, a context that drops every row), not a
    result to publish over a good one; ``allow_empty=true`` asks for it explicitly."""
    if not filtered:
        raise InputError(
            f"tokenized_path {str(tokenized)!r} holds no task folders, so the sample would be "
            f"empty; point tokenized_path at the tokenizer's output (run `data_io tokenize` "
            f"first), or pass allow_empty=true"
        )
    if per_epoch:
        return
    source_rows = sum(item.task.rows for item in filtered)
    if not source_rows:
        raise InputError(
            f"the sample would be empty: {_the_tasks(len(filtered))} in {tokenized} "
            f"{'holds' if len(filtered) == 1 else 'hold'} no rows; re-tokenize non-empty sources, "
            "or pass allow_empty=true"
        )
    if sum(item.rows for item in filtered):
        raise ConfigError(
            f"the sample would be empty: {_the_tasks(len(filtered))} in {tokenized} "
            f"{'keeps' if len(filtered) == 1 else 'keep'} rows, but "
            f"the rules of {config.prefix_config_path} take none of them (max_per_file: 0); "
            f"change the rules, or pass allow_empty=true"
        )
    drops: dict[str, int] = {}
    for item in filtered:
        for reason, count in item.drops.items():
            drops[reason] = drops.get(reason, 0) + count
    reasons = "; ".join(f"{reason}: {count:,}" for reason, count in drops.items() if count)
    raise ConfigError(
        f"the sample would be empty: every one of the {counted(source_rows, 'row')} of the "
        f"{counted(len(filtered), 'task')} in {tokenized} is dropped with "
        f"context_size={config.context_size}, min_resp_length={config.min_resp_length} "
        f"({reasons}); raise context_size, lower min_resp_length or change the long_context "
        f"rules of {config.prefix_config_path}, or pass allow_empty=true"
    )


def _listed(names: list[str], *, markdown: bool = False) -> str:
    """The first 8 of ``names``, then ``...``; for the Markdown report each escaped as its
    tables' cells are (a name holding ``*`` or ``|`` would render as markup)."""
    shown = [markdown_cell(name) if markdown else name for name in names[:8]]
    return ", ".join(shown) + (", ..." if len(names) > 8 else "")


def _keep_rows(count: int) -> str:
    """``1 task keeps rows`` or ``3 tasks keep rows``."""
    return f"{counted(count, 'task')} {'keeps' if count == 1 else 'keep'} rows"


def _the_tasks(count: int) -> str:
    """``the task`` or ``the 3 tasks``."""
    return "the task" if count == 1 else f"the {count:,} tasks"


def _epoch_file_bytes(rows_per_epoch: int) -> int:
    return len(npy_header(INDEX_DTYPE, rows_per_epoch)) + rows_per_epoch * 8


def _needed_bytes(epochs: int, rows_per_epoch: int, pool_bytes: int) -> int:
    """The output's size (plus room for the report and PNG), counted without listing its
    files: ``epochs=1000000000`` must meet the free-space check, not build a list that
    exhausts memory first."""
    files_per_epoch = len(INDEX_NAMES)
    return pool_bytes + epochs * files_per_epoch * _epoch_file_bytes(rows_per_epoch) + (8 << 20)


def _needed_parts(epochs: int, rows_per_epoch: int, pool_bytes: int) -> str:
    """What :func:`_needed_bytes` counts, for the free-space message: a typo in ``epochs``
    shows there, not only as a size."""
    epoch_bytes = len(INDEX_NAMES) * _epoch_file_bytes(rows_per_epoch)
    return (
        f"tokens.npy {output.format_size(pool_bytes)} + epochs={epochs:,} of "
        f"{output.format_size(epoch_bytes)} each: lower epochs if that is a slip"
    )


def _expected_files(
    epochs: int, rows_per_epoch: int, pool_bytes: int
) -> Iterator[tuple[str, int | None]]:
    """Every file a complete output has, with its size where it is known in advance; lazy
    (only a reuse check whose marker matches walks it)."""
    yield "tokens.npy", pool_bytes
    yield REPORT_NAME, None
    epoch_bytes = _epoch_file_bytes(rows_per_epoch)
    for epoch in range(epochs):
        for name in INDEX_NAMES:
            yield f"epoch_{epoch}/{name}.npy", epoch_bytes


def sample(
    config: SampleConfig,
    *,
    stdout: TextIO | None = None,
    progress: bool | None = None,
    free_space: output.FreeSpaceProbe = output.free_bytes,
    copy_readers: int | None = None,
    report_dir: Path | None = None,
) -> SampleResult:
    """Run the sampler for a validated config; the Markdown report goes to ``stdout``.

    ``report_dir``: the folder the caller saves that report in (default: the current
    folder, where ``> show_analytics.md`` puts it); its figure link is relative to it.
    ``progress``: bars on stderr (default: when stderr is a terminal). Refused while a
    ``data_io tokenize`` writes ``tokenized_path`` (:func:`no_tokenize_running`).
    """
    with no_tokenize_running(Path(config.tokenized_path)):
        return _sample(
            config, stdout=stdout, progress=progress, free_space=free_space,
            copy_readers=copy_readers, report_dir=report_dir,
        )  # fmt: skip


def _sample(
    config: SampleConfig,
    *,
    stdout: TextIO | None,
    progress: bool | None,
    free_space: output.FreeSpaceProbe,
    copy_readers: int | None,
    report_dir: Path | None,
) -> SampleResult:
    stdout = stdout if stdout is not None else sys.stdout
    if progress is None:
        progress = on_terminal()
    if copy_readers is None:
        # On 2 cores the "pool" thread reads, converts and writes alone: the cheapest in CPU,
        # while the other core draws, gathers and renders (measured 3.65 s against 3.78 s
        # with a separate reader thread, which costs ~0.8 s more CPU in cross-core traffic).
        # With cores to spare, reader threads feed a thread that only writes.
        copy_readers = 0 if (os.cpu_count() or 1) <= 2 else 2
    tokenized = Path(config.tokenized_path)
    report_dir = Path.cwd() if report_dir is None else Path(report_dir).absolute()
    given = Path(config.output_path).absolute()
    # Everything is checked before anything is written or deleted: paths, config,
    # provenance, task arrays, emptiness, then (in _build) space and, if the previous output
    # must go first, the token ids.
    output.check_separate(given, tokenized)  # compares resolved paths, names the given one
    target = resolve_output(given)
    output.check_not_mount_point(target)
    output.check_parent(target)  # a file in the way, found before the inputs are read
    # Whatever this run does next (reuse, rebuild, fail), the folders killed runs left go.
    output.remove_stale_staging(target, _log)
    prefix_config = load_prefix_config(config.prefix_config_path)
    tokenizer_info = load_tokenizer_info(tokenized)
    selection = select_task_folders(tokenized)
    if (skipped := selection.skipped_note()) is not None:
        _log(f"sample: note: {skipped}")
    folders = selection.folders
    # Folders with task arrays but no tokenizer record: re-running tokenize cannot help them
    # (it will not replace them), so they get advice of their own, and only that when they
    # alone are in the way.
    advice = selection.suspect_advice(repair_command(tokenized, tokenizer_info))
    if selection.sampled_outputs():
        raise InputError(advice)  # never a task, whatever its provenance says
    try:
        origins = check_provenance(tokenized, tokenizer_info, folders)
    except InputError as exc:
        if advice is None:
            raise
        suspects = {folder for folder, _ in selection.suspect}
        try:
            check_provenance(tokenized, tokenizer_info, [f for f in folders if f not in suspects])
        except InputError as rest:  # the other tasks are mixed too: both problems, once each
            raise InputError(f"{rest}\n{advice}") from None
        raise InputError(advice) from exc
    repair = repair_command(tokenized, tokenizer_info, origins)
    leftovers = check_interrupted_tokenize(tokenized, tokenizer_info, origins)
    leftovers += untokenized_sources(tokenized, tokenizer_info, origins)
    tasks = read_tasks(
        tokenized, prefix_config, progress=progress,
        origins={origin.name: origin for origin in origins}, repair=repair, folders=folders,
    )  # fmt: skip
    overlaps = format_overlaps(prefix_config.overlaps(task.name for task in tasks))
    for line in [*leftovers, *overlaps]:
        _log(f"sample: note: {line}")

    filtered = filter_tasks(
        tasks,
        context_size=config.context_size,
        min_resp_length=config.min_resp_length,
        short_truncated=config.short_truncated,
    )
    rows = Rows.concat(filtered)
    sampler = EpochSampler(filtered, config.seed)
    per_epoch = sampler.rows_per_epoch
    if not config.allow_empty:
        _check_not_empty(config, tokenized, filtered, per_epoch)
    pool_tokens = sum(task.tokens.length for task in tasks)
    dtype = pool_dtype(
        tokenizer_info.get("vocab_size"),
        [task.tokens.dtype for task in tasks],
        compat=config.compat,
    )
    pool_bytes = len(npy_header(dtype, pool_tokens)) + pool_tokens * dtype.itemsize

    plot = _plot_target(config, target)
    marker = output.Marker(
        inputs=output.fingerprint_inputs(tokenized / "tokenizer_info.json", folders),
        config=_marker_config(config, tasks),
        code=output.code_version(),
    )
    expected = _expected_files(config.epochs, per_epoch, pool_bytes)
    notes: list[str] = []
    unmatched = [task.name for task in tasks if not task.matched]
    if unmatched and prefix_config.rules:
        notes.append(
            f"**No prefix rule:** {counted(len(unmatched), 'task')} taken in full, once per epoch: "
            f"{_listed(unmatched, markdown=True)}"
        )

    # A rule that takes nothing from a task (max_per_file: 0) is a way to leave it out, or a
    # slip: said on stderr and in the report, not left to a row of zeros in the tables.
    unsampled = [item.task.name for item in filtered if item.rows and not item.rows_per_epoch]
    if unsampled:
        _log(
            f"sample: note: {_keep_rows(len(unsampled))} but their rule in "
            f"{config.prefix_config_path} takes none of them (max_per_file: 0): "
            f"{_listed(unsampled)}"
        )
        notes.append(
            f"**Not sampled:** {_keep_rows(len(unsampled))} but their rule takes none "
            f"of them (max_per_file: 0): {_listed(unsampled, markdown=True)}"
        )

    if config.reuse and output.is_reusable(target, marker, expected):
        _log(
            f"sample: {target} is complete and was built from the same inputs, config and "
            f"code: reusing it (reuse=false rebuilds)"
        )
        # The analytics were stored with the output: print them instead of redrawing.
        stored = (target / REPORT_NAME).read_text(encoding="utf-8")
        text = _for_stdout(stored, plot, target, report_dir)
        text += (
            f"**Reused:** the output at `{target}` is complete and was built from the same "
            f"inputs, config and code; pass `reuse=false` to rebuild.\n\n"
        )
        metadata = json.loads((target / "metadata.json").read_text(encoding="utf-8"))
        total_length = int(metadata["total_length"])
        analytics = None
        reused = True
    else:
        notes.append(
            f"**Output:** `{target}`: {counted(pool_tokens, 'token')} ({dtype.name}), "
            f"{counted(config.epochs, 'epoch')} of {counted(per_epoch, 'row')}."
        )
        jobs = [
            CopyJob(task=item.task.name, source=item.task.tokens, pool_offset=item.pool_offset)
            for item in filtered
        ]
        try:
            coverage, analytics, stored = _build(
                config, filtered, rows, sampler, target, plot, marker, tokenizer_info, jobs,
                dtype=dtype, pool_tokens=pool_tokens, pool_bytes=pool_bytes,
                free_space=free_space, copy_readers=copy_readers, progress=progress,
                notes=notes, overlaps=overlaps,
            )  # fmt: skip
        except InputError as exc:
            # The inputs were checked before: what is left is a token id the copy refused.
            raise InputError(_with_task_advice(exc, tokenized, jobs, repair)) from None
        text = _for_stdout(stored, plot, target, report_dir)
        total_length = mean_tokens_per_epoch(rows, coverage, config.epochs)
        reused = False
    stdout.write(text)
    stdout.flush()
    return SampleResult(
        output_path=target,
        reused=reused,
        epochs=config.epochs,
        rows_per_epoch=per_epoch,
        total_length=total_length,
        pool_tokens=pool_tokens,
        pool_dtype=dtype,
        analytics=analytics,
        plot_path=plot,
    )


def _build(
    config: SampleConfig,
    filtered: list[FilteredTask],
    rows: Rows,
    sampler: EpochSampler,
    target: Path,
    plot: Path | None,
    marker: output.Marker,
    tokenizer_info: dict[str, object],
    jobs: list[CopyJob],
    *,
    dtype: np.dtype,
    pool_tokens: int,
    pool_bytes: int,
    free_space: output.FreeSpaceProbe,
    copy_readers: int,
    progress: bool,
    notes: list[str],
    overlaps: list[str],
) -> tuple[np.ndarray, Analytics, str]:
    vocab_size = tokenizer_info.get("vocab_size")
    output.prepare_parent(target)
    output.check_target(target)
    output.ensure_space(
        target, _needed_bytes(config.epochs, sampler.rows_per_epoch, pool_bytes),
        probe=free_space, log=_log,
        # The one check the copy makes as it goes: made up front when the previous output
        # has to be deleted before the copy can start.
        before_delete=lambda: check_token_ids(jobs, dtype, vocab_size),
        parts=_needed_parts(config.epochs, sampler.rows_per_epoch, pool_bytes),
    )  # fmt: skip
    staging = output.make_staging(target)
    plot_in_output = plot is not None and plot.parent == target
    try:
        copy_bar = tqdm(
            total=pool_tokens, desc="Writing tokens", unit="tok", unit_scale=True,
            disable=not progress, position=1, leave=False,
        )  # fmt: skip
        cancel_copy = threading.Event()
        if plot is not None:
            # matplotlib takes ~0.4 s to import: do it while the epochs are drawn (the shuffles
            # release the GIL), so that only the rendering is left at the end.
            threading.Thread(target=preload_matplotlib, name="import-mpl", daemon=True).start()
        # Three streams of work overlap (see the module's doc): the pool copy, the epochs'
        # gathers and writes, and the main thread's draws and then rendering.
        with (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="pool") as pool_thread,
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="epochs") as epoch_thread,
        ):
            copy = pool_thread.submit(
                write_pool, staging / "tokens.npy", jobs, pool_tokens, dtype,
                readers=copy_readers, progress=copy_bar.update, cancelled=cancel_copy,
                vocab_size=vocab_size,
            )  # fmt: skip
            epoch_writer = EpochWriter(staging, rows, sampler.rows_per_epoch, epoch_thread)
            try:
                coverage = np.zeros(rows.total, dtype=np.int64)
                # Transient, like the copy's bar below it: a bar left on screen ends with a
                # newline, which would strand the copy bar's line (at "0%") above the cursor.
                # Closed on an error too (``with``), so that the error gets a line of its own.
                with tqdm(
                    range(config.epochs), desc="Sampling epochs", unit="epoch",
                    disable=not progress, position=0, leave=False,
                ) as epoch_bar:  # fmt: skip
                    for epoch in epoch_bar:
                        if copy.done():
                            copy.result()  # a failed copy (bad id, no space) stops the run
                        buffer = epoch_writer.buffer()
                        row_ids = sampler.next_epoch(out=buffer, coverage=coverage)
                        epoch_writer.submit(epoch, row_ids)
                analytics = Analytics.build(filtered, rows, coverage)
                if plot is not None:
                    plot_file = staging / plot.name if plot_in_output else plot
                    write_plot(
                        plot_file, filtered, rows, coverage, config.epochs, config.context_size
                    )
                epoch_writer.wait()
                copy.result()  # surfaces a copy failure once the copy has stopped
            except BaseException:
                cancel_copy.set()  # no point finishing the copy
                epoch_thread.shutdown(wait=False, cancel_futures=True)
                # Wait for the copy to stop; its own error, if any, is only the cancellation
                # or comes second to the one being raised.
                with contextlib.suppress(Exception):
                    copy.result()
                raise
            finally:
                copy_bar.close()
        metadata = {
            # The original's keys, same meaning; the trainer asserts vocab_size is null.
            "tokenizer_info": tokenizer_info,
            "vocab_size": None,
            "max_seq_len": config.context_size,
            "total_length": mean_tokens_per_epoch(rows, coverage, config.epochs),
            # Added keys.
            "epochs": config.epochs,
            "rows_per_epoch": sampler.rows_per_epoch,
            "num_tokens": pool_tokens,
            "token_dtype": dtype.name,
            output.MARKER_KEY: marker.as_dict(),
        }
        report = io.StringIO()
        # The stored copy links the figure from the output folder, where it lies.
        link = None if plot is None else plot_link(plot, target)
        write_markdown(report, analytics, notes=notes, overlaps=overlaps, plot_link=link)
        (staging / REPORT_NAME).write_text(report.getvalue(), encoding="utf-8")
        # Last: a folder with this marker is complete (it is published right after).
        output.write_json_atomic(staging / "metadata.json", metadata)
        output.publish(staging, target)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(exc, DataIoError):
            raise
        raise OutputError(f"writing the sampled output in {staging} failed: {exc}") from exc
    except BaseException:
        # Crash safety: nothing half-written survives; the old output (if any) is untouched.
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return coverage, analytics, report.getvalue()
