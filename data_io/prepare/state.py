"""The output folder's state: ``dataset_metadata.json``, the run journal and the rollback.

``dataset_metadata.json`` is written last, atomically, and is the commit point of a run: it
lists every shard (name, tokens, sha256), the inputs prepared so far with their content hashes,
the options that shape the shards, and the file of de-duplication hashes. While a run is under
way ``.prepare/journal.json`` exists; a run that finds it (the previous one was killed) first
rolls the folder back to what the metadata records: shards it does not list and temporary files
are removed, a shorter last shard that was being extended is cut back to its recorded length
(its recorded bytes are a prefix of the new ones), and unreferenced hash files are deleted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from data_io.errors import ConfigError, OutputError
from data_io.formats.dtypes import dtype_or_none
from data_io.prepare.shards import ShardRecord, npy_header, truncate_shard
from data_io.prepare.tokenizers import CHAR_EOS, CHAR_STATE_FILE, TOKENIZER_FILES
from data_io.util.fs import sha256 as file_sha256
from data_io.util.fs import try_flock, write_json_atomic

__all__ = [
    "METADATA_FILE",
    "PRODUCER",
    "SPLITS",
    "STATE_DIR",
    "DamagedShards",
    "begin_run",
    "end_run",
    "file_sha256",
    "metadata_problem",
    "open_output",
    "split_records",
    "write_metadata",
]

METADATA_FILE = "dataset_metadata.json"
STATE_DIR = ".prepare"
JOURNAL = "journal.json"
# data_io's bookkeeping files that another stage leaves in its output folder: a tokenize's
# lock (``data_io.sampling.tasks.TOKENIZE_LOCK``), left out of the files a refusal names.
_BOOKKEEPING = frozenset({".data_io.lock"})
PRODUCER = "data_io prepare"
FORMAT_VERSION = 1
SPLITS = ("train", "val")


def _read_metadata(out: Path) -> dict[str, Any] | None:
    path = out / METADATA_FILE
    if not path.is_file():
        return None
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise OutputError(
            f"{path}: unreadable ({err}); {out} is not a dataset data_io prepare can continue: "
            "pass a new output folder"
        ) from err
    if not isinstance(content, dict) or content.get("producer") != PRODUCER:
        raise OutputError(
            f"{out} holds another dataset ({METADATA_FILE} not written by {PRODUCER}); pass an "
            "empty or new output folder"
        )
    problem = metadata_problem(content)
    if problem is not None:
        raise OutputError(
            f"{path}: {problem}; the file was damaged or edited after prepare wrote it: restore "
            "it from a copy, or prepare into a new folder"
        )
    return content


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def metadata_problem(content: dict[str, Any]) -> str | None:
    """What is missing or malformed in the keys an incremental run relies on (None: fine)."""
    dtype = content.get("dtype")
    parsed = dtype_or_none(dtype)
    if parsed is None or parsed.kind not in "iu":
        return f"'dtype' is {dtype!r}, not an integer dtype"
    if content.get("shard_format") not in ("bin", "npy"):
        return f"'shard_format' is {content.get('shard_format')!r}, not 'bin' or 'npy'"
    for key in ("vocab_size", "eos_id"):
        if not _is_int(content.get(key)):
            return f"{key!r} is {content.get(key)!r}, not a non-negative integer"
    tokenizer = content.get("tokenizer")
    if not isinstance(tokenizer, dict) or not isinstance(tokenizer.get("kind"), str):
        return f"'tokenizer' is {tokenizer!r}, not an object with a 'kind'"
    for key in ("inputs", "runs"):
        if not isinstance(content.get(key), list) or not all(
            isinstance(item, dict) for item in content[key]
        ):
            return f"{key!r} is not a list of objects"
    for entry in content["inputs"]:
        if not isinstance(entry.get("name"), str) or not isinstance(entry.get("sha256"), str):
            return f"an entry of 'inputs' lacks its name or sha256: {entry!r}"
    if not isinstance(content.get("options", {}), dict):
        return "'options' is not an object"
    splits = content.get("splits")
    if not isinstance(splits, dict):
        return "'splits' is not an object"
    for split in SPLITS:
        entry = splits.get(split)
        if not isinstance(entry, dict) or not isinstance(entry.get("shards"), list):
            return f"'splits.{split}' has no list of shards"
        if not _is_int(entry.get("tokens")) or not _is_int(entry.get("documents")):
            return f"'splits.{split}' lacks its tokens or documents count"
        for shard in entry["shards"]:
            if not (
                isinstance(shard, dict)
                and isinstance(shard.get("name"), str)
                and "/" not in shard["name"]
                and _is_int(shard.get("tokens"))
                and isinstance(shard.get("sha256"), str)
            ):
                return f"'splits.{split}.shards' holds {shard!r}, not a name, tokens and sha256"
    hashes = content.get("dedup_hashes")
    if hashes is not None and (not isinstance(hashes, str) or "/" in hashes):
        return f"'dedup_hashes' is {hashes!r}, not a file name"
    return None


def open_output(out: Path) -> tuple[dict[str, Any] | None, list[str]]:
    """The metadata of the dataset in ``out`` (None when it is new) and the files an
    interrupted run had left, rolled back here (removed or cut back to their recorded size);
    a folder holding anything else is an error."""
    if out.exists() and not out.is_dir():
        raise OutputError(f"{out} is a file; pass a folder for the dataset")
    if not out.exists():
        return None, []
    metadata = _read_metadata(out)
    journal = out / STATE_DIR / JOURNAL
    if metadata is None and not journal.is_file():
        # The scale-out's plan and parts may come first (data_io.scale).
        others = sorted(p.name for p in out.iterdir() if p.name != ".data_io_scale")
        if others:
            # Named: what the user would recognise (a tokenize's lock file beside its task
            # folders is noise); the lock only when it is all there is.
            named = [name for name in others if name not in _BOOKKEEPING] or others
            listed = ", ".join(named[:5]) + (", …" if len(named) > 5 else "")
            raise OutputError(
                f"{out} holds files data_io prepare did not write ({listed}) and no "
                f"{METADATA_FILE}; pass an empty or new output folder"
            )
    undone = rollback(out, metadata) if journal.is_file() else []
    return metadata, undone


def split_records(metadata: dict[str, Any] | None, split: str) -> list[ShardRecord]:
    if metadata is None:
        return []
    shards = metadata["splits"][split]["shards"]
    return [ShardRecord(s["name"], int(s["tokens"]), s["sha256"]) for s in shards]


def rollback(out: Path, metadata: dict[str, Any] | None) -> list[str]:
    """Bring ``out`` back to what ``metadata`` records; the paths removed or cut.

    Only bytes an uncommitted run added are taken away, and nothing is ever written in their
    place: a recorded shard is cut back only when it is longer than recorded and its first
    bytes are the recorded ones (their sha256). A shard that is shorter, or whose recorded part
    changed, was damaged by something else: it is left exactly as it is, as evidence, and
    ``DamagedShards`` names it (the caller decides whether that stops the run).
    """
    undone: list[str] = []
    damaged: list[str] = []
    dtype = np.dtype(metadata["dtype"]) if metadata else None
    fmt = metadata["shard_format"] if metadata else None
    for split in SPLITS:
        folder = out / split
        if not folder.is_dir():
            continue
        recorded = {r.name: r for r in split_records(metadata, split)}
        for path in sorted(folder.iterdir()):
            record = recorded.get(path.name)
            if record is None:
                if path.name.startswith(("shard_", ".shard_")):
                    path.unlink()
                    undone.append(str(path))
                continue
            assert dtype is not None and fmt is not None
            state = _recorded_state(path, record, dtype, fmt)
            if state == "extended":
                truncate_shard(path, record.tokens, dtype, fmt)
                undone.append(str(path))
            elif state != "as recorded":
                damaged.append(f"{path} ({state})")
    _rollback_tokenizer(out, metadata, undone)
    state_dir = out / STATE_DIR
    keep = metadata.get("dedup_hashes") if metadata else None
    for path in sorted(state_dir.glob("*")) if state_dir.is_dir() else []:
        if path.name in (JOURNAL, keep):
            continue
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    if damaged:
        # The journal stays: the next run rolls back again once the shards are restored.
        raise DamagedShards(out, damaged)
    if (state_dir / JOURNAL).is_file():
        (state_dir / JOURNAL).unlink()
        undone.append(str(state_dir / JOURNAL))
    if metadata is None and state_dir.is_dir():
        state_dir.rmdir()  # a first run leaves nothing behind, so the folder can be reused
    return undone


class DamagedShards(OutputError):
    """Recorded shards that a rollback may not touch: shorter than recorded, or changed."""

    def __init__(self, out: Path, damaged: list[str]) -> None:
        self.damaged = damaged
        listed = "; ".join(damaged[:3]) + (
            f"; and {len(damaged) - 3} more" if len(damaged) > 3 else ""
        )
        super().__init__(
            f"{out}: shards differ from what {METADATA_FILE} records and were left as they are: "
            f"{listed}; restore them from a copy (or prepare into a new folder)"
        )


def _recorded_state(path: Path, record: ShardRecord, dtype: np.dtype, fmt: str) -> str:
    """``as recorded``, ``extended`` (the recorded bytes followed by an uncommitted run's), or
    what is wrong with the shard. Hashes only a shard whose size differs from the record."""
    header = len(npy_header(dtype, record.tokens)) if fmt == "npy" else 0
    size = path.stat().st_size
    expected = header + record.tokens * dtype.itemsize
    if size == expected:
        return "as recorded"
    if size < expected:
        return f"{size} bytes, {expected} recorded"
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(header)
        remaining = record.tokens * dtype.itemsize
        while remaining and (block := f.read(min(remaining, 1 << 22))):
            digest.update(block)
            remaining -= len(block)
    if digest.hexdigest() != record.sha256:
        return f"its first {record.tokens} tokens are not the recorded ones"
    return "extended"


def _rollback_tokenizer(out: Path, metadata: dict[str, Any] | None, undone: list[str]) -> None:
    """Undo the tokenizer files of an uncommitted run: all of them after a first run; after a
    later one, the characters a char vocabulary gained (old ids never move, so a cut suffices)."""
    if metadata is None:
        for name in TOKENIZER_FILES:
            if (out / name).is_file():
                (out / name).unlink()
                undone.append(str(out / name))
        for split in SPLITS:
            if (out / split).is_dir() and not any((out / split).iterdir()):
                (out / split).rmdir()
        return
    state_file = out / CHAR_STATE_FILE
    if metadata["tokenizer"]["kind"] != "char" or not state_file.is_file():
        return
    state = json.loads(state_file.read_text(encoding="utf-8"))
    vocab_size = int(metadata["vocab_size"])
    listed = state.get("chars", [])
    # This version lists the EOS first (one entry per id); earlier ones the characters only.
    keep = vocab_size if listed[:1] == [CHAR_EOS] else vocab_size - 1
    if len(listed) > keep:
        state["chars"] = listed[:keep]
        state["vocab_size"] = vocab_size
        write_json_atomic(state_file, state)
        undone.append(str(state_file))


def begin_run(out: Path, run: int) -> Path:
    """Mark a run as under way; returns its private work folder."""
    state = out / STATE_DIR
    work = state / f"work_{run:05d}"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    write_json_atomic(state / JOURNAL, {"run": run, "started": time.time(), "pid": os.getpid()})
    return work


def end_run(out: Path, work: Path) -> None:
    shutil.rmtree(work, ignore_errors=True)
    (out / STATE_DIR / JOURNAL).unlink(missing_ok=True)


def write_metadata(out: Path, metadata: dict[str, Any]) -> None:
    write_json_atomic(out / METADATA_FILE, metadata)


def check_same_options(
    out: Path, metadata: dict[str, Any], current: dict[str, Any], tokenizer: str | None = None
) -> None:
    """An incremental run must shape its shards as the earlier runs did. ``tokenizer``: the
    tokenizer as this run names it, shown beside the recorded one's name (the options record
    the tokenizer by its content hash)."""
    recorded = metadata.get("options", {})
    names = {}
    if tokenizer is not None and isinstance(metadata.get("tokenizer"), dict):
        names = {"tokenizer": (metadata["tokenizer"].get("spec"), tokenizer)}
    differ = [
        f"{_KEY_WORDS.get(key, key)}: {_named(names.get(key), 0, key, recorded.get(key))} then, "
        f"{_named(names.get(key), 1, key, value)} now"
        for key, value in current.items()
        if recorded.get(key) != value
    ]
    if differ:
        raise ConfigError(
            f"{out} was prepared with other options ({'; '.join(differ)}); re-run with the "
            "same options to add inputs, or prepare into a new folder"
        )


# A recorded option that is not one of prepare's keyword arguments, named by those that make it.
_KEY_WORDS = {"near_dedup": "near_ngram, near_bands, near_rows"}


def _named(names: tuple[Any, Any] | None, which: int, key: str, value: Any) -> str:
    """``'gpt2'`` for a tokenizer named differently then and now; with its content hash where
    the two are named alike (the same path, its file changed)."""
    if names is None or not isinstance(names[which], str):
        return _shown(key, value)
    if names[0] != names[1]:
        return repr(names[which])
    return f"{names[which]!r} ({str(value)[:19]}…)"


def _shown(key: str, value: Any) -> str:
    """An option's recorded value as the user gave it: ``dedup`` is recorded True / False for
    doc / none (as folders written before the other modes record it)."""
    if key == "dedup" and isinstance(value, bool):
        return "'doc'" if value else "'none'"
    return repr(value)


@contextlib.contextmanager
def exclusive(out: Path) -> Iterator[None]:
    """Hold ``out`` for one prepare run: a second run into the same folder (which would take
    the first one's journal for a crash and roll it back) is refused while the first lives.
    The lock is an advisory ``flock`` on the folder itself, released when the run ends or dies.
    A run that fails before writing anything (a typo in an option, a missing input) removes
    the folders it made, so that it leaves none behind; one that wrote its journal keeps them.
    Where the file system has no ``flock`` (``try_flock``), the run goes on unguarded.
    """
    if out.exists() and not out.is_dir():
        raise OutputError(f"{out} is a file; pass a folder for the dataset")
    made = [folder for folder in (out, *out.parents) if not folder.exists()]  # deepest first
    out.mkdir(parents=True, exist_ok=True)
    gone = OutputError(
        f"{out}: another data_io prepare that failed as this one started removed the folder; "
        "run again"
    )
    try:
        fd = os.open(out, os.O_RDONLY)
    except FileNotFoundError:
        raise gone from None
    try:
        if not try_flock(fd):
            raise OutputError(
                f"{out}: another data_io prepare is writing into this folder; wait for it to "
                "finish (or stop it) and run again"
            )
        # The lock is on the folder this run opened: that must still be the one at `out`.
        if not _is_open_folder(out, fd):
            raise gone
        try:
            yield
        except BaseException:
            for folder in made:
                try:
                    folder.rmdir()  # only when empty
                except OSError:
                    break
            raise
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _is_open_folder(path: Path, fd: int) -> bool:
    """Whether ``path`` is the folder open as ``fd`` (not removed, nor made again since)."""
    try:
        here, held = os.stat(path), os.fstat(fd)
    except FileNotFoundError:
        return False
    return (here.st_dev, here.st_ino) == (held.st_dev, held.st_ino)
