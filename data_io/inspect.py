"""``data_io inspect PATH``: validate a data folder, count what it holds, decode a few documents.

Understood folders (told apart by their marker file):

* a ``data_io prepare`` shard folder (``dataset_metadata.json`` written by prepare): every
  listed shard exists with the recorded size and SHA-256, no unlisted or temporary shard lies
  around, no run is half done, every id is below the vocabulary, and the EOS count of each split
  equals its recorded document count;
* its ``train/`` or ``val/``: as a flat shard folder, noting that the prepare folder's own
  check is the whole one; an empty split prepare recorded as empty is no problem;
* any other flat shard folder (``*.npy``, or ``*.bin`` with a declared dtype, formats.md §6):
  token counts and dtype, as ``MemoryMappedDataset`` sees them;
* a tokenized folder (``tokenizer_info.json``, formats.md §3): per task, `data_io sample`'s own
  checks (dtypes, shapes, the row layout, the tokenizer's record of rows and tokens);
* a sampled folder (``metadata.json`` with ``tokenizer_info``, formats.md §4): the pool and every
  epoch's row table, checked by the loader's own reader;
* a packing cache (``data_io pack`` / ``TokenizedRowsDataset``'s ``dataset_prepared_path``, or
  one plan folder of it): what each bin plan covers; it holds no tokens;
* cleaned rows (formats.md §1): a ``.jsonl`` / ``.jsonl.gz`` / ``.parquet`` file, or a folder
  of them: rows and columns per file, every row checked, a few rows shown; files whose rows hold
  a ``text`` field and none of the cleaned fields are prepare's raw text rows, checked as such;
* a run that has not finished (prepare's journal, or a scaled-out plan not yet finalized) and an
  empty folder: said as such, with how to go on.

Decoded rows show their special tokens (BOQ, the condition tags, EOQ, EOA): the layout is part
of what is inspected. Problems are collected, printed, and make the command exit 1; notes are
printed but are no problem.
"""

from __future__ import annotations

import argparse
import fcntl
import functools
import gzip
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from data_io.errors import ConfigError, InputError
from data_io.formats.prefix_config import PrefixConfig
from data_io.formats.provenance import (
    check_interrupted_tokenize,
    damaged_task_advice,
    read_task_origin,
    repair_command,
    untokenized_sources,
)
from data_io.formats.sampled import (
    _sampled_epochs,
    check_epochs_present,
    open_epoch,
    open_tokens,
    read_metadata,
)
from data_io.formats.shards import read_bin_dtype
from data_io.load.packing.row_bins import read_cached_plan
from data_io.prepare.shards import npy_header
from data_io.prepare.state import (
    JOURNAL,
    METADATA_FILE,
    PRODUCER,
    SPLITS,
    STATE_DIR,
    metadata_problem,
)
from data_io.prepare.tokenizers import CHAR_EOS, CHAR_STATE_FILE, state_characters
from data_io.sampling.tasks import load_tokenizer_info, read_task, select_task_folders
from data_io.scale.manifest import MANIFEST, SCALE_DIR
from data_io.stage import FINALIZED
from data_io.tokenizer.files import resolve_tokenizer
from data_io.util.args import non_negative_int
from data_io.util.console import summary_console

__all__ = ["InspectReport", "inspect_path", "register"]

_PREVIEW_CHARS = 200
_PREVIEW_TAIL = 70  # characters kept from a long text's end (where EOQ / EOA are)
_ROW_FIELDS = ("condition", "instruction", "response")
_TEXT_FIELD = "text"  # prepare's default --text-field: rows with it alone are raw text
_ROW_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet")
_PROBLEMS_PER_FILE = 5  # bad rows named per file (the rest are counted)
_SHARD_ROWS = 20  # shards listed in a flat folder's table
_PLAN_FILES = ("bin_rows.npy", "bin_offsets.npy", "plan.json")
_BLOCK = 1 << 22  # tokens read at a time when scanning a shard
_FLAT_PREVIEW_TOKENS = 1 << 16  # head of a flat folder's first shard, cut into documents


@dataclass
class InspectReport:
    path: str
    kind: str
    facts: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    samples: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Problems found but not listed (a rows file names its first few; a note counts the rest).
    unlisted_problems: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def problem_count(self) -> int:
        return len(self.problems) + self.unlisted_problems


def inspect_path(
    path: str | Path, *, documents: int = 3, verify: bool = True, tokenizer: str | None = None
) -> InspectReport:
    """Validate the folder (or rows file) at ``path`` and describe it (see the module
    docstring)."""
    if isinstance(documents, bool) or not isinstance(documents, int) or documents < 0:
        raise ConfigError(f"documents must be an integer >= 0, got {documents!r}")
    folder = Path(path)
    if folder.is_file() and _is_rows_file(folder):
        return _inspect_rows(folder, [folder], documents, tokenizer)
    if not folder.is_dir():
        why = "it does not exist" if not folder.exists() else "an unknown kind of file"
        raise InputError(
            f"{folder}: not a folder or a rows file ({why}); pass a prepare, flat shard, "
            f"tokenized, sampled or packing-cache folder, or cleaned rows "
            f"({', '.join(_ROW_SUFFIXES)} files or a folder of them)"
        )
    if _is_prepared(folder):
        malformed = metadata_problem(
            json.loads((folder / METADATA_FILE).read_text(encoding="utf-8"))
        )
        if malformed is not None:  # a key the checks below read, missing or of the wrong type
            report = InspectReport(str(folder), "prepare shard folder (malformed metadata)")
            report.problems.append(
                f"{folder / METADATA_FILE}: {malformed}; the file was damaged or edited after "
                "prepare wrote it: restore it from a copy, or re-prepare into a new folder"
            )
            return report
        return _inspect_prepared(folder, documents, verify)
    if folder.name in SPLITS and _is_prepared(folder.parent):
        return _inspect_split(folder, documents, tokenizer)
    unreadable = _unreadable_metadata(folder)
    if unreadable is not None:
        report = InspectReport(str(folder), "prepare shard folder (unreadable metadata)")
        report.problems.append(unreadable)
        return report
    if (folder / "tokenizer_info.json").is_file():
        return _inspect_tokenized(folder, documents, tokenizer)
    if (folder / "metadata.json").is_file() and (folder / "tokens.npy").is_file():
        return _inspect_sampled(folder, documents, tokenizer)
    if (folder / "plan.json").is_file() and (folder / "bin_rows.npy").is_file():
        return _inspect_plan(folder)
    if _plan_folders(folder):
        return _inspect_plan_cache(folder)
    if not _shard_files(folder):
        unfinished = _inspect_unfinished(folder)
        if unfinished is not None:
            return unfinished
        rows = _rows_files(folder)
        if rows:
            return _inspect_rows(folder, rows, documents, tokenizer)
    return _inspect_flat(folder, documents, tokenizer)


