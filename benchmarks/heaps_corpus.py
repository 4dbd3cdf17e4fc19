"""A large training corpus whose distinct words keep growing with its size (Heaps' law), for the
tokenizer-training benchmark at 2 GB and beyond: repeating a real corpus would add no new word
after its first copy, and the memory of a trainer grows with the distinct words, not the bytes.

The first copy of the base corpus (``BASE/rows/*.jsonl``, real text: ``benchmarks.tokenize_corpus``)
is written as it is. Every later copy is the same real texts with rare words inserted between
their words: a share ``--rare`` of extra words, each drawn from a Zipf law (exponent ``--zipf``)
over an unbounded list of made-up words (Latin or Cyrillic syllables spelling the word's rank),
so that the number of distinct words grows like a power of the corpus size, as in real text
(new names, typos, identifiers, numbers). The rows keep the base corpus's shape (condition,
instruction, response); ``corpus.json`` records the sizes and the settings.

    python -m benchmarks.heaps_corpus work/race/corpus150 work/heaps --mb 2000 [--rare 0.05]
        [--zipf 1.2] [--part-mb 256] [--seed 0] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
from pathlib import Path

import numpy as np

LATIN = [c + v for c in "bdfghklmnprstvz" for v in "aeiou"] + ["qu", "th", "ch", "sh", "x"]
CYRILLIC = [c + v for c in "бвгджзклмнпрстф" for v in "аеиоу"] + ["ш", "щ", "ц", "ч", "ж"]
# Ranks past this are folded back (numpy's Zipf draws can reach 2^63).
MAX_RANK = 1 << 40

_BASE: list[dict] = []


def made_up_word(rank: int) -> str:
    """The word of ``rank``: its digits in base 80, one syllable each (even ranks Latin, odd
    Cyrillic), so every rank has its own word."""
    syllables = LATIN if rank % 2 == 0 else CYRILLIC
    rank //= 2
    parts = []
    while True:
        rank, digit = divmod(rank, len(syllables))
        parts.append(syllables[digit])
        if rank == 0:
            return "".join(parts)


def with_rare_words(text: str, rng: np.random.Generator, rare: float, zipf: float) -> str:
    words = text.split(" ")
    extra = rng.binomial(len(words), rare)
    if extra == 0:
        return text
    ranks = np.minimum(rng.zipf(zipf, extra), MAX_RANK)
    places = np.sort(rng.integers(0, len(words) + 1, extra))[::-1]
    for place, rank in zip(places.tolist(), ranks.tolist(), strict=True):
        words.insert(place, made_up_word(int(rank)))
    return " ".join(words)


def write_part(job: tuple[Path, int, int, int, float, float]) -> tuple[str, int, int]:
    """Rows from base row ``start`` on (cyclically) until ``size`` bytes of text; copies after
    the first get rare words. Written under a temporary name, renamed when complete."""
    path, start, size, seed, rare, zipf = job
    rng = np.random.default_rng([seed, start])
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    written, rows, index = 0, 0, start
    with open(tmp, "w", encoding="utf-8") as f:
        while written < size:
            row = dict(_BASE[index % len(_BASE)])
            if index >= len(_BASE):
                for key in ("instruction", "response"):
                    row[key] = with_rare_words(row[key], rng, rare, zipf)
            written += len(row["instruction"].encode()) + len(row["response"].encode())
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            rows += 1
            index += 1
    tmp.rename(path)
    return path.name, written, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", type=Path, help="a corpus folder holding rows/*.jsonl")
    parser.add_argument("out", type=Path)
    parser.add_argument("--mb", type=float, default=2000)
    parser.add_argument("--rare", type=float, default=0.05, help="extra rare words per word")
    parser.add_argument("--zipf", type=float, default=1.2, help="exponent of the rare words' law")
    parser.add_argument("--part-mb", type=float, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    for path in sorted((args.base / "rows").glob("*.jsonl")):
        with open(path, encoding="utf-8") as f:
            _BASE.extend(json.loads(line) for line in f)
    sizes = [len(r["instruction"].encode()) + len(r["response"].encode()) for r in _BASE]
    per_row = sum(sizes) / len(sizes)
    rows_dir = args.out / "rows"
    rows_dir.mkdir(parents=True, exist_ok=True)
    part_bytes = int(args.part_mb * 1e6)
    total = int(args.mb * 1e6)
    jobs, start = [], 0
    for k, offset in enumerate(range(0, total, part_bytes)):
        size = min(part_bytes, total - offset)
        jobs.append((rows_dir / f"part-{k:04d}.jsonl", start, size, args.seed, args.rare,
                     args.zipf))  # fmt: skip
        # Rare words make later copies a little longer; the next part starts about where this
        # one ends (exactness does not matter: it is where the rows come from, not their count).
        start += int(size / (per_row * (1 + args.rare if start >= len(_BASE) else 1)))
    with multiprocessing.get_context("fork").Pool(args.workers) as pool:
        results = pool.map(write_part, jobs)
    meta = {
        "base": str(args.base),
        "megabytes": args.mb,
        "text_bytes": sum(r[1] for r in results),
        "rows": sum(r[2] for r in results),
        "rare": args.rare,
        "zipf": args.zipf,
        "seed": args.seed,
        "parts": [r[0] for r in results],
    }
    (args.out / "corpus.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(json.dumps({k: v for k, v in meta.items() if k != "parts"}))


if __name__ == "__main__":
    main()
