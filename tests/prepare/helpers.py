"""Small corpora and readers shared by the prepare tests."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "wizards",
    "quietly",
    "judge",
    "boxing",
    "matches",
    "in",
    "old",
    "towns",
    "near",
    "rivers",
    "and",
    "mountains",
]


def documents(count: int, seed: int = 0, duplicates: int = 0) -> list[str]:
    """``count`` random word documents (each well over 20 characters), then ``duplicates``
    repeats of earlier ones at random places."""
    rng = random.Random(seed)
    docs = [
        f"doc {i}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 40)))
        for i in range(count)
    ]
    for _ in range(duplicates):
        docs.insert(rng.randrange(len(docs) + 1), rng.choice(docs[:count]))
    return docs


def write_txt(path: Path, docs: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return path


def write_jsonl(path: Path, docs: list[str], field: str = "text") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({field: d}) + "\n" for d in docs), encoding="utf-8")
    return path


def read_split(out: Path, split: str) -> np.ndarray:
    """Every token of a split, shards in order, with the dtype the metadata declares."""
    meta = json.loads((out / "dataset_metadata.json").read_text())
    dtype = np.dtype(meta["dtype"])
    parts = []
    for shard in sorted((out / split).glob(f"*.{meta['shard_format']}")):
        if shard.suffix == ".npy":
            parts.append(np.load(shard))
        else:
            parts.append(np.fromfile(shard, dtype=dtype))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def split_documents(tokens: np.ndarray, eos: int) -> list[list[int]]:
    """A token stream cut after every EOS (every document ends with one)."""
    assert len(tokens) == 0 or tokens[-1] == eos
    docs, start = [], 0
    for end in np.flatnonzero(tokens == eos):
        docs.append(tokens[start:end].tolist())
        start = end + 1
    return docs


def tree_bytes(folder: Path) -> dict[str, bytes]:
    """Every shard file's bytes, by path relative to ``folder``."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("shard_*"))
    }


def folder_files(out: Path) -> dict[str, bytes]:
    """Every file of a prepared folder, the metadata without its times: two runs that wrote
    the same dataset compare equal."""
    found = {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name != "dataset_metadata.json"
    }
    metadata = json.loads((out / "dataset_metadata.json").read_text())
    for run in metadata["runs"]:
        run.pop("finished", None)
    found["metadata"] = json.dumps(metadata, sort_keys=True).encode()
    return found
