"""``data_io inspect PATH``: validate a data folder, count what it holds, decode a few documents.

Understood folders (told apart by their marker file):

* a ``data_io prepare`` shard folder (``dataset_metadata.json`` written by prepare): every
  listed shard exists with the recorded size and SHA-256, no unlisted or temporary shard lies
  around, no run is half done, every id is below the vocabulary, and the EOS count of each split
  equals its recorded document count;
* any other flat shard folder (``*.npy``, or ``*.bin`` with a declared dtype, formats.md §6):
  token counts and dtype, as ``MemoryMappedDataset`` sees them;
* a tokenized folder (``tokenizer_info.json``, formats.md §3): per task, the five arrays agree;
* a sampled folder (``metadata.json`` with ``tokenizer_info``, formats.md §4): the pool and every
  epoch's row table, checked by the loader's own reader.

Problems are collected, printed, and make the command exit 1.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from data_io.errors import InputError

__all__ = ["InspectReport", "inspect_path", "register"]

_PREVIEW_CHARS = 200
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

    @property
    def ok(self) -> bool:
        return not self.problems


def inspect_path(
    path: str | Path, *, documents: int = 3, verify: bool = True, tokenizer: str | None = None
) -> InspectReport:
    """Validate the folder at ``path`` and describe it (see the module docstring)."""
    folder = Path(path)
    if not folder.is_dir():
        raise InputError(f"{folder}: not a folder; pass a shard, tokenized or sampled folder")
    if _is_prepared(folder):
        return _inspect_prepared(folder, documents, verify)
    unreadable = _unreadable_metadata(folder)
    if unreadable is not None:
        report = InspectReport(str(folder), "prepare shard folder (unreadable metadata)")
        report.problems.append(unreadable)
        return report
    if (folder / "tokenizer_info.json").is_file():
        return _inspect_tokenized(folder, documents, tokenizer)
    if (folder / "metadata.json").is_file() and (folder / "tokens.npy").is_file():
        return _inspect_sampled(folder, documents, tokenizer)
    return _inspect_flat(folder, documents, tokenizer)


def _is_prepared(folder: Path) -> bool:
    from data_io.prepare.state import METADATA_FILE, PRODUCER

    try:
        meta = json.loads((folder / METADATA_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("producer") == PRODUCER


def _unreadable_metadata(folder: Path) -> str | None:
    """The problem with a ``dataset_metadata.json`` that exists but cannot be read as JSON."""
    from data_io.prepare.state import METADATA_FILE

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
    from data_io.prepare.state import METADATA_FILE, SPLITS, STATE_DIR

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
        "tokenizer": meta["tokenizer"]["spec"],
        "tokens_per_shard": meta["tokens_per_shard"],
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
    for split in SPLITS:
        recorded = meta["splits"][split]
        found_docs = _check_split(folder / split, recorded, dtype, fmt, eos, vocab, verify, report)
        if found_docs < recorded["documents"] or (exclusive and found_docs > recorded["documents"]):
            report.problems.append(
                f"{folder / split}: {found_docs} EOS tokens in the shards, the metadata records "
                f"{recorded['documents']} documents (each ends with one); the shards were "
                "changed: re-prepare into a new folder"
            )
        elif found_docs > recorded["documents"]:
            report.facts[f"{split}_eos_inside_text"] = found_docs - recorded["documents"]
        rows.append(
            {
                "split": split,
                "shards": len(recorded["shards"]),
                "tokens": recorded["tokens"],
                "documents": recorded["documents"],
            }
        )
    report.tables["splits"] = rows
    if documents and meta["splits"]["train"]["shards"]:
        try:
            report.samples = _prepared_samples(folder, meta, documents)
        except Exception as err:  # tokenizers raises a bare Exception for a missing file
            report.problems.append(
                f"{folder}: cannot decode documents with the saved tokenizer ({err}); restore "
                "tokenizer.json / tokenizer_state.json beside the shards"
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
) -> int:
    """Check one split's shards against the metadata; returns the EOS count found."""
    import hashlib

    from data_io.prepare.shards import npy_header

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
    for shard in recorded["shards"]:
        path = folder / shard["name"]
        header = len(npy_header(dtype, 0)) if fmt == "npy" else 0
        expected = header + shard["tokens"] * dtype.itemsize
        if not path.is_file():
            report.problems.append(f"{path}: missing; the metadata lists it")
            continue
        if path.stat().st_size != expected:
            report.problems.append(
                f"{path}: {path.stat().st_size} bytes, expected {expected} ({shard['tokens']} "
                f"{dtype.name} tokens); the shard is truncated or was replaced"
            )
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
    return eos_count


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
    from data_io.prepare.tokenizers import CHAR_EOS, CHAR_STATE_FILE

    if meta["tokenizer"]["kind"] == "char":
        chars = json.loads((folder / CHAR_STATE_FILE).read_text(encoding="utf-8"))["chars"]
        return lambda ids: "".join(CHAR_EOS if i == 0 else chars[i - 1] for i in ids)
    from tokenizers import Tokenizer

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
    return text if len(text) <= _PREVIEW_CHARS else text[:_PREVIEW_CHARS] + "…"


