"""``TextEncoder.encode_batch`` over each input form it takes, side by side in one process.

The same texts as ``list[str]`` (the reference), ``list[bytes]``, a pyarrow ``large_string``
array, NumPy ``U``, ``S`` and object arrays; best of ``--rounds`` warm calls each, MB/s of
UTF-8 text and the ratio to ``list[str]``. The ids of every form are checked equal first.

    python -m benchmarks.encoder_inputs [--texts 250000] [--chars 200] [--threads 1]

Texts: the paragraphs of this repository's Markdown files, cut to ``--chars`` characters and
repeated up to ``--texts`` (a NumPy ``U`` array pads every text to the longest one's width, so
``--chars`` also sets its padding); ``--multilingual`` adds accented and CJK text to each.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]


def _texts(count: int, chars: int, multilingual: bool) -> list[str]:
    paragraphs = [
        p.strip()
        for path in sorted(ROOT.glob("docs/**/*.md"))
        for p in path.read_text(encoding="utf-8").split("\n\n")
        if p.strip()
    ]
    if multilingual:
        paragraphs = [f"héllo wörld 日本語のテキスト {p}" for p in paragraphs]
    cut = [p[:chars] for p in paragraphs]
    return [cut[i % len(cut)] for i in range(count)]


def _forms(texts: list[str]) -> dict[str, object]:
    return {
        "list[str]": texts,
        "list[bytes]": [t.encode() for t in texts],
        "pyarrow large_string": pa.array(texts, pa.large_string()),
        "numpy U": np.array(texts),
        "numpy S": np.array([t.encode() for t in texts], dtype="S"),
        "numpy object": np.array(texts, dtype=object),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=250_000)
    parser.add_argument("--chars", type=int, default=200)
    parser.add_argument("--multilingual", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokenizer", default=str(ROOT / "trained_tokenizers/bpe/tokenizer.json"))
    args = parser.parse_args()
    os.environ["RAYON_NUM_THREADS"] = str(args.threads)
    from data_io.tokenizer.encoder import TextEncoder  # after the thread count is set

    encoder = TextEncoder(args.tokenizer)
    texts = _texts(args.texts, args.chars, args.multilingual)
    megabytes = sum(len(t.encode()) for t in texts) / 1e6
    forms = _forms(texts)
    reference = encoder.encode_batch(texts)
    for name, batch in forms.items():
        encoded = encoder.encode_batch(batch)
        same = np.array_equal(encoded.ids, reference.ids) and np.array_equal(
            encoded.offsets, reference.offsets
        )
        if not same:
            raise SystemExit(f"{name}: ids differ from list[str]'s")
    print(
        f"{len(texts):,} texts, {megabytes:.1f} MB of UTF-8, {args.threads} thread(s), "
        f"best of {args.rounds} warm calls (ids equal across forms)"
    )
    best: dict[str, float] = {}
    for _ in range(args.rounds):  # rounds alternate the forms, so drift hits all alike
        for name, batch in forms.items():
            started = time.perf_counter()
            encoder.encode_batch(batch)
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - started)
    print("| input | s | MB/s | vs list[str] |\n|---|---:|---:|---:|")
    for name, seconds in best.items():
        print(
            f"| {name} | {seconds:.3f} | {megabytes / seconds:,.1f} | "
            f"{best['list[str]'] / seconds:.2f}× |"
        )


if __name__ == "__main__":
    main()
