"""How much the encoder's warm pass waits on memory: one thread, warm, over texts whose distinct
text is limited to N kB (the same texts encoded again and again, so the pieces looked up stay
few and their table lines stay in the caches), against the whole slice. The difference is what
the piece table's cache misses cost on this machine, prefetching included (the second column
repeats fresh copies of the texts instead, so that only the pieces repeat, not the text's
memory); beside it, how the
lookups spread over the pieces (the share of the k most frequent pieces, from `tokenizers`'
pre-tokenizer on a sample), which says how many lines a cache must hold to serve most lookups.

    python -m benchmarks.encoder_working_set [--rows DIR] [--field response]
        [--kb 100,1000,10000,150000] [--sample-mb 20] [--tokenizer PATH]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import time
from pathlib import Path

ROWS = Path("work/race/corpus150/main/rows")
QWEN = Path.home() / ".cache" / "data_io" / "vocab" / "qwen" / "tokenizer.json"
CALL_TEXTS = 4096
PASS_BYTES = 30e6


def texts_of(rows: Path, field: str) -> list[str]:
    texts = []
    for path in sorted(rows.glob("*.jsonl")):
        with path.open(encoding="utf-8") as lines:
            texts.extend(json.loads(line)[field] for line in lines)
    random.Random(0).shuffle(texts)
    return texts


def first_kb(texts: list[str], kb: int) -> list[str]:
    chosen, size = [], 0
    for text in texts:
        chosen.append(text)
        size += len(text.encode())
        if size >= kb * 1000:
            break
    return chosen


def warm_speed(encoder, distinct: list[str], fresh: bool = False) -> float:
    """MB/s of the best of three warm passes of about 30 MB made of ``distinct`` repeated;
    ``fresh``: each repetition new string objects of the same texts, so that the pieces repeat
    but the text's memory does not."""
    size = sum(len(text.encode()) for text in distinct)
    copies = max(1, round(PASS_BYTES / max(size, 1)))
    if fresh:
        repeated = [(text + " ")[:-1] for _ in range(copies) for text in distinct]
    else:
        repeated = distinct * copies
    calls = [repeated[at : at + CALL_TEXTS] for at in range(0, len(repeated), CALL_TEXTS)]
    total = size * (len(repeated) // len(distinct))
    for call in calls:
        encoder.encode_batch(call)
    best = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        for call in calls:
            encoder.encode_batch(call)
        best = min(best, time.perf_counter() - began)
    return total / 1e6 / best


def coverage(tokenizer: str, texts: list[str], megabytes: float) -> tuple[int, int, dict]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(tokenizer)
    counts: collections.Counter[str] = collections.Counter()
    for text in first_kb(texts, int(megabytes * 1000)):
        if tok.normalizer is not None:
            text = tok.normalizer.normalize_str(text)
        counts.update(piece for piece, _ in tok.pre_tokenizer.pre_tokenize_str(text))
    total = sum(counts.values())
    ranked = [count for _, count in counts.most_common()]
    shares, running = {}, 0
    for rank, count in enumerate(ranked, 1):
        running += count
        if rank in (1_000, 4_000, 16_000, 64_000, 256_000):
            shares[rank] = running / total
    return total, len(counts), shares


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=Path, default=ROWS)
    parser.add_argument("--field", default="response")
    parser.add_argument("--kb", default="100,1000,10000,150000")
    parser.add_argument("--sample-mb", type=float, default=20)
    parser.add_argument("--tokenizer", default=str(QWEN))
    args = parser.parse_args()
    os.environ["RAYON_NUM_THREADS"] = "1"
    from data_io.tokenizer.encoder import TextEncoder

    texts = texts_of(args.rows, args.field)
    encoder = TextEncoder(args.tokenizer, tables="process")
    print("| distinct text | warm MB/s, one thread | the same, fresh copies |\n|---:|---:|---:|")
    for kb in (int(k) for k in args.kb.split(",")):
        chosen = first_kb(texts, kb)
        same, fresh = warm_speed(encoder, chosen), warm_speed(encoder, chosen, fresh=True)
        print(f"| {kb:,} kB | {same:.1f} | {fresh:.1f} |", flush=True)
    total, distinct, shares = coverage(args.tokenizer, texts, args.sample_mb)
    print(f"\n{args.sample_mb:g} MB sample: {total:,} pieces, {distinct:,} distinct; share of "
          "lookups of the k most frequent: "
          + ", ".join(f"{k:,}: {share:.1%}" for k, share in shares.items()))  # fmt: skip


if __name__ == "__main__":
    main()
