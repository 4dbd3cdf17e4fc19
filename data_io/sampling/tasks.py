"""Reading and validating the tokenizer's output (formats.md §3) for the sampler.

One task per sub-folder of ``tokenized_path``, in sorted name order; folders whose name starts
with ``.`` are the tokenizer's temporary folders and are ignored, and so is a folder that
``data_io tokenize`` would not take for a task folder (no data_io or original-pipeline
``metadata.json``: tokenize leaves it alone too) unless it holds task arrays (then it is a
damaged task folder, or a copy, and is refused with advice that works: move it away). Only the four small index
arrays are loaded; of ``tokens.npy`` only the header is read (dtype, length, where the data
starts), because the pool copy streams it later. Anything inconsistent fails here, naming the
task and file, so that a bad corpus never produces a silently wrong sample; the tokenizer's
record of each task (its row and token counts) is compared with the arrays too. A task that
fails is damaged, and the error says to delete it before re-tokenizing
(:func:`data_io.formats.provenance.damaged_task_advice`).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from data_io.errors import InputError
from data_io.formats.prefix_config import PrefixConfig, PrefixRule
from data_io.formats.provenance import TaskOrigin, damaged_task_advice, repair_command
from data_io.formats.task_arrays import (
    INDEX_NAMES,
    TASK_FILES,
    TokenFile,
    read_token_header,
)
from data_io.util.fs import try_flock
from data_io.util.words import counted

_DEFAULT_RULE = PrefixRule(prefix="")
# The file a running `data_io tokenize` holds an exclusive flock on (rust/tokenize/output.rs).
TOKENIZE_LOCK = ".data_io.lock"


@dataclass
class Task:
    """One tokenized source file: its rows (int64, unfiltered) and its sampling rule."""

    name: str
    rule: PrefixRule
    matched: bool  # False when no prefix matched and the defaults apply
    inst_start: np.ndarray
    inst_len: np.ndarray
    resp_start: np.ndarray
    resp_len: np.ndarray
    tokens: TokenFile

    @property
    def rows(self) -> int:
        return len(self.inst_start)

    @property
    def category(self) -> str:
        """The report's grouping: the name up to the first ``__``."""
        return self.name.split("__", 1)[0]


def load_tokenizer_info(tokenized_path: Path) -> dict[str, Any]:
    """``tokenizer_info.json`` as a dict (kept verbatim: the trainer reads it back)."""
    path = tokenized_path / "tokenizer_info.json"
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(
            f"{path} is missing: {tokenized_path} is not a tokenizer output folder "
            f"(run `data_io tokenize` first, or fix tokenized_path)"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path} cannot be read as JSON: {exc}") from exc
    if not isinstance(info, dict):
        raise InputError(f"{path} must hold a JSON object, got {type(info).__name__}")
    vocab_size = info.get("vocab_size")
    if vocab_size is not None and (
        not isinstance(vocab_size, int) or isinstance(vocab_size, bool) or vocab_size < 1
    ):
        raise InputError(f"{path}: 'vocab_size' must be a positive integer, got {vocab_size!r}")
    return info


@contextlib.contextmanager
def no_tokenize_running(tokenized_path: Path) -> Iterator[None]:
    """Refuse a tokenized folder that a ``data_io tokenize`` is writing now (it holds an
    exclusive ``flock`` on its lock file for the whole run), and hold a shared lock on it
    while the sample is built: tokenize replaces task folders as it goes, so tasks read
    before and after a replacement, or a ``tokens.npy`` replaced between the index check
    and the pool copy, would make a silently wrong sample. Best effort where the folder
    has no lock file (the original pipeline's) or the file system has no ``flock``."""
    lock = tokenized_path / TOKENIZE_LOCK
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        if not try_flock(fd, shared=True):
            raise InputError(
                f"a data_io tokenize is writing {tokenized_path} now (it holds {lock}): its "
                f"tasks are being replaced; wait for it to finish, then sample again"
            )
        yield
    finally:
        os.close(fd)  # releases the shared lock


def _load_index(path: Path, task: str) -> np.ndarray:
    try:
        array = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(f"task {task}: {path} is missing") from None
    except (OSError, ValueError, EOFError) as exc:  # EOFError: an empty file
        raise InputError(f"task {task}: {path} is not a valid .npy file: {exc}") from exc
    if array.ndim != 1 or array.dtype.kind not in "ui":
        raise InputError(
            f"task {task}: {path} must be a 1-D integer array (<u8), got "
            f"{array.dtype.str} with shape {array.shape}"
        )
    if array.size and array.dtype.kind == "i" and int(array.min()) < 0:
        bad = int(np.argmax(array < 0))
        raise InputError(f"task {task}: {path} row {bad} is negative ({int(array[bad])})")
    unsigned64 = array.dtype.itemsize == 8 and array.dtype.kind == "u"
    if array.size and unsigned64 and int(array.max()) > np.iinfo(np.int64).max:
        raise InputError(f"task {task}: {path} holds a value above 2**63")
    return array.astype(np.int64, copy=False)


