"""How `TextEncoder.encode_batch` scales from one thread to N, beside what the machine allows.

Three measurements, round after round (interleaved, so a busy spell of a shared machine hits
each alike), warm passes over the same texts for a fixed time:

- ``alone``: one process, one thread;
- ``apart``: N processes of one thread each, started together: the machine's own ceiling for
  this work (shared caches, memory, the host's scheduling), with nothing shared in-process;
- ``together``: one process, N threads (the encoder's helpers).

    python -m benchmarks.encoder_scaling [--docs DIR] [--field text] [--mb 30] [--threads 2]
        [--seconds 4] [--rounds 3] [--batch 4096] [--arrow] [--gap-ms 0]

``--gap-ms``: Python work between calls (a loader's packing, the race's digests), during which
the helpers go to sleep unless they are kept awake. Each row prints MB/s and the cores the
process used; the summary gives ``together / alone`` against ``apart / alone`` (medians).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

_DOCS = Path("work/race/corpus150/main/docs")
_QWEN = Path.home() / ".cache" / "data_io" / "vocab" / "qwen" / "tokenizer.json"


def _texts(docs: Path, megabytes: float, field: str = "text") -> tuple[list[str], int]:
    texts, size = [], 0
    for path in sorted(docs.glob("*.jsonl")):
        with path.open(encoding="utf-8") as rows:
            for line in rows:
                text = json.loads(line)[field]
                texts.append(text)
                size += len(text.encode())
                if size >= megabytes * 2**20:
                    return texts, size
    return texts, size


def child(spec: dict) -> dict:
    """Warm passes from ``spec["start"]`` (a wall-clock time, so that processes start together)
    for ``spec["seconds"]``."""
    import pyarrow as pa

    from data_io.tokenizer.encoder import TextEncoder

    texts, size = _texts(Path(spec["docs"]), spec["mb"], spec["field"])
    encoder = TextEncoder(spec["tokenizer"])
    batch = spec["batch"]
    batches: list = [texts[i : i + batch] for i in range(0, len(texts), batch)]
    if spec["arrow"]:
        batches = [pa.array(b, pa.large_string()) for b in batches]
    for b in batches:  # the first pass: caches filled, pages touched
        encoder.encode_batch(b)
    while time.time() < spec["start"]:
        time.sleep(0.001)
    done, inside, cpu = 0, 0.0, 0.0
    began = time.perf_counter()
    while time.perf_counter() - began < spec["seconds"]:
        for b in batches:
            start, start_cpu = time.perf_counter(), time.process_time()
            encoder.encode_batch(b)
            inside += time.perf_counter() - start
            cpu += time.process_time() - start_cpu
            if spec["gap_ms"]:
                until = time.perf_counter() + spec["gap_ms"] / 1000
                while time.perf_counter() < until:  # Python work between calls
                    pass
        done += size
    return {"mb_s": done / 2**20 / inside, "cores": cpu / inside}


def _run(spec: dict, threads: int, processes: int) -> list[dict]:
    env = {**os.environ, "RAYON_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": "1"}
    spec = {**spec, "start": time.time() + spec["warmup_s"]}
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "benchmarks.encoder_scaling", "--child", json.dumps(spec)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    reports = []
    for process in children:
        out, _ = process.communicate()
        if process.returncode:
            raise SystemExit(f"a child failed ({process.returncode})")
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=Path, default=_DOCS, help="a folder of JSONL")
    parser.add_argument("--field", default="text", help="the JSONL field of the text")
    parser.add_argument("--tokenizer", type=Path, default=_QWEN)
    parser.add_argument("--mb", type=float, default=30)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=4096, help="texts per call")
    parser.add_argument("--arrow", action="store_true", help="pyarrow large_string batches")
    parser.add_argument("--gap-ms", type=float, default=0, help="Python work between calls")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    if not args.docs.is_dir():
        raise SystemExit(
            f"no corpus at {args.docs}: build it with `python -m benchmarks.tokenize_corpus "
            "work/race/corpus150 --mb 150`, or pass --docs"
        )
    spec = {
        "docs": str(args.docs), "field": args.field, "tokenizer": str(args.tokenizer),
        "mb": args.mb, "seconds": args.seconds, "batch": args.batch, "arrow": args.arrow,
        "gap_ms": args.gap_ms, "warmup_s": 2 + args.mb / 10,
    }  # fmt: skip
    n = args.threads
    rows: dict[str, list[float]] = {"alone": [], "apart": [], "together": []}
    print(
        f"| round | one process, 1 thread | {n} processes, 1 thread each | one process, {n} threads |"
    )
    print("|---:|---:|---:|---:|")
    for number in range(args.rounds):
        alone = _run(spec, 1, 1)[0]
        apart = _run(spec, 1, n)
        together = _run(spec, n, 1)[0]
        rows["alone"].append(alone["mb_s"])
        rows["apart"].append(sum(r["mb_s"] for r in apart))
        rows["together"].append(together["mb_s"])
        each = " + ".join(f"{r['mb_s']:.1f}" for r in apart)
        print(
            f"| {number + 1} | {alone['mb_s']:.1f} | {rows['apart'][-1]:.1f} ({each}) "
            f"| {together['mb_s']:.1f} ({together['cores']:.2f} cores) |",
            flush=True,
        )
    alone = statistics.median(rows["alone"])
    print(
        f"\nmedians: {n} threads {statistics.median(rows['together']) / alone:.2f}x one thread; "
        f"{n} processes {statistics.median(rows['apart']) / alone:.2f}x (the machine's ceiling)"
    )


if __name__ == "__main__":
    main()
