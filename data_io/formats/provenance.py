"""Provenance of a tokenized folder: were all its tasks made by one tokenizer run?

A tokenized folder is written task by task, so a re-tokenize with a new tokenizer that was
killed midway, or that failed on one file, leaves tasks of two vocabularies side by side;
their ids mean different words, and a sample mixing them trains on noise. Each task's
``metadata.json`` (the tokenizer's cache record, ``rust/layout/cache.rs`` ``TaskRecord``) says which
tokenizer and options made it, and ``tokenizer_info.json`` says which the folder claims.

The rule (:func:`check_provenance`):

- ``tokenizer_info.json`` with hashes (``tokenizer_blake3``, ``options_blake3``): every task
  must have a data_io record with the same hashes;
- without hashes (a folder of the original pipeline): tasks without a data_io record are
  accepted (legacy), but data_io records that disagree with each other, or legacy tasks
  mixed with data_io ones, are refused;
- each task's ``tokens.npy`` dtype must be the one its record names;
- no two tasks may record the same ``source_path`` (one file tokenized twice, under two
  input roots, would be sampled twice);
- a task the tokenizer had moved aside (``.data_io-old-<task>-<pid>``) but not replaced is
  missing: the run was interrupted. Its ``.data_io-tmp-*`` folders are only noted.

A damaged task is redone by re-running the tokenizer when its arrays' headers show it (a file
missing, cut short, or of another length than the task's record): the tokenizer checks them.
Arrays edited in place keep their headers, and its cache (keyed on the source and the options)
keeps the folder: every message about a damaged task says both (:func:`damaged_task_advice`).

Only small files are read (the JSON files and the ``.npy`` headers), so consumers call it
before anything else.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data_io import _core
from data_io.errors import DataIoError, InputError
from data_io.formats.dtypes import dtype_or_none
from data_io.formats.task_arrays import read_token_header
from data_io.util.words import counted

TOOL = "data_io"
METADATA = "metadata.json"
TOKENIZER_INFO = "tokenizer_info.json"
HASH_KEYS = ("tokenizer_blake3", "options_blake3")
# The tokenizer's temporary folders inside its output (rust/tokenize/output.rs TMP_PREFIX, OLD_PREFIX).
TMP_PREFIX = ".data_io-tmp-"
OLD_PREFIX = ".data_io-old-"
# Tasks named per group in a refusal (the rest are counted).
SHOWN_TASKS = 5


@dataclass(frozen=True)
class Origin:
    """What made a task: a data_io run (its hashes) or something else (``legacy``)."""

    tokenizer_blake3: str | None = None
    options_blake3: str | None = None
    legacy: bool = False

    def describe(self) -> str:
        if self.legacy:
            return "no data_io record (original pipeline, or metadata.json absent/unreadable)"
        return (
            f"data_io, tokenizer blake3 {_short(self.tokenizer_blake3)}, "
            f"options blake3 {_short(self.options_blake3)}"
        )


LEGACY = Origin(legacy=True)


@dataclass(frozen=True)
class TaskOrigin:
    """One task's origin as read from its ``metadata.json``."""

    name: str
    origin: Origin
    token_dtype: str | None  # recorded by data_io, None for legacy tasks
    source_path: str | None
    # The input root the tokenizer recorded (absent in records of older versions).
    source_root: str | None = None
    rows: int | None = None  # the counts the tokenizer recorded, None for legacy tasks
    tokens: int | None = None


def _short(digest: str | None) -> str:
    return "(none)" if digest is None else digest[:12]