def _check_rows(task: str, folder: Path, arrays: dict[str, np.ndarray], tokens: TokenFile) -> None:
    """The row layout of formats.md §3: each response right after its instruction, rows back
    to back from 0, covering ``tokens.npy`` exactly. Vectorised: a pass over the index arrays."""
    lengths = {name: len(array) for name, array in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise InputError(
            f"task {task}: the index arrays in {folder} disagree on the row count {lengths}"
        )
    inst_start, inst_len = arrays["inst_start"], arrays["inst_len"]
    resp_start, resp_len = arrays["resp_start"], arrays["resp_len"]
    inst_end = inst_start + inst_len
    detached = np.flatnonzero(resp_start != inst_end)
    if detached.size:
        row = int(detached[0])
        raise InputError(
            f"task {task}: row {row} of {folder} has resp_start {int(resp_start[row])}, not "
            f"inst_start {int(inst_start[row])} + inst_len {int(inst_len[row])} = "
            f"{int(inst_end[row])}: a response must follow its instruction (formats.md §3; "
            f"{counted(int(detached.size), 'such row')})"
        )
    row_end = resp_start + resp_len
    previous_end = np.concatenate(([0], row_end[:-1]))
    gaps = np.flatnonzero(inst_start != previous_end)
    if gaps.size:
        row = int(gaps[0])
        where = (
            "row 0 must start at 0" if row == 0 else f"row {row - 1} ends at {previous_end[row]}"
        )
        raise InputError(
            f"task {task}: row {row} of {folder} starts at {int(inst_start[row])} but {where}: "
            f"rows must be stored back to back (formats.md §3; {counted(int(gaps.size), 'such row')})"
        )
    if row_end.size and int(row_end[-1]) > tokens.length:
        row = int(np.argmax(row_end > tokens.length))
        raise InputError(
            f"task {task}: row {row} of {folder} ends at token {int(row_end[row])}, beyond the "
            f"{counted(tokens.length, 'token')} of {tokens.path}"
        )
    total = int(row_end[-1]) if row_end.size else 0
    if total != tokens.length:
        raise InputError(
            f"task {task}: the rows cover {counted(total, 'token')} but {tokens.path} holds "
            f"{tokens.length:,}; rows must be stored back to back (formats.md §3)"
        )


def task_folders(tokenized_path: Path) -> list[Path]:
    """The task folders in sorted name order, skipping the tokenizer's ``.``-folders."""
    return sorted(
        (entry for entry in tokenized_path.iterdir() if entry.is_dir()),
        key=lambda entry: entry.name,
    )


def is_temporary(folder: Path) -> bool:
    return folder.name.startswith(".")


def not_a_task_reason(folder: Path) -> str | None:
    """Why ``data_io tokenize`` would not take ``folder`` for a task folder, in its words;
    None when it would. The same rule as ``rust/layout/cache.rs`` ``inspect``: a folder is a task
    folder when its ``metadata.json`` is data_io's record (``"tool": "data_io"``) or the
    original pipeline's (``source_mtime`` and ``source_size``); tokenize leaves any other
    alone (and refuses to replace it)."""
    try:
        text = (folder / "metadata.json").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return "it has no metadata.json"
    try:
        record = json.loads(text)
    except ValueError:
        return "its metadata.json is not JSON"
    if isinstance(record, dict) and (
        record.get("tool") == "data_io" or ("source_mtime" in record and "source_size" in record)
    ):
        return None
    return "its metadata.json was not written by data_io"


def is_sampled_output(folder: Path) -> bool:
    """True when ``folder`` is recognisably a sampler's output (this one's or the original
    ``sample_tokenized.py``'s): a ``metadata.json`` holding a ``tokenizer_info`` object, and
    ``epoch_<k>/`` folders or the ``total_length`` the sampler records."""
    try:
        record = json.loads((folder / "metadata.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return (
        isinstance(record, dict)
        and isinstance(record.get("tokenizer_info"), dict)
        and ("total_length" in record or (folder / "epoch_0").is_dir())
    )


@dataclass
class TaskFolders:
    """The sub-folders of a tokenized folder, sorted as tasks are: what is sampled."""

    # Task folders, and the suspect ones below (they are read, and fail or pass, as tasks).
    folders: list[Path] = field(default_factory=list)
    # Not task folders by tokenize's rule, yet holding task arrays: damaged tasks, or copies.
    suspect: list[tuple[Path, str]] = field(default_factory=list)
    # Not task folders and holding no task array: someone's own folder; not sampled.
    skipped: list[tuple[Path, str]] = field(default_factory=list)

    def skipped_note(self) -> str | None:
        """One line naming the folders that are not sampled, or None."""
        if not self.skipped:
            return None
        names = "; ".join(f"{folder.name} ({why})" for folder, why in self.skipped)
        count = len(self.skipped)
        return (
            f"skipping {count} folder{'s' if count > 1 else ''} of "
            f"{self.skipped[0][0].parent} that {'are' if count > 1 else 'is'} not a task "
            f"folder (`data_io tokenize` leaves {'them' if count > 1 else 'it'} alone too): "
            f"{names}"
        )

    def sampled_outputs(self) -> list[Path]:
        """The suspect folders that are sampled outputs (:func:`is_sampled_output`)."""
        return [folder for folder, _ in self.suspect if is_sampled_output(folder)]

    def suspect_advice(self, repair: str) -> str | None:
        """What helps with the suspect folders (re-running tokenize alone does not), or None.

        A sampled output needs only to be moved out (re-tokenizing has nothing to do with
        it); other suspects are moved out or deleted, then tokenize is re-run."""
        if not self.suspect:
            return None
        parent = self.suspect[0][0].parent
        sampled = self.sampled_outputs()
        lines = []
        if sampled:
            lines.append(
                f"{'; '.join(map(str, sampled))}: a sampled output (metadata.json with "
                f"tokenizer_info, epoch_<k>/ folders), not a task, inside the tokenized folder "
                f"{parent}, whose sub-folders are read as tasks: move {'it' if len(sampled) == 1 else 'them'} out of {parent} "
                f"(a sample's output_path must lie outside tokenized_path), then sample again"
            )
        others = [(folder, why) for folder, why in self.suspect if folder not in sampled]
        if others:
            names = "; ".join(f"{folder} ({why})" for folder, why in others)
            lines.append(
                f"{names}: task arrays without data_io's record, which `data_io tokenize` will "
                f"not replace (it only replaces folders it wrote), so re-running it alone cannot "
                f"repair this: move each such folder out of {parent} (or delete it if it is a "
                f"damaged task), then re-run `{repair}` and sample again"
            )
        return "\n".join(lines)


def select_task_folders(tokenized_path: Path) -> TaskFolders:
    """Sort the sub-folders of ``tokenized_path`` into tasks, suspects and others (see
    :class:`TaskFolders`); the tokenizer's ``.``-folders are not listed at all."""
    selection = TaskFolders()
    for folder in task_folders(tokenized_path):
        if is_temporary(folder):
            continue
        why = not_a_task_reason(folder)
        if why is None:
            selection.folders.append(folder)
        elif any((folder / name).exists() for name in TASK_FILES):
            selection.folders.append(folder)
            selection.suspect.append((folder, why))
        else:
            selection.skipped.append((folder, why))
    return selection


def _check_record(task: str, folder: Path, origin: TaskOrigin, rows: int, tokens: int) -> None:
    """The counts the tokenizer recorded against the arrays: catches a task whose arrays
    were all cut short alike, which the layout checks cannot see."""
    for what, recorded, actual in (("rows", origin.rows, rows), ("tokens", origin.tokens, tokens)):
        if recorded is not None and recorded != actual:
            raise InputError(
                f"task {task}: {folder / 'metadata.json'} records {recorded} {what} but the "
                f"arrays of {folder} hold {actual}: the arrays were changed after tokenizing"
            )


def read_task(folder: Path, prefix_config: PrefixConfig, origin: TaskOrigin | None = None) -> Task:
    """One task, validated; ``origin`` (its tokenizer record), when given, is checked too."""
    name = folder.name
    tokens = read_token_header(folder / "tokens.npy", name)
    arrays = {key: _load_index(folder / f"{key}.npy", name) for key in INDEX_NAMES}
    _check_rows(name, folder, arrays, tokens)
    if origin is not None:
        _check_record(name, folder, origin, len(arrays["inst_start"]), tokens.length)
    rule = prefix_config.match(name)
    return Task(
        name=name,
        rule=rule or _DEFAULT_RULE,
        matched=rule is not None,
        tokens=tokens,
        **arrays,
    )


def read_tasks(
    tokenized_path: Path,
    prefix_config: PrefixConfig,
    *,
    progress: bool = True,
    origins: Mapping[str, TaskOrigin] | None = None,
    repair: str | None = None,
    folders: Sequence[Path] | None = None,
) -> list[Task]:
    """Every task under ``tokenized_path``, validated, in sorted name order.

    ``origins``: the tokenizer's records by task name (:func:`data_io.formats.provenance.check_provenance`);
    ``repair``: the tokenize command that rebuilds the folder, quoted in the advice for a
    damaged task (a generic one when not given); ``folders``: the task folders
    (default: :func:`select_task_folders`'s).
    """
    if folders is None:
        folders = select_task_folders(tokenized_path).folders
    origins = origins or {}
    tasks = []
    # Closed on an error too, so that the error starts on a line of its own.
    with tqdm(folders, desc="Reading indices", unit="task", disable=not progress) as bar:
        for folder in bar:
            try:
                tasks.append(read_task(folder, prefix_config, origins.get(folder.name)))
            except InputError as exc:
                advice = damaged_task_advice(folder, repair or repair_command(tokenized_path, {}))
                raise InputError(f"{exc}\n{advice}") from None
    return tasks


def task_names(tasks: Iterable[Task]) -> list[str]:
    return [task.name for task in tasks]
