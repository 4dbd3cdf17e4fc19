"""A ``data_io prepare`` folder (``dataset_metadata.json``) and its ``train/`` / ``val/`` splits:
the recorded shards' sizes and SHA-256, the EOS count of each split, a few decoded documents."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from data_io.inspect.flat import BLOCK, inspect_flat, shard_files
from data_io.inspect.report import InspectReport, preview
from data_io.prepare.shards import npy_header
from data_io.prepare.state import (
    METADATA_FILE,
    PRODUCER,
    SPLITS,
    STATE_DIR,
    metadata_problem,
)
from data_io.prepare.tokenizers import CHAR_EOS, CHAR_STATE_FILE, state_characters


def is_prepared(folder: Path) -> bool:
    try:
        meta = json.loads((folder / METADATA_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("producer") == PRODUCER


def unreadable_metadata(folder: Path) -> str | None:
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
def inspect_prepared(folder: Path, documents: int, verify: bool) -> InspectReport:
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


def inspect_split(folder: Path, documents: int, tokenizer: str | None) -> InspectReport:
    """``train/`` or ``val/`` of a prepare folder: its shards as a flat folder (what a loader
    pointed at it reads), and where the whole check is; an empty split that prepare recorded
    as empty (``val_fraction`` 0) is no problem."""
    parent, split = folder.parent, folder.name
    whole = (
        f"`data_io inspect {parent}` checks the shards against its {METADATA_FILE} (sizes, "
        "SHA-256, one EOS per document) and decodes documents with the saved tokenizer"
    )
    if shard_files(folder):
        report = inspect_flat(folder, documents, tokenizer)
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
        for start in range(0, len(tokens), BLOCK):
            block = np.asarray(tokens[start : start + BLOCK])
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
        samples.append(preview(decode(np.asarray(tokens[start:end]).tolist())))
        start = int(end) + 1
    return samples
