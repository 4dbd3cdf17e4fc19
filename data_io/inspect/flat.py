"""A flat shard folder (``*.npy``, or ``*.bin`` with a declared dtype; formats.md §6): token counts
and dtype as ``MemoryMappedDataset`` sees them, the first shard's head cut into documents."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from data_io.errors import InputError
from data_io.formats.shards import read_bin_dtype
from data_io.inspect.report import InspectReport, hf_decode, preview
from data_io.inspect.rows import ROW_SUFFIXES
from data_io.util.words import counted

_SHARD_ROWS = 20  # shards listed in a flat folder's table


BLOCK = 1 << 22  # tokens read at a time when scanning a shard


_FLAT_PREVIEW_TOKENS = 1 << 16  # head of a flat folder's first shard, cut into documents


# -- other layouts ------------------------------------------------------------------------------
def shard_files(folder: Path) -> list[Path]:
    """The flat shards of ``folder``: its ``*.npy`` files, else its ``*.bin`` files."""
    for pattern in ("*.npy", "*.bin"):
        files = sorted(p for p in folder.glob(pattern) if p.is_file())
        if files:
            return files
    return []


def inspect_flat(folder: Path, documents: int, tokenizer: str | None) -> InspectReport:
    from data_io.load.datasets.shards import _inspect_bin, _inspect_npy  # noqa: PLC0415  torch: only for a shard folder

    report = InspectReport(str(folder), "flat shard folder")
    files = shard_files(folder)
    if not files:
        report.kind = "unknown folder"
        report.problems.append(
            f"{folder}: no .npy or .bin shard here, and nothing else `data_io inspect` knows: "
            "pass a prepare, flat shard, tokenized, sampled or packing-cache folder, or cleaned "
            f"rows ({', '.join(ROW_SUFFIXES)} files or a folder of them)"
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
            f"{name}: {counted(len(names), 'shard')} ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
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
            preview(hf_decode(tokenizer, doc.tolist()))
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