# -- other layouts ------------------------------------------------------------------------------
def _inspect_flat(folder: Path, documents: int, tokenizer: str | None) -> InspectReport:
    from data_io.load.shards import MemoryMappedDataset

    pattern = "*.npy" if list(folder.glob("*.npy")) else "*.bin"
    report = InspectReport(str(folder), "flat shard folder")
    try:
        dataset = MemoryMappedDataset(folder, 2, file_pattern=pattern)
    except InputError as err:
        report.problems.append(str(err))
        return report
    shards = dataset._shards
    report.facts = {"pattern": pattern, "dtype": shards[0].dtype.name, "shards": len(shards)}
    report.tables["shards"] = [{"shard": s.path.name, "tokens": s.tokens} for s in shards[:20]]
    report.facts["tokens"] = sum(s.tokens for s in shards)
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


def _hf_decode(tokenizer: str, ids: list[int]) -> str:
    from tokenizers import Tokenizer

    from data_io.tokenizer_files import resolve_tokenizer

    decoded = Tokenizer.from_file(str(resolve_tokenizer(tokenizer))).decode(ids)
    return str(decoded)


def _inspect_tokenized(folder: Path, documents: int, tokenizer: str | None) -> InspectReport:
    info = json.loads((folder / "tokenizer_info.json").read_text(encoding="utf-8"))
    report = InspectReport(str(folder), "tokenized folder")
    vocab = info.get("vocab_size")
    report.facts = {"tokenizer": info.get("tokenizer_path"), "vocab_size": vocab}
    rows_table = []
    first_task: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    for task in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            arrays = {
                n: np.load(task / f"{n}.npy", mmap_mode="r")
                for n in ("tokens", "inst_start", "inst_len", "resp_start", "resp_len")
            }
        except (OSError, ValueError) as err:
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
            first_task = (tokens, np.asarray(arrays["inst_start"]), ends)
    report.tables["tasks"] = rows_table
    report.facts["tasks"] = len(rows_table)
    path = tokenizer or info.get("tokenizer_path")
    if documents and first_task is not None and path and Path(path).exists():
        tokens, starts, ends = first_task
        for start, end in list(zip(starts, ends, strict=True))[:documents]:
            report.samples.append(_preview(_hf_decode(path, tokens[start:end].tolist())))
    return report


def _inspect_sampled(folder: Path, documents: int, tokenizer: str | None) -> InspectReport:
    from data_io.load.sampled_folder import _sampled_epochs, open_epoch, open_tokens, read_metadata

    report = InspectReport(str(folder), "sampled folder")
    try:
        meta = read_metadata(folder)
        tokens = open_tokens(folder, meta)
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
    if documents and epochs and path and Path(path).exists():
        index = open_epoch(folder, epochs[0]["epoch"], len(tokens), meta, check=False)
        for row in range(min(documents, index.rows)):
            start = int(index.inst_start[row])
            end = int(index.resp_start[row] + index.resp_len[row])
            report.samples.append(_preview(_hf_decode(path, tokens[start:end].tolist())))
    return report


# -- command line -------------------------------------------------------------------------------
def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "inspect",
        help="validate a shard, tokenized or sampled folder; counts, dtype, decoded documents",
        description="Validate PATH (a `data_io prepare` output, a flat shard folder, a "
        "tokenized folder or a sampled folder), print what it holds and decode a few "
        "documents. Exits 1 when a problem is found.",
    )
    parser.add_argument("path", metavar="PATH", help="the folder to inspect")
    parser.add_argument(
        "--documents", type=int, default=3, help="documents to decode (default: %(default)s)"
    )
    parser.add_argument(
        "--no-verify", action="store_true", help="skip the SHA-256 check of prepare's shards"
    )
    parser.add_argument(
        "--tokenizer", default=None, help="tokenizer to decode with, when the folder has none"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    report = inspect_path(
        args.path, documents=args.documents, verify=not args.no_verify, tokenizer=args.tokenizer
    )
    if args.json:
        print(json.dumps({**asdict(report), "ok": report.ok}, indent=1, ensure_ascii=False))
    else:
        _print(report)
    return 0 if report.ok else 1


def _print(report: InspectReport) -> None:
    from rich.markup import escape
    from rich.table import Table

    from data_io.console import summary_console

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
        console.print(f"document {i}: {escape(sample)!r}")
    for problem in report.problems:
        console.print(f"[red]problem:[/red] {escape(problem)}")
    console.print("ok" if report.ok else f"{len(report.problems)} problem(s)")
