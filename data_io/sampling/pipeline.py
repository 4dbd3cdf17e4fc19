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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

import numpy as np
from tqdm import tqdm

from data_io.errors import DataIoError, OutputError
from data_io.prefix_config import format_overlaps, load_prefix_config
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
from data_io.sampling.pool import CopyJob, npy_header, pool_dtype, write_pool
from data_io.sampling.report import Analytics, preload_matplotlib, write_markdown, write_plot
from data_io.sampling.tasks import (
    INDEX_NAMES,
    Task,
    is_temporary,
    load_tokenizer_info,
    read_tasks,
    task_folders,
)

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
    if not config.plot:
        return None
    if config.plot_path is None:
        return target / PLOT_NAME
    return Path(config.plot_path).absolute()


def _marker_config(config: SampleConfig, tasks: list[Task]) -> dict[str, object]:
    """The settings that change the output (not where it goes, nor reuse/plot switches)."""
    keys = ("seed", "epochs", "context_size", "min_resp_length", "short_truncated")
    settings: dict[str, object] = {key: getattr(config, key) for key in keys}
    settings["tokenized_path"] = str(Path(config.tokenized_path).absolute())
    # The rules as applied, not the YAML file: a comment edit does not force a rebuild.
    settings["rules"] = {task.name: asdict(task.rule) for task in tasks}
    return settings


def _expected_files(epochs: int, rows_per_epoch: int, pool_bytes: int) -> dict[str, int | None]:
    """Every file a complete output has, with its size where it is known in advance."""
    epoch_bytes = len(npy_header(INDEX_DTYPE, rows_per_epoch)) + rows_per_epoch * 8
    files: dict[str, int | None] = {"tokens.npy": pool_bytes, REPORT_NAME: None}
    for epoch in range(epochs):
        for name in INDEX_NAMES:
            files[f"epoch_{epoch}/{name}.npy"] = epoch_bytes
    return files


def sample(
    config: SampleConfig,
    *,
    stdout: TextIO | None = None,
    progress: bool = True,
    free_space: output.FreeSpaceProbe = output.free_bytes,
    copy_readers: int | None = None,
) -> SampleResult:
    """Run the sampler for a validated config; the Markdown report goes to ``stdout``."""
    stdout = stdout if stdout is not None else sys.stdout
    if copy_readers is None:
        # On 2 cores the "pool" thread reads, converts and writes alone: the cheapest in CPU,
        # while the other core draws, gathers and renders (measured 3.65 s against 3.78 s
        # with a separate reader thread, which costs ~0.8 s more CPU in cross-core traffic).
        # With cores to spare, reader threads feed a thread that only writes.
        copy_readers = 0 if (os.cpu_count() or 1) <= 2 else 2
    tokenized = Path(config.tokenized_path)
    prefix_config = load_prefix_config(config.prefix_config_path)
    tokenizer_info = load_tokenizer_info(tokenized)
    tasks = read_tasks(tokenized, prefix_config, progress=progress)
    overlaps = format_overlaps(prefix_config.overlaps(task.name for task in tasks))
    for line in overlaps:
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
    pool_tokens = sum(task.tokens.length for task in tasks)
    dtype = pool_dtype(tokenizer_info.get("vocab_size"), [task.tokens.dtype for task in tasks])
    pool_bytes = len(npy_header(dtype, pool_tokens)) + pool_tokens * dtype.itemsize

    target = Path(config.output_path).absolute()
    plot = _plot_target(config, target)
    folders = [folder for folder in task_folders(tokenized) if not is_temporary(folder)]
    marker = output.Marker(
        inputs=output.fingerprint_inputs(tokenized / "tokenizer_info.json", folders),
        config=_marker_config(config, tasks),
        code=output.code_version(),
    )
    expected = _expected_files(config.epochs, per_epoch, pool_bytes)
    notes: list[str] = []
    unmatched = [task.name for task in tasks if not task.matched]
    if unmatched and prefix_config.rules:
        shown = ", ".join(unmatched[:8]) + (", ..." if len(unmatched) > 8 else "")
        notes.append(
            f"**No prefix rule:** {len(unmatched)} task(s) taken in full, once per epoch: {shown}"
        )

    if config.reuse and output.is_reusable(target, marker, expected):
        _log(
            f"sample: {target} is complete and was built from the same inputs, config and "
            f"code: reusing it (reuse=false rebuilds)"
        )
        # The analytics were stored with the output: print them instead of redrawing.
        text = (target / REPORT_NAME).read_text(encoding="utf-8")
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
            f"**Output:** `{target}`: {pool_tokens:,} tokens ({dtype.name}), {config.epochs} "
            f"epochs of {per_epoch:,} rows."
        )
        coverage, analytics, text = _build(
            config, tasks, filtered, rows, sampler, target, plot, marker, tokenizer_info,
            dtype=dtype, pool_tokens=pool_tokens, needed=sum(size or 0 for size in expected.values()) + (8 << 20),
            free_space=free_space, copy_readers=copy_readers, progress=progress,
            notes=notes, overlaps=overlaps,
        )  # fmt: skip
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
    tasks: list[Task],
    filtered: list[FilteredTask],
    rows: Rows,
    sampler: EpochSampler,
    target: Path,
    plot: Path | None,
    marker: output.Marker,
    tokenizer_info: dict[str, object],
    *,
    dtype: np.dtype,
    pool_tokens: int,
    needed: int,
    free_space: output.FreeSpaceProbe,
    copy_readers: int,
    progress: bool,
    notes: list[str],
    overlaps: list[str],
) -> tuple[np.ndarray, Analytics, str]:
    output.prepare_parent(target)
    output.check_target(target)
    output.remove_stale_staging(target, _log)
    output.ensure_space(target, needed, probe=free_space, log=_log)
    staging = output.make_staging(target)
    plot_in_output = plot is not None and plot.parent == target
    try:
        jobs = [
            CopyJob(task=item.task.name, source=item.task.tokens, pool_offset=item.pool_offset)
            for item in filtered
        ]
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
            )  # fmt: skip
            epoch_writer = EpochWriter(staging, rows, sampler.rows_per_epoch, epoch_thread)
            try:
                coverage = np.zeros(rows.total, dtype=np.int64)
                for epoch in tqdm(
                    range(config.epochs), desc="Sampling epochs", unit="epoch",
                    disable=not progress, position=0,
                ):  # fmt: skip
                    if copy.done():
                        copy.result()  # a failed copy (bad token id, no space) stops the run
                    row_ids = sampler.next_epoch(out=epoch_writer.buffer(), coverage=coverage)
                    epoch_writer.submit(epoch, row_ids)
                analytics = Analytics.build(filtered, rows, coverage)
                if plot is not None:
                    plot_file = staging / plot.name if plot_in_output else plot
                    write_plot(plot_file, filtered, rows, coverage, config.epochs)
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
        write_markdown(report, analytics, notes=notes, overlaps=overlaps, plot=plot)
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
