"""Inputs for the scale-out tests: rows made here (deterministic), in the formats a plan cuts
differently: plain JSONL (byte ranges), Parquet with several row groups (row-group ranges),
gzip JSONL (whole), and a small file (whole)."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER = ROOT / "trained_tokenizers" / "bpe" / "tokenizer.json"
WORDS = [
    "data",
    "tokens",
    "shard",
    "worker",
    "plan",
    "unit",
    "merge",
    "byte",
    "row",
    "group",
    "line",
    "café",
    "naïve",
    "東京",
    "ünïcödé",
    "don't",
    "it's",
    "12345",
    "3.14",
    "--",
    "(x)",
    "[y]",
    "{z}",
    "<tag>",
    "\t",
    "tab",
    "",
    "two",
    "",
    "spaces",
]


def rows(n: int, seed: int = 0) -> list[dict[str, str]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        text = lambda k: " ".join(rng.choice(WORDS) for _ in range(k))  # noqa: E731
        out.append({"condition": rng.choice(["direct", "cot", "direct,noisy", ""]),
                    "instruction": f"{i}: {text(rng.randint(1, 30))}",
                    "response": text(rng.randint(0, 60))})  # fmt: skip
    return out


def write_jsonl(path: Path, items: list[dict], *, blank_every: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for i, row in enumerate(items):
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            if blank_every and i % blank_every == blank_every - 1:
                f.write("\n")  # blank lines count as lines: they test line numbering
    return path


def write_inputs(folder: Path) -> Path:
    """A folder with every kind of file a plan handles."""
    write_jsonl(folder / "big.jsonl", rows(3000, seed=1), blank_every=97)
    write_jsonl(folder / "small.jsonl", rows(40, seed=2))
    table = pa.Table.from_pylist(rows(2000, seed=3))
    pq.write_table(table, folder / "groups.parquet", row_group_size=300)
    with gzip.open(folder / "packed.jsonl.gz", "wt", encoding="utf-8") as f:
        for row in rows(500, seed=4):
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return folder


def tree_bytes(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` but the scale-out's own, by relative path."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".data_io_scale" not in p.parts
    }
