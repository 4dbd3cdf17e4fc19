"""How long ``TextEncoder(path)`` takes in a fresh process, with the encoder's load cache off
and with it read (``DATA_IO_ENCODER_CACHE``), alternating round by round so that a busy spell
of the machine hits both alike. The cache lives in a temporary folder, written by one untimed
load first. One thread (``RAYON_NUM_THREADS=1``), piece tables in the process.

    .venv/bin/python -m benchmarks.encoder_load [--tokenizer PATH] [--rounds 8]

The default tokenizer is Qwen2.5's (``python -c "from data_io.tokenizer.vocabularies import
vocabulary_path; vocabulary_path('qwen')"`` builds it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

QWEN = Path.home() / ".cache" / "data_io" / "vocab" / "qwen" / "tokenizer.json"

_CHILD = """
import json, sys, time
from data_io.tokenizer.encoder import TextEncoder
began = time.perf_counter()
encoder = TextEncoder(sys.argv[1], tables="process")
seconds = time.perf_counter() - began
print(json.dumps({"seconds": seconds, "load_cache": encoder.load_cache}))
"""


def load(tokenizer: Path, cache: str) -> dict:
    env = {**os.environ, "DATA_IO_ENCODER_CACHE": cache, "RAYON_NUM_THREADS": "1"}
    env["OPENBLAS_NUM_THREADS"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tokenizer)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", type=Path, default=QWEN)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"off": [], "read": []}
    with tempfile.TemporaryDirectory(prefix="data_io_encoder_load_") as cache:
        written = load(args.tokenizer, cache)["load_cache"]
        assert written.startswith("written "), written
        for _ in range(args.rounds):
            for how, folder in (("off", "off"), ("read", cache)):
                run = load(args.tokenizer, folder)
                assert run["load_cache"].split(" ")[0] == how, run
                times[how].append(run["seconds"])
        size = sum(p.stat().st_size for p in Path(cache).iterdir())
    print(f"\n{args.tokenizer}: {args.rounds} rounds, seconds (cache file {size / 1e6:.1f} MB)\n")
    print("| load cache | median | fastest | slowest | every round |")
    print("|---|---:|---:|---:|---|")
    for how, seconds in times.items():
        every = ", ".join(f"{s:.3f}" for s in seconds)
        print(
            f"| {how} | {statistics.median(seconds):.3f} | {min(seconds):.3f} "
            f"| {max(seconds):.3f} | {every} |"
        )
    ratio = statistics.median(times["off"]) / statistics.median(times["read"])
    print(f"\nmedian off / read: {ratio:.2f}x")


if __name__ == "__main__":
    main()