# -- runs that have not finished ----------------------------------------------------------------
def _inspect_unfinished(folder: Path) -> InspectReport | None:
    """A folder a run is still writing, or one a run left when it was stopped: what it is and
    how to go on, rather than "no shard here" (its shards are still under temporary names)."""
    journal = folder / STATE_DIR / JOURNAL
    if journal.is_file():
        report = InspectReport(str(folder), "unfinished data_io prepare run")
        try:
            run = json.loads(journal.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            run = {}
        if isinstance(run, dict):
            report.facts = {k: run[k] for k in ("run", "pid") if k in run}
            if isinstance(run.get("started"), int | float):
                report.facts["started"] = time.strftime(
                    "%Y-%m-%d %H:%M:%S", time.localtime(run["started"])
                )
        partial = sorted(p.name for split in SPLITS for p in (folder / split).glob(".*.tmp"))
        report.facts["temporary shards"] = len(partial)
        if _is_locked(folder):
            report.problems.append(
                f"{folder}: a data_io prepare is writing into this folder now (its first run "
                f"has not finished, so no {METADATA_FILE} yet); inspect it when the run ends"
            )
        else:
            report.problems.append(
                f"{folder}: a data_io prepare run was stopped before it finished ({journal} "
                f"is there and no {METADATA_FILE}): run the same data_io prepare command "
                "again (it removes what the stopped run left and starts over), or delete the "
                "folder"
            )
        return report
    manifest = folder / SCALE_DIR / MANIFEST
    # A finalized run keeps its plan beside `finalized.json`: its output is what is inspected.
    if manifest.is_file() and not (folder / SCALE_DIR / FINALIZED).exists():
        try:
            stage = json.loads(manifest.read_text(encoding="utf-8")).get("stage", "?")
        except (OSError, ValueError, AttributeError):
            stage = "?"
        report = InspectReport(str(folder), f"unfinished scaled-out {stage} run")
        report.problems.append(
            f"{folder}: a scaled-out data_io {stage} run has not been finalized (its plan "
            f"{manifest} is there, its outputs are not): `data_io status {folder}` shows its "
            f"units, `data_io resume {folder}` runs the rest and finalizes"
        )
        return report
    if not any(folder.iterdir()):
        report = InspectReport(str(folder), "empty folder")
        report.problems.append(
            f"{folder}: the folder is empty; pass a prepare, flat shard, tokenized, sampled or "
            f"packing-cache folder, or cleaned rows ({', '.join(_ROW_SUFFIXES)} files or a "
            "folder of them)"
        )
        return report
    return None


def _is_locked(folder: Path) -> bool:
    """Whether a live ``data_io prepare`` holds the folder's lock (``state.exclusive``)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases the shared lock taken to probe
    return False


def _is_prepared(folder: Path) -> bool:
    try:
        meta = json.loads((folder / METADATA_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("producer") == PRODUCER


def _unreadable_metadata(folder: Path) -> str | None:
    """The problem with a ``dataset_metadata.json`` that exists but cannot be read as JSON."""

    path = folder / METADATA_FILE
    if not path.is_file():
        return None
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        return f"{path}: unreadable ({err}); restore it or re-prepare into a new folder"
    return None


# -- prepare's shard folders --------------------------------------------------------------------
def _inspect_prepared(folder: Path, documents: int, verify: bool) -> InspectReport:
    meta = json.loads((folder / METADATA_FILE).read_text(encoding="utf-8"))
    report = InspectReport(str(folder), "prepare shard folder")
    dtype = np.dtype(meta["dtype"])
    fmt = meta["shard_format"]
    eos, vocab = int(meta["eos_id"]), int(meta["vocab_size"])
    report.facts = {
        "dtype": dtype.name,
        "format": fmt,
        "vocab_size": vocab,
        "eos_id": eos,
        "tokenizer": meta["tokenizer"].get("spec"),
        "tokens_per_shard": meta.get("tokens_per_shard"),
        "inputs": len(meta["inputs"]),
        "runs": len(meta["runs"]),
    }
    if (folder / STATE_DIR / "journal.json").is_file():
        report.problems.append(
            f"{folder}: a run was interrupted (.prepare/journal.json); the metadata and the "
            "listed shards are the last finished run's, and the next `data_io prepare` into "
            "this folder rolls the rest back (re-run the same command to redo the run)"
        )
    rows = []
    exclusive = _eos_only_between_documents(folder, meta)
    broken: set[Path] = set()
    for split in SPLITS:
        recorded = meta["splits"][split]
        found_docs, missed = _check_split(
            folder / split, recorded, dtype, fmt, eos, vocab, verify, report
        )
        broken |= missed
        # With a shard missing or of the wrong size (a problem already reported) its EOS tokens
        # were not counted: fewer than the documents only repeats that problem, but more than
        # them (where text cannot hold the EOS) is one of its own.
        recorded_docs = recorded["documents"]
        if (found_docs < recorded_docs and not missed) or (
            exclusive and found_docs > recorded_docs
        ):
            report.problems.append(
                f"{folder / split}: {found_docs} EOS tokens in the shards, the metadata records "
                f"{recorded_docs} documents (each ends with one); the shards were "
                "changed: re-prepare into a new folder"
            )
        elif found_docs > recorded_docs and not missed:
            report.facts[f"{split}_eos_inside_text"] = found_docs - recorded_docs
        rows.append(
            {
                "split": split,
                "shards": len(recorded["shards"]),
                "tokens": recorded["tokens"],
                "documents": recorded["documents"],
            }
        )
    report.tables["splits"] = rows
    train = meta["splits"]["train"]["shards"]
    # Documents are decoded from the first train shard; one missing or cut short (reported
    # above) fails the memory map, which is not the tokenizer's fault.
    if documents and train and folder / "train" / train[0]["name"] not in broken:
        try:
            report.samples = _prepared_samples(folder, meta, documents)
        except Exception as err:  # tokenizers raises a bare Exception for a missing file
            report.problems.append(
                f"{folder}: cannot decode documents with the saved tokenizer ({err}); restore "
                "tokenizer.json / tokenizer_state.json beside the shards"
            )
    return report


def _inspect_split(folder: Path, documents: int, tokenizer: str | None) -> InspectReport:
    """``train/`` or ``val/`` of a prepare folder: its shards as a flat folder (what a loader
    pointed at it reads), and where the whole check is; an empty split that prepare recorded
    as empty (``val_fraction`` 0) is no problem."""
    parent, split = folder.parent, folder.name
    whole = (
        f"`data_io inspect {parent}` checks the shards against its {METADATA_FILE} (sizes, "
        "SHA-256, one EOS per document) and decodes documents with the saved tokenizer"
    )
    if _shard_files(folder):
        report = _inspect_flat(folder, documents, tokenizer)
        report.kind = f"{split} split of a prepare shard folder"
        report.notes.append(
            f"{folder} is the {split} split of the data_io prepare folder {parent}, inspected "
            f"here as flat shards; {whole}"
        )
        return report
    report = InspectReport(str(folder), f"{split} split of a prepare shard folder")
    meta = json.loads((parent / METADATA_FILE).read_text(encoding="utf-8"))
    if metadata_problem(meta) is not None:
        report.problems.append(
            f"{folder}: no shard here, and {parent / METADATA_FILE} is malformed; "
            f"`data_io inspect {parent}` says what is wrong with it"
        )
        return report
    listed = len(meta["splits"][split]["shards"])
    if listed:
        report.problems.append(
            f"{folder}: no shard here, and {parent / METADATA_FILE} lists {listed} for the "
            f"{split} split: they were moved or deleted; restore them or re-prepare into a new "
            f"folder. {whole}"
        )
        return report
    report.facts = {"shards": 0, "tokens": 0}
    report.notes.append(
        f"{folder}: data_io prepare wrote no {split} shard (its {METADATA_FILE} records none"
        + (
            ", val_fraction 0"
            if split == "val" and not meta.get("options", {}).get("val_fraction")
            else ""
        )
        + f"); {whole}"
    )
    return report


def _check_split(
    folder: Path,
    recorded: dict[str, Any],
    dtype: np.dtype,
    fmt: str,
    eos: int,
    vocab: int,
    verify: bool,
    report: InspectReport,
) -> tuple[int, set[Path]]:
    """Check one split's shards against the metadata; returns the EOS count found, and the
    shards the metadata lists that were missing or not of their recorded size (whose EOS
    tokens the count leaves out)."""

    names = {s["name"] for s in recorded["shards"]}
    if folder.is_dir():
        for path in sorted(folder.iterdir()):
            if path.name not in names:
                if path.name.startswith("."):
                    advice = (
                        "a temporary file of an unfinished run; the next `data_io prepare` into "
                        "this folder removes it"
                    )
                else:
                    advice = (
                        "a file the metadata does not list (prepare did not write it, and a "
                        "loader reading the folder would take it for a shard); move it out"
                    )
                report.problems.append(f"{path}: {advice}")
    eos_count = 0
    missed: set[Path] = set()
    for shard in recorded["shards"]:
        path = folder / shard["name"]
        header = len(npy_header(dtype, 0)) if fmt == "npy" else 0
        expected = header + shard["tokens"] * dtype.itemsize
        if not path.is_file():
            report.problems.append(f"{path}: missing; the metadata lists it")
            missed.add(path)
            continue
        if path.stat().st_size != expected:
            report.problems.append(
                f"{path}: {path.stat().st_size} bytes, expected {expected} ({shard['tokens']} "
                f"{dtype.name} tokens); the shard is truncated or was replaced"
            )
            missed.add(path)
            continue
        tokens = np.memmap(path, dtype=dtype, mode="r", offset=header, shape=(shard["tokens"],))
        digest = hashlib.sha256()
        for start in range(0, len(tokens), _BLOCK):
            block = np.asarray(tokens[start : start + _BLOCK])
            eos_count += int(np.count_nonzero(block == eos))
            if len(block) and int(block.max()) >= vocab:
                report.problems.append(
                    f"{path}: token id {int(block.max())} is not below the vocabulary size {vocab}"
                )
            if verify:
                digest.update(block.tobytes())
        if verify and digest.hexdigest() != shard["sha256"]:
            report.problems.append(
                f"{path}: content differs from the recorded sha256; the shard was changed"
            )
    return eos_count, missed


def _eos_only_between_documents(folder: Path, meta: dict[str, Any]) -> bool:
    """Whether the EOS id can only come from prepare (so the EOS count is the document count).

    prepare encodes special tokens inside text as plain text, so a special added token (and the
    char tokenizer's EOS) never comes out of a document; an ordinary vocabulary token named with
    ``--eos-token`` (say ".") does, and then the count is only a lower bound.
    """
    if meta["tokenizer"]["kind"] == "char":
        return True
    try:
        spec = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
        added = spec.get("added_tokens") or []
    except (OSError, ValueError, AttributeError):
        return False  # the tokenizer problem is reported on its own
    eos = int(meta["eos_id"])
    return any(t.get("id") == eos and t.get("special") for t in added if isinstance(t, dict))


def _decoder(folder: Path, meta: dict[str, Any]) -> Any:
    """A ``decode(ids) -> str`` for the tokenizer saved beside the shards."""

    if meta["tokenizer"]["kind"] == "char":
        state = json.loads((folder / CHAR_STATE_FILE).read_text(encoding="utf-8"))
        chars = state_characters(state["chars"])
        return lambda ids: "".join(CHAR_EOS if i == 0 else chars[i - 1] for i in ids)
    from tokenizers import Tokenizer  # noqa: PLC0415  heavy: tokenizers, only to decode with the HF library

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    return lambda ids: tokenizer.decode(ids, skip_special_tokens=False)


def _prepared_samples(folder: Path, meta: dict[str, Any], count: int) -> list[str]:
    dtype, eos = np.dtype(meta["dtype"]), int(meta["eos_id"])
    header = 128 if meta["shard_format"] == "npy" else 0
    first = folder / "train" / meta["splits"]["train"]["shards"][0]["name"]
    size = meta["splits"]["train"]["shards"][0]["tokens"]
    tokens = np.memmap(first, dtype=dtype, mode="r", offset=header, shape=(size,))
    ends = np.flatnonzero(np.asarray(tokens[: min(size, 1 << 20)]) == eos)[:count]
    decode = _decoder(folder, meta)
    samples, start = [], 0
    for end in ends:
        samples.append(_preview(decode(np.asarray(tokens[start:end]).tolist())))
        start = int(end) + 1
    return samples


def _preview(text: str) -> str:
    """``text``, or its head and tail when long: a row's end (EOQ, EOA) stays in view."""
    if len(text) <= _PREVIEW_CHARS:
        return text
    return text[: _PREVIEW_CHARS - _PREVIEW_TAIL] + " … " + text[-_PREVIEW_TAIL:]


# -- other layouts ------------------------------------------------------------------------------
def _shard_files(folder: Path) -> list[Path]:
    """The flat shards of ``folder``: its ``*.npy`` files, else its ``*.bin`` files."""
    for pattern in ("*.npy", "*.bin"):
        files = sorted(p for p in folder.glob(pattern) if p.is_file())
        if files:
            return files
    return []


def _inspect_flat(folder: Path, documents: int, tokenizer: str | None) -> InspectReport:
    from data_io.load.datasets.shards import _inspect_bin, _inspect_npy  # noqa: PLC0415  torch: only for a shard folder

    report = InspectReport(str(folder), "flat shard folder")
    files = _shard_files(folder)
    if not files:
        report.kind = "unknown folder"
        report.problems.append(
            f"{folder}: no .npy or .bin shard here, and nothing else `data_io inspect` knows: "
            "pass a prepare, flat shard, tokenized, sampled or packing-cache folder, or cleaned "
            f"rows ({', '.join(_ROW_SUFFIXES)} files or a folder of them)"
        )
        return report
    shards = []
    try:
        bin_dtype = read_bin_dtype(folder, files[0])[0] if files[0].suffix == ".bin" else None
    except InputError as err:
        report.problems.append(str(err))
        return report
    for path in files:  # each shard checked on its own: one bad shard hides no other
        try:
            shards.append(
                _inspect_npy(path) if bin_dtype is None else _inspect_bin(path, bin_dtype)
            )
        except InputError as err:
            report.problems.append(str(err))
    if not shards:
        return report
    dtypes: dict[str, list[str]] = {}
    for shard in shards:
        dtypes.setdefault(shard.dtype.name, []).append(shard.path.name)
    report.facts = {
        "pattern": f"*{files[0].suffix}",
        "dtype": shards[0].dtype.name if len(dtypes) == 1 else "mixed",
        "shards": len(shards),
        "tokens": sum(s.tokens for s in shards),
    }
    if len(dtypes) > 1:
        report.facts["dtypes"] = ", ".join(
            f"{name}: {len(names)} shard(s) ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
            for name, names in sorted(dtypes.items())
        )
        report.notes.append(
            f"{folder}: the shards hold token ids of {len(dtypes)} dtypes "
            f"({', '.join(sorted(dtypes))}); a loader reads each shard in its own dtype, but one "
            "producer writes one dtype: check that the shards come from the same tokenizer"
        )
    report.tables["shards"] = [
        {"shard": s.path.name, "dtype": s.dtype.name, "tokens": s.tokens}
        for s in shards[:_SHARD_ROWS]
    ]
    if len(shards) > _SHARD_ROWS:
        report.notes.append(f"the shards table lists the first {_SHARD_ROWS} of {len(shards)}")
    if tokenizer and documents:
        first = shards[0]
        head = np.memmap(
            first.path,
            dtype=first.dtype,
            mode="r",
            offset=first.offset,
            shape=(min(first.tokens, _FLAT_PREVIEW_TOKENS),),
        )
        report.samples = [
            _preview(_hf_decode(tokenizer, doc.tolist()))
            for doc in _documents_of(np.asarray(head), _declared_eos(folder), documents)
        ]
    return report


def _declared_eos(folder: Path) -> int | None:
    """The EOS id a flat folder's ``dataset_metadata.json`` declares (MyPT writes one), if any."""
    try:
        meta = json.loads((folder / "dataset_metadata.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for key in ("eos_id", "eos_token_id"):
        value = meta.get(key) if isinstance(meta, dict) else None
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _documents_of(tokens: np.ndarray, eos: int | None, count: int) -> list[np.ndarray]:
    """The first ``count`` documents of a token stream cut at ``eos``; with no EOS known, the
    head of the stream as one piece."""
    if eos is None:
        return [tokens]
    pieces, start = [], 0
    for end in np.flatnonzero(tokens == eos)[:count]:
        pieces.append(tokens[start:end])
        start = int(end) + 1
    return pieces or [tokens]


@functools.lru_cache(maxsize=4)
def _load_tokenizer(tokenizer: str) -> Any:
    from tokenizers import Tokenizer  # noqa: PLC0415  heavy: tokenizers, only to decode with the HF library

    return Tokenizer.from_file(str(resolve_tokenizer(tokenizer)))


def _hf_decode(tokenizer: str, ids: list[int]) -> str:
    """``ids`` as text, special tokens included (BOQ, tags, EOQ, EOA: the layout shows)."""
    return str(_load_tokenizer(tokenizer).decode(ids, skip_special_tokens=False))


def _inspect_tokenized(folder: Path, documents: int, tokenizer: str | None) -> InspectReport:
    report = InspectReport(str(folder), "tokenized folder")
    try:
        info = load_tokenizer_info(folder)
    except InputError as err:  # not JSON, not an object, a bad vocab_size
        report.problems.append(f"{err}; re-run data_io tokenize into a new folder")
        return report
    vocab = info.get("vocab_size")
    report.facts = {"tokenizer": info.get("tokenizer_path"), "vocab_size": vocab}
    rows_table = []
    first_task: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    # What tokenize and sample take for task folders: the others are named, not read.
    selection = select_task_folders(folder)
    if (skipped := selection.skipped_note()) is not None:
        report.notes.append(skipped)
    for suspect, why in selection.suspect:
        report.problems.append(
            f"{suspect}: task arrays, but {why}: `data_io tokenize` will not replace this "
            f"folder and `data_io sample` refuses it; move it out of {folder} (or delete it if "
            "it is a damaged task), then re-run the tokenize command"
        )
    suspects = {path for path, _ in selection.suspect}
    for task in (path for path in selection.folders if path not in suspects):
        try:  # sample's own checks: dtypes, shapes, the row layout, the tokenizer's record
            read_task(task, PrefixConfig(), read_task_origin(task))
        except InputError as err:
            report.problems.append(
                f"{err}. {damaged_task_advice(task, repair_command(folder, info))}"
            )
            continue
        try:
            arrays = {
                n: np.load(task / f"{n}.npy", mmap_mode="r")
                for n in ("tokens", "inst_start", "inst_len", "resp_start", "resp_len")
            }
        except (OSError, ValueError, EOFError) as err:  # EOFError: an empty file
            report.problems.append(f"{task}: unreadable arrays ({err}); re-run data_io tokenize")
            continue
        rows = {len(arrays[n]) for n in ("inst_start", "inst_len", "resp_start", "resp_len")}
        tokens = arrays["tokens"]
        if len(rows) != 1:
            report.problems.append(f"{task}: the four index arrays differ in length")
            continue
        ends = np.asarray(arrays["resp_start"]) + np.asarray(arrays["resp_len"])
        if len(ends) and int(ends.max()) > len(tokens):
            report.problems.append(f"{task}: a row ends past tokens.npy ({len(tokens)} tokens)")
        if vocab and len(tokens) and int(np.max(tokens)) >= vocab:
            report.problems.append(f"{task}: a token id is not below vocab_size {vocab}")
        rows_table.append({"task": task.name, "rows": rows.pop(), "tokens": len(tokens)})
        if first_task is None:
            first_task = (
                tokens,
                np.asarray(arrays["inst_start"]),
                np.asarray(arrays["resp_start"]),
                ends,
            )
    report.tables["tasks"] = rows_table
    report.facts["tasks"] = len(rows_table)
    # What sample says of an interrupted or unfinished tokenize run, said here too.
    origins = [read_task_origin(task) for task in selection.folders if task not in suspects]
    try:
        report.notes += check_interrupted_tokenize(folder, info, origins)
    except InputError as err:  # tasks lost mid-replacement: sample refuses the folder
        report.problems.append(str(err))
    report.notes += untokenized_sources(folder, info, origins, sampling=False)
    path = tokenizer or info.get("tokenizer_path")
    if documents and first_task is not None and path and (tokenizer or Path(path).exists()):
        tokens, starts, middles, ends = first_task
        for start, middle, end in list(zip(starts, middles, ends, strict=True))[:documents]:
            report.samples.append(_row_sample(path, tokens, int(start), int(middle), int(end)))
    elif documents and first_task is not None:
        report.notes.append(f"rows not decoded: {_no_tokenizer(path)}; pass --tokenizer PATH")
    return report


def _row_sample(tokenizer: str, tokens: np.ndarray, start: int, middle: int, end: int) -> str:
    """One row of the tokenized layout decoded: its instruction (BOQ, tags, text, EOQ) and its
    response (text, EOA), each cut to its head and tail, so that every special token shows."""
    half = _PREVIEW_CHARS // 2
    parts = []
    for lo, hi in ((start, middle), (middle, end)):
        text = _hf_decode(tokenizer, np.asarray(tokens[lo:hi]).tolist())
        parts.append(text if len(text) <= half else f"{text[: half - 40]} … {text[-40:]}")
    return "".join(parts)


def _inspect_sampled(folder: Path, documents: int, tokenizer: str | None) -> InspectReport:
    report = InspectReport(str(folder), "sampled folder")
    try:
        meta = read_metadata(folder)
        tokens = open_tokens(folder, meta)
        check_epochs_present(folder, meta)  # as the loader does: an epoch lost is a problem
        epochs = []
        for epoch in _sampled_epochs(folder):
            index = open_epoch(folder, epoch, len(tokens), meta)
            epochs.append({"epoch": epoch, "rows": index.rows})
    except InputError as err:
        report.problems.append(str(err))
        return report
    report.facts = {
        "tokens": len(tokens),
        "dtype": tokens.dtype.name,
        "max_seq_len": meta.max_seq_len,
        "vocab_size": meta.vocab_size,
        "epochs": len(epochs),
    }
    report.tables["epochs"] = epochs
    path = tokenizer or meta.tokenizer_info.get("tokenizer_path")
    # --tokenizer is used as given (a Hub id too; a wrong one is an error naming it), the
    # folder's recorded tokenizer only where it still is.
    if documents and epochs and path and (tokenizer or Path(path).exists()):
        index = open_epoch(folder, epochs[0]["epoch"], len(tokens), meta, check=False)
        for row in range(min(documents, index.rows)):
            start, middle = int(index.inst_start[row]), int(index.resp_start[row])
            end = middle + int(index.resp_len[row])
            report.samples.append(_row_sample(path, tokens, start, middle, end))
    elif documents and epochs:
        report.notes.append(f"rows not decoded: {_no_tokenizer(path)}; pass --tokenizer PATH")
    return report


# -- packing caches ----------------------------------------------------------------------------
def _plan_folders(folder: Path) -> list[Path]:
    """The bin-plan folders of a packing cache (``<dataset_prepared_path>/<digest>/``), when
    every visible sub-folder of ``folder`` is one and no shard lies beside them."""
    try:
        subfolders = [p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")]
    except OSError:
        return []
    if not subfolders or _shard_files(folder):
        return []
    if all((p / "plan.json").is_file() for p in subfolders):
        return sorted(subfolders)
    return []


def _no_tokenizer(path: str | None) -> str:
    """Why rows were not decoded: the recorded tokenizer is not here, or none is recorded."""
    return "no tokenizer is recorded" if not path else f"the tokenizer {path} is not here"


def _read_plan(folder: Path) -> tuple[dict[str, Any], list[str]]:
    """What one bin plan covers (facts), and its problems: the loader's own check of a cached
    plan (``read_cached_plan``), over the rows the plan lists (the sources' row count is not
    known here)."""
    try:
        listed = len(np.load(folder / "bin_rows.npy", mmap_mode="r", allow_pickle=False))
        plan, meta = read_cached_plan(folder, listed)
    except InputError as err:  # (a ValueError too: caught first) the loader's own refusal
        return {}, [f"{err} by the next `data_io pack` or loader start"]
    except (OSError, ValueError, EOFError) as err:
        return {}, [f"{folder}: unreadable bin arrays ({err}); delete {folder}, the next "
                    "`data_io pack` or loader start writes it again"]  # fmt: skip
    facts = {
        "bins": len(plan),
        "rows": int(plan.rows.shape[0]),
        "tokens": meta.get("tokens"),
        "longest row": meta.get("longest"),
        "sources": ", ".join(
            str(s.get("path") or s.get("name")) for s in meta["sources"] if isinstance(s, dict)
        ),
    }
    return facts, []


_PLAN_NOTE = (
    "a packing cache holds bin plans (which rows go into which packed item), not tokens: "
    "inspect the rows its sources name to see the data"
)


def _inspect_plan(folder: Path) -> InspectReport:
    report = InspectReport(str(folder), "packing plan (one entry of a `data_io pack` cache)")
    facts, problems = _read_plan(folder)
    report.facts = facts
    report.problems += problems
    report.notes.append(_PLAN_NOTE)
    return report


def _inspect_plan_cache(folder: Path) -> InspectReport:
    report = InspectReport(
        str(folder), "packing cache (dataset_prepared_path of `data_io pack` / the rows loader)"
    )
    plans = []
    for plan in _plan_folders(folder):
        facts, problems = _read_plan(plan)
        report.problems += problems
        plans.append({"plan": plan.name, **{k: facts.get(k) for k in ("bins", "rows", "tokens")},
                      "sources": facts.get("sources", "")})  # fmt: skip
    report.tables["plans"] = plans
    report.facts = {"plans": len(plans)}
    leftovers = sorted(p.name for p in folder.iterdir() if p.name.startswith("."))
    if leftovers:
        report.notes.append(
            f"{len(leftovers)} hidden entr{'ies' if len(leftovers) > 1 else 'y'} "
            f"({', '.join(leftovers[:3])}): temporaries of a plan being written, or of one "
            "killed while writing"
        )
    report.notes.append(_PLAN_NOTE)
    return report


# -- cleaned rows --------------------------------------------------------------------------------
def _is_rows_file(path: Path) -> bool:
    return path.name.lower().endswith(_ROW_SUFFIXES)


def _rows_files(folder: Path) -> list[Path]:
    """The rows files under ``folder`` (recursively, as tokenize walks it), hidden ones aside."""
    found = []
    for path in sorted(folder.rglob("*")):
        hidden = any(part.startswith(".") for part in path.relative_to(folder).parts)
        if not hidden and path.is_file() and _is_rows_file(path):
            found.append(path)
    return found


class _RowsScan:
    """What one file's rows hold: count, columns, problems (the first few named), examples."""

    def __init__(self, path: Path, wanted: int) -> None:
        self.path = path
        self.kind = "rows"  # or "text": prepare's raw text rows (a text field, no row fields)
        self.decided = False  # whether an object row has set the kind yet
        self.rows = 0
        self.columns: dict[str, str] = {}
        self.problems: list[str] = []
        self.bad = 0
        self.examples: list[dict[str, Any]] = []
        self.wanted = wanted

    def problem(self, text: str) -> None:
        self.bad += 1
        if len(self.problems) < _PROBLEMS_PER_FILE:
            self.problems.append(text)

    @property
    def unlisted(self) -> int:
        return self.bad - len(self.problems)

    def unlisted_note(self) -> str | None:
        if self.unlisted <= 0:
            return None
        return (
            f"{self.path}: {self.unlisted} more problem(s) of the same kinds, not listed (the "
            f"first {len(self.problems)} are)"
        )


def _scan_jsonl(path: Path, wanted: int) -> _RowsScan:
    scan = _RowsScan(path, wanted)
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    number = 0  # the last line read whole: where a damaged file stops being readable
    try:
        with opener(path, "rb") as f:
            for number, raw in enumerate(f, start=1):
                if not raw.strip():
                    continue
                scan.rows += 1
                try:
                    row = json.loads(raw)
                except ValueError as err:
                    scan.problem(f"{path}: line {number} is not JSON ({err}); fix or drop it")
                    continue
                if not isinstance(row, dict):
                    scan.problem(
                        f"{path}: line {number} holds a JSON {type(row).__name__}, not an object "
                        "with condition, instruction and response; fix or drop it"
                    )
                    continue
                for key, value in row.items():
                    scan.columns.setdefault(key, type(value).__name__)
                if not scan.decided:  # the file's first object says which kind it holds
                    scan.decided = True
                    if _is_text_row(row.keys()):
                        scan.kind = "text"
                wrong = [k for k in _ROW_FIELDS if not isinstance(row.get(k), str)]
                if scan.kind == "text":
                    if not isinstance(row.get(_TEXT_FIELD), str):
                        scan.problem(
                            f"{path}: line {number}: no string {_TEXT_FIELD!r} field (the file's "
                            f"first row has one); prepare fails on it: fix or drop the row"
                        )
                    elif len(scan.examples) < wanted:
                        scan.examples.append(row)
                elif wrong and not {"input_ids", "labels"} <= row.keys():
                    scan.problem(
                        f"{path}: line {number}: {', '.join(wrong)} missing or not a string; "
                        "every cleaned row has string condition, instruction and response "
                        "(formats.md §1): fix the cleaner that wrote it"
                    )
                elif len(scan.examples) < wanted:
                    scan.examples.append(row)
    except (OSError, EOFError) as err:
        where = f"after line {number}" if number else "from its start"
        scan.problem(
            f"{path}: unreadable {where} ({err}); the file is damaged or not {path.suffix}: "
            "restore or rewrite it"
        )
    return scan


def _scan_parquet(path: Path, wanted: int) -> _RowsScan:
    import pyarrow as pa  # noqa: PLC0415  heavy: pyarrow, only for Parquet/Arrow data
    import pyarrow.parquet as pq  # noqa: PLC0415  heavy: pyarrow, only for Parquet/Arrow data

    scan = _RowsScan(path, wanted)
    try:
        parquet = pq.ParquetFile(path)
    except Exception as err:  # pyarrow's errors for empty, truncated or foreign files vary
        scan.problem(f"{path}: not a readable Parquet file ({err}); rewrite it")
        return scan
    schema = parquet.schema_arrow
    scan.rows = parquet.metadata.num_rows
    scan.columns = {field.name: str(field.type) for field in schema}
    text_types = (pa.string(), pa.large_string())
    tokenized = {"input_ids", "labels"} <= scan.columns.keys()
    present = [name for name in _ROW_FIELDS if name in scan.columns]
    if _is_text_row(scan.columns.keys()):
        scan.kind = "text"
        present = [_TEXT_FIELD]
    if not tokenized:
        missing = [name for name in _ROW_FIELDS if name not in scan.columns]
        if missing and scan.kind == "rows":
            scan.problem(
                f"{path}: no column {', '.join(missing)}; cleaned rows have the string columns "
                "condition, instruction and response (formats.md §1)"
            )
        for name in present:
            kind = schema.field(name).type
            if kind not in text_types and str(kind) != "string_view":
                scan.problem(
                    f"{path}: column {name} is {kind}, not a string column (formats.md §1); "
                    "rewrite it as string"
                )
    try:
        for batch in parquet.iter_batches(batch_size=65536):
            if not tokenized:
                for name in present:
                    nulls = batch.column(name).null_count
                    if nulls and scan.kind == "text":
                        scan.problem(f"{path}: {nulls} null {name} value(s); prepare fails on "
                                     "a null text: drop those rows")  # fmt: skip
                    elif nulls:
                        scan.problem(f"{path}: {nulls} null {name} value(s); every row needs "
                                     "all three fields (formats.md §1)")  # fmt: skip
            if len(scan.examples) < wanted:
                scan.examples += batch.slice(0, wanted - len(scan.examples)).to_pylist()
    except Exception as err:  # a damaged page: pyarrow raises OSError or ArrowInvalid
        scan.problem(f"{path}: unreadable data ({err}); the file is damaged, rewrite it")
    return scan


def _is_text_row(fields: Any) -> bool:
    """Whether a row (or a Parquet schema) is prepare's raw text: a text field (whatever its
    first value) and none of the cleaned rows' fields nor tokenized rows' ids."""
    fields = set(fields)
    return (
        _TEXT_FIELD in fields
        and not fields & set(_ROW_FIELDS)
        and not {"input_ids", "labels"} <= fields
    )


def _show_row(row: dict[str, Any], tokenizer: str | None) -> str:
    if _TEXT_FIELD in row and not any(k in row for k in _ROW_FIELDS):
        text = row[_TEXT_FIELD]
        return _preview(text) if isinstance(text, str) else f"(no text: {text!r})"
    if "input_ids" in row and not isinstance(row.get("instruction"), str):
        if not tokenizer:
            return _preview(f"{len(row['input_ids'])} token ids (pass --tokenizer to decode)")
        return _preview(_hf_decode(tokenizer, [int(i) for i in row["input_ids"]]))
    condition = row.get("condition")
    return _preview(
        f"[{condition}] {row.get('instruction')!s} → {row.get('response')!s}"
        if condition
        else f"{row.get('instruction')!s} → {row.get('response')!s}"
    )


def _inspect_rows(
    where: Path, files: list[Path], documents: int, tokenizer: str | None
) -> InspectReport:
    scans = [
        _scan_parquet(path, documents)
        if path.name.lower().endswith(".parquet")
        else _scan_jsonl(path, documents)
        for path in files
    ]
    columns: dict[str, str] = {}
    for scan in scans:
        for name, kind in scan.columns.items():
            columns.setdefault(name, kind)
    tokenized = {"input_ids", "labels"} <= columns.keys()
    text = [scan for scan in scans if scan.kind == "text"]
    kind = "tokenized rows" if tokenized else "cleaned rows"
    if text and len(text) == len(scans):
        kind = f"raw text rows (prepare's input, field {_TEXT_FIELD!r})"
    report = InspectReport(str(where), kind)
    report.facts = {
        "files": len(scans),
        "rows": sum(scan.rows for scan in scans),
        "columns": ", ".join(f"{name} ({kind})" for name, kind in columns.items()),
    }
    base = where if where.is_dir() else where.parent
    report.tables["files"] = [
        {"file": str(scan.path.relative_to(base)), "rows": scan.rows, "problems": scan.bad}
        for scan in scans
    ]
    for scan in scans:
        report.problems += scan.problems
        report.unlisted_problems += max(scan.unlisted, 0)
        report.notes += filter(None, [scan.unlisted_note()])
    if text and len(text) < len(scans):
        report.problems.append(
            f"{where} mixes raw text rows ({', '.join(str(s.path.relative_to(base)) for s in text[:3])}"
            f"{', ...' if len(text) > 3 else ''}) with cleaned rows; prepare reads the first, "
            "tokenize the second: keep them in separate folders"
        )
    extra = sorted(set(columns) - set(_ROW_FIELDS) - {"input_ids", "labels"})
    if text:
        extra = []
    if extra and not tokenized:
        report.notes.append(
            f"column(s) beyond condition, instruction and response: {', '.join(extra)}; the "
            "tokenizer reads only those three"
        )
    examples = [row for scan in scans for row in scan.examples][:documents]
    try:
        report.samples = [_show_row(row, tokenizer) for row in examples]
    except Exception as err:  # tokenizers raises a bare Exception for a bad file
        report.problems.append(f"cannot decode the rows with --tokenizer {tokenizer}: {err}")
    return report


# -- command line -------------------------------------------------------------------------------
def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "inspect",
        help="validate a shard, tokenized, sampled or rows folder; counts, dtype, documents",
        description="Validate PATH (a `data_io prepare` output, a flat shard folder, a "
        "tokenized folder, a sampled folder, a packing cache, or cleaned rows: a .jsonl, "
        ".jsonl.gz or .parquet file or a folder of them), print what it holds and show a few "
        "documents, decoded with their special tokens. Exits 1 when a problem is found.",
    )
    parser.add_argument("path", metavar="PATH", help="the folder or rows file to inspect")
    parser.add_argument(
        "--documents",
        type=non_negative_int,
        default=3,
        help="documents to decode, 0 for none (default: %(default)s)",
    )
    parser.add_argument(
        "--no-verify",
        action="store_true",
        help="skip the SHA-256 check of prepare's shards (default: off: checked)",
    )
    parser.add_argument(
        "--tokenizer",
        default=None,
        help="tokenizer to decode with, when the folder has none (default: the folder's, if any)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the report as JSON (default: off: as text)"
    )
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    report = inspect_path(
        args.path, documents=args.documents, verify=not args.no_verify, tokenizer=args.tokenizer
    )
    if args.json:
        shown = {**asdict(report), "ok": report.ok, "problem_count": report.problem_count}
        print(json.dumps(shown, indent=1, ensure_ascii=False))
    else:
        _print(report)
    return 0 if report.ok else 1


def _print(report: InspectReport) -> None:
    from rich.markup import escape  # noqa: PLC0415  CLI start-up: rich, only when a summary is printed
    from rich.table import Table  # noqa: PLC0415  CLI start-up: rich, only when a summary is printed

    console = summary_console()
    console.print(f"{report.path}: {report.kind}")
    for key, value in report.facts.items():
        console.print(f"  {key}: {escape(str(value))}")
    for title, rows in report.tables.items():
        if not rows:
            continue
        table = Table(title=title, box=None, pad_edge=False)
        for column in rows[0]:
            table.add_column(
                column, justify="left" if isinstance(rows[0][column], str) else "right"
            )
        for row in rows:
            table.add_row(*(f"{v:,}" if isinstance(v, int) else str(v) for v in row.values()))
        console.print(table)
    for i, sample in enumerate(report.samples):
        console.print(f"document {i}: {escape(repr(sample))}")
    for note in report.notes:
        console.print(f"note: {escape(note)}")
    for problem in report.problems:
        console.print(f"[red]problem:[/red] {escape(problem)}")
    console.print("ok" if report.ok else f"{report.problem_count} problem(s)")
