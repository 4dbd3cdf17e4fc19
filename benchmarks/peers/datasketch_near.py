"""The peer of benchmarks/near_dedup.py: datasketch's MinHash LSH over the same documents.

Each document's shingles are those of the benchmark's exact-Jaccard oracle: words are the
lowercased runs of ``[^\\W_]+``, shingles every ``ngram`` consecutive words joined by a space
(a document with fewer words: one shingle of all of them), UTF-8. Each document gets a
``MinHash(num_perm=bands * rows)`` and, in document order, is a duplicate when
``MinHashLSH(params=(bands, rows)).query`` finds any earlier document; then it is inserted
(always: data_io's rule is "a band seen in any earlier document, kept or not"). Prints ONE
JSON line: the datasketch version, the wall seconds of the MinHash and LSH work (reading and
word splitting untimed), the document count and the sorted indices of the duplicates. It runs
under its own venv (work/bench_venvs/datasketch), so it never imports data_io:

    work/bench_venvs/datasketch/bin/python benchmarks/peers/datasketch_near.py \\
        --input FILE.jsonl [--ngram 5] [--bands 14] [--rows 8]
"""

from __future__ import annotations

import argparse
import json
import re
import time
from importlib.metadata import version
from pathlib import Path

from datasketch import MinHash, MinHashLSH


def shingles(text: str, ngram: int) -> list[bytes]:
    words = re.findall(r"[^\W_]+", text.lower())
    if len(words) < ngram:
        return [" ".join(words).encode()]
    return [" ".join(words[i : i + ngram]).encode() for i in range(len(words) - ngram + 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", type=Path, required=True, help="JSONL, a 'text' field a line")
    parser.add_argument("--ngram", type=int, default=5)
    parser.add_argument("--bands", type=int, default=14)
    parser.add_argument("--rows", type=int, default=8)
    args = parser.parse_args()
    with args.input.open(encoding="utf-8") as lines:
        documents = [shingles(json.loads(line)["text"], args.ngram) for line in lines]
    permutations = args.bands * args.rows
    started = time.perf_counter()
    lsh = MinHashLSH(num_perm=permutations, params=(args.bands, args.rows))
    dropped = []
    for number, document in enumerate(documents):
        minhash = MinHash(num_perm=permutations)
        minhash.update_batch(document)
        if lsh.query(minhash):
            dropped.append(number)
        lsh.insert(number, minhash)
    seconds = time.perf_counter() - started
    report = {
        "datasketch": version("datasketch"),
        "seconds": seconds,
        "documents": len(documents),
        "dropped": dropped,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