def read_task_origin(folder: Path) -> TaskOrigin:
    """The origin recorded in ``folder/metadata.json``; legacy when it is not data_io's."""
    try:
        record = json.loads((folder / METADATA).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        record = None
    if not isinstance(record, dict) or record.get("tool") != TOOL:
        return TaskOrigin(folder.name, LEGACY, None, None)
    hashes = {key: record.get(key) for key in HASH_KEYS}
    origin = Origin(
        **{key: value if isinstance(value, str) else None for key, value in hashes.items()}
    )
    dtype = record.get("token_dtype")
    source = record.get("source_path")
    root = record.get("source_root")
    return TaskOrigin(
        folder.name,
        origin,
        dtype if isinstance(dtype, str) else None,
        source if isinstance(source, str) else None,
        source_root=root if isinstance(root, str) else None,
        rows=_count(record.get("rows")),
        tokens=_count(record.get("tokens")),
    )


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def damaged_task_advice(folder: Path, repair: str) -> str:
    """How to repair a damaged task: the tokenizer alone would keep it (see the module doc)."""
    return (
        f"Re-running the tokenizer redoes a task whose arrays are missing, cut short or of "
        f"another length than its record says (it reads their headers); arrays edited in place "
        f"keep their headers, and it keeps them too: delete {folder} and re-run `{repair}` (it "
        "re-tokenizes only that task), then sample again."
    )


def info_origin(info: Mapping[str, Any]) -> Origin | None:
    """The origin ``tokenizer_info.json`` claims, or ``None`` when it carries no hash."""
    hashes = {key: info.get(key) for key in HASH_KEYS}
    if not any(isinstance(value, str) for value in hashes.values()):
        return None
    return Origin(
        **{key: value if isinstance(value, str) else None for key, value in hashes.items()}
    )


def _matches(task: Origin, claimed: Origin) -> bool:
    """A data_io task matches every hash the info carries (an older info may lack one)."""
    if task.legacy:
        return False
    return all(
        getattr(claimed, key) is None or getattr(task, key) == getattr(claimed, key)
        for key in HASH_KEYS
    )


def check_provenance(
    tokenized_path: Path, info: Mapping[str, Any], task_folders: Sequence[Path]
) -> list[TaskOrigin]:
    """Refuse a folder whose tasks do not all come from the run ``tokenizer_info.json`` names.

    ``info`` is the parsed ``tokenizer_info.json``, ``task_folders`` the task folders (not
    the tokenizer's temporary ones). Raises one :class:`InputError` that groups the tasks by
    origin and gives the repair command; then one naming the tasks whose ``tokens.npy``
    dtype differs from their record.
    """
    tasks = [read_task_origin(folder) for folder in task_folders]
    claimed = info_origin(info)
    groups: dict[Origin, list[str]] = {}
    for task in tasks:
        groups.setdefault(task.origin, []).append(task.name)
    if claimed is not None:
        consistent = all(_matches(origin, claimed) for origin in groups)
    else:
        consistent = len(groups) <= 1  # all legacy, or one data_io run
    if not consistent:
        raise InputError(_mixed_message(tokenized_path, info, claimed, groups, tasks))
    _check_dtypes(tokenized_path, info, tasks, task_folders)
    _check_unique_sources(tokenized_path, info, tasks)
    return tasks


def _check_unique_sources(
    tokenized_path: Path, info: Mapping[str, Any], tasks: Sequence[TaskOrigin]
) -> None:
    """One source file under two task names (tokenized from two different input roots)
    would be sampled twice as often as the rules say."""
    by_source: dict[str, list[TaskOrigin]] = {}
    for task in tasks:
        if task.source_path is not None:
            by_source.setdefault(task.source_path, []).append(task)
    twice = {source: same for source, same in by_source.items() if len(same) > 1}
    if not twice:
        return
    lines = [
        f"{counted(len(twice), 'source file')} {'was' if len(twice) == 1 else 'were'} tokenized "
        f"more than once into {tokenized_path} "
        f"(under different input roots), so their rows would be sampled twice:"
    ]
    for source, same in sorted(twice.items()):
        folders = " and ".join(
            f"{tokenized_path / task.name} (input root {_input_root(task) or 'unknown'})"
            for task in same
        )
        lines.append(f"  - {source}: {folders}")
    lines.append(
        "Delete the folder(s) whose name does not follow from the input roots you mean to use "
        "(the task name is the path relative to its root, `/` replaced by `__`), then re-run "
        f"`{repair_command(tokenized_path, info, tasks)}` with those roots, and sample again."
    )
    raise InputError("\n".join(lines))


def check_interrupted_tokenize(
    tokenized_path: Path, info: Mapping[str, Any], tasks: Sequence[TaskOrigin]
) -> list[str]:
    """Traces of a tokenize run that died in ``tokenized_path``; returns notes, raises if a
    task is missing.

    The tokenizer replaces a task by moving the old folder aside (``.data_io-old-<task>-<pid>``)
    and renaming the new one into place: an old folder without its task means the run died
    in between, and that task is absent from the sample. Half-written ``.data_io-tmp-*``
    folders lose nothing (the next tokenize run removes them) and are only noted.
    """
    present = {task.name for task in tasks}
    missing: list[str] = []
    temporary: list[str] = []
    for entry in sorted(tokenized_path.iterdir(), key=lambda item: item.name):
        if entry.name.startswith(OLD_PREFIX):
            name, _, pid = entry.name[len(OLD_PREFIX) :].rpartition("-")
            if pid.isdigit() and name and name not in present:
                missing.append(name)
        elif entry.name.startswith(TMP_PREFIX):
            temporary.append(entry.name)
    if missing:
        raise InputError(
            f"a tokenize run into {tokenized_path} was interrupted while replacing "
            f"{counted(len(missing), 'task')}, now missing (only the moved-aside "
            f"{OLD_PREFIX}<task>-<pid> folder is left): {_listing(missing)}; re-run "
            f"`{repair_command(tokenized_path, info, tasks)}` (it removes the leftovers and "
            f"tokenizes the missing tasks again), then sample again"
        )
    if not temporary:
        return []
    return [
        f"{tokenized_path} holds {counted(len(temporary), 'half-written folder')} of an interrupted "
        f"tokenize run ({_listing(temporary)}); they are not sampled, and the next "
        f"`data_io tokenize` run into that folder removes them"
    ]


def untokenized_sources(
    tokenized_path: Path,
    info: Mapping[str, Any],
    tasks: Sequence[TaskOrigin],
    *,
    sampling: bool = True,
) -> list[str]:
    """A note when row files under the tokenizer's recorded inputs have no task in
    ``tokenized_path`` (their tokenize failed, or has not run since they were added): the
    sample leaves them out, and says so. Nothing when the inputs are not all here to look at
    (another machine, moved): there is nothing to compare with."""
    inputs = info.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        return []
    if not all(isinstance(item, str) and Path(item).exists() for item in inputs):
        return []
    try:
        expected = _core.tokenize_task_files(inputs)
    except (DataIoError, OSError):  # the inputs changed shape since: no comparison to make
        return []
    present = {task.name for task in tasks}
    missing = [task for task, _ in expected if task not in present]
    if not missing:
        return []
    left_out = "this sample leaves" if sampling else "a sample of this folder would leave"
    then = ", then sample again" if sampling else ""
    return [
        f"{counted(len(missing), 'row file')} under the tokenizer's inputs "
        f"{'has' if len(missing) == 1 else 'have'} no task in "
        f"{tokenized_path} ({_listing(missing)}): their tokenize failed or has not run since "
        f"they were added, and {left_out} them out; to include them, run "
        f"`{repair_command(tokenized_path, info, tasks)}`{then}"
    ]


def _listing(names: Sequence[str]) -> str:
    shown = ", ".join(names[:SHOWN_TASKS])
    more = len(names) - SHOWN_TASKS
    return shown + (f" and {more} more" if more > 0 else "")


def _mixed_message(
    tokenized_path: Path,
    info: Mapping[str, Any],
    claimed: Origin | None,
    groups: Mapping[Origin, list[str]],
    tasks: Sequence[TaskOrigin],
) -> str:
    info_path = tokenized_path / TOKENIZER_INFO
    lines = [
        f"{tokenized_path} mixes tasks of different tokenizer runs (their token ids mean "
        f"different things); the tasks by origin:"
    ]
    on_info_side = False
    for origin, names in sorted(groups.items(), key=lambda item: -len(item[1])):
        side = ""
        if claimed is not None and _matches(origin, claimed):
            side = f"  <- the run {TOKENIZER_INFO} names"
            on_info_side = True
        lines.append(
            f"  - {origin.describe()}: {counted(len(names), 'task')}: {_listing(names)}{side}"
        )
    tokenizer = info.get("tokenizer_path")
    tokenizer_text = str(tokenizer) if isinstance(tokenizer, str) else "<tokenizer.json>"
    if claimed is None:
        lines.append(
            f"{info_path} records no tokenizer hash (original pipeline), so it sides with no "
            f"group; it names tokenizer {tokenizer_text}."
        )
    elif not on_info_side:
        lines.append(
            f"{info_path} names tokenizer {tokenizer_text} ({claimed.describe()}), which "
            f"matches none of the tasks."
        )
    lines.append(
        "A tokenize run was probably interrupted or failed on some files. Finish it: re-run "
        "the tokenizer over the same inputs (only the tasks that differ are redone):\n"
        f"  {repair_command(tokenized_path, info, tasks)}\n"
        "(or the same command with the tokenizer you meant to use), then sample again."
    )
    return "\n".join(lines)


def repair_command(
    tokenized_path: Path, info: Mapping[str, Any], tasks: Sequence[TaskOrigin] = ()
) -> str:
    """``data_io tokenize <inputs...> -o <tokenized_path> --tokenizer-path <tokenizer>``."""
    inputs = info.get("inputs")
    if isinstance(inputs, list) and inputs and all(isinstance(item, str) for item in inputs):
        roots = [shlex.quote(item) for item in inputs]
    else:
        found = sorted({root for task in tasks if (root := _input_root(task)) is not None})
        roots = [shlex.quote(item) for item in found] or ["<input folders>"]
    tokenizer = info.get("tokenizer_path")
    tokenizer_arg = shlex.quote(tokenizer) if isinstance(tokenizer, str) else "<tokenizer.json>"
    return (
        f"data_io tokenize {' '.join(roots)} -o {shlex.quote(str(tokenized_path))} "
        f"--tokenizer-path {tokenizer_arg}"
    )


def _input_root(task: TaskOrigin) -> str | None:
    """The input root a task's source came from: the ancestor of ``source_path`` relative to
    which the path, ``/`` replaced by ``__``, is the task name (formats.md §3). Recorded since
    ``source_root`` exists; derived for older records."""
    if task.source_root is not None:
        return task.source_root
    if task.source_path is None:
        return None
    source = Path(task.source_path)
    for root in source.parents:
        if source.relative_to(root).as_posix().replace("/", "__") == task.name:
            return str(root)
    return None


def _check_dtypes(
    tokenized_path: Path,
    info: Mapping[str, Any],
    tasks: Sequence[TaskOrigin],
    task_folders: Sequence[Path],
) -> None:
    """Each recorded ``token_dtype`` against the ``tokens.npy`` header (a few bytes each)."""
    wrong = []
    for task, folder in zip(tasks, task_folders, strict=True):
        if task.token_dtype is None:
            continue
        try:
            actual = read_token_header(folder / "tokens.npy", task.name).dtype
        except InputError as exc:
            advice = damaged_task_advice(folder, repair_command(tokenized_path, info, tasks))
            raise InputError(f"{exc}\n{advice}") from None
        if dtype_or_none(task.token_dtype) != actual:
            wrong.append(f"{task.name} ({actual.name}, record says {task.token_dtype})")
    if wrong:
        raise InputError(
            f"{counted(len(wrong), 'task')} of {tokenized_path} {'holds' if len(wrong) == 1 else 'hold'} "
            f"a tokens.npy whose dtype differs from "
            f"the token_dtype of their metadata.json (the file was replaced after tokenizing): "
            f"{_listing(wrong)}; the tokenizer's cache does not notice this, so delete those "
            f"task folders under {tokenized_path} and re-run "
            f"`{repair_command(tokenized_path, info, tasks)}`, then sample again"
        )
