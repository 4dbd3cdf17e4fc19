"""Two builds of data_io against each other: the whole ``tokenize`` over the same rows,
interleaved (A, B, A, B, ...) so that a busy spell of a shared machine hits both alike.

A build is a folder holding a copy of the ``data_io`` package with its compiled extension,
made after ``make build`` with ``mkdir -p /tmp/a && cp -r data_io /tmp/a/``. Each run is a fresh
process: the encoder is loaded first (not timed, as in the race), then one first pass and
``--passes`` - 1 warm passes (the fastest kept), each into a fresh output folder on /dev/shm.
MB/s are of the rows (``*.jsonl``, and ``*.jsonl.gz`` for the compressed read path, counted
decompressed). Prints each round and the median ratio B/A.

``--calls N``: instead of ``tokenize``, ``TextEncoder.encode_batch`` over the rows' texts in
memory (the first ``--mb`` of them, each row's ``--field``), ``N`` texts a call (``list[str]``,
or pyarrow ``large_string`` arrays with ``--arrow``, made untimed); MB/s are of the texts.

    python -m benchmarks.tokenize_ab /tmp/a /tmp/b [--corpus work/race/corpus/cjk]
        [--threads 2] [--rounds 4] [--passes 3] [--tokenizer PATH]
        [--calls 4096 [--arrow] [--mb 30] [--field response]]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = ROOT / "work" / "race" / "corpus" / "main"


def _import_build(build: str) -> None:
    """``build``'s data_io first on the import path, or exit saying it has none."""
    sys.path.insert(0, build)
    import data_io

    if not data_io.__file__.startswith(build):
        raise SystemExit(f"{build} has no data_io package (imported {data_io.__file__})")


def child(build: str, rows: str, tokenizer: str, threads: int, passes: int) -> dict:
    """One process's passes with the package of ``build`` (run with ``--child``)."""
    calls = json.loads(os.environ.get("TOKENIZE_AB_CALLS", "null"))
    if calls is not None:
        return child_calls(build, rows, tokenizer, passes, calls)
    import gzip
    import shutil
    import tempfile
    import time

    _import_build(build)
    from data_io import _core
    from data_io.tokenize import tokenize

    _core.Encoder(tokenizer)  # loaded once per process, as the race does
    layout = {"boq": "<|endoftext|>", "eoq": "<|endoftext|>", "eoa": "<|endoftext|>"}
    tags, row_bytes = set(), 0
    # Plain or gzip'd rows (``*.jsonl.gz``: the compressed read path); MB/s of the rows' text.
    for path in sorted(Path(rows).glob("*.jsonl")) + sorted(Path(rows).glob("*.jsonl.gz")):
        with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as lines:
            for line in lines:
                row_bytes += len(line)
                tags.add(json.loads(line)["condition"])
    conditions = {t: "<|endoftext|>" for c in tags for t in c.split(",") if t}
    seconds = []
    scratch = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        for k in range(passes):
            out = Path(tmp) / f"out{k}"
            began = time.perf_counter()
            tokenize([rows], out, tokenizer_path=tokenizer, threads=threads, progress=False,
                     conditions=conditions, **layout)  # fmt: skip
            seconds.append(time.perf_counter() - began)
            shutil.rmtree(out)
    megabytes = row_bytes / 1e6
    return {"first": megabytes / seconds[0], "warm": megabytes / min(seconds[1:] or seconds)}


def child_calls(build: str, rows: str, tokenizer: str, passes: int, calls: dict) -> dict:
    """``child`` for ``--calls``: ``encode_batch`` over texts in memory."""
    import time

    _import_build(build)
    from data_io.tokenizer.encoder import TextEncoder

    texts: list[str] = []
    size = 0
    for path in sorted(Path(rows).glob("*.jsonl")):
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                texts.append(json.loads(line)[calls["field"]])
                size += len(texts[-1].encode())
                if size >= calls["mb"] * 1e6:
                    break
        if size >= calls["mb"] * 1e6:
            break
    step = calls["texts"]
    batches: list = [texts[s : s + step] for s in range(0, len(texts), step)]
    if calls["arrow"]:
        import pyarrow as pa

        batches = [pa.array(b, pa.large_string()) for b in batches]
    encoder = TextEncoder(tokenizer, tables="process")
    seconds = []
    for _ in range(passes):
        began = time.perf_counter()
        for batch in batches:
            encoder.encode_batch(batch)
        seconds.append(time.perf_counter() - began)
    return {"first": size / 1e6 / seconds[0], "warm": size / 1e6 / min(seconds[1:] or seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", nargs="?", help="folder with build A's data_io package")
    parser.add_argument("b", nargs="?", help="folder with build B's data_io package")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--tokenizer", help="default: the Qwen vocabulary of the race")
    parser.add_argument("--calls", type=int, help="encode_batch in memory, N texts a call")
    parser.add_argument("--arrow", action="store_true", help="with --calls: pyarrow arrays")
    parser.add_argument("--mb", type=float, default=30, help="with --calls: MB of texts")
    parser.add_argument("--field", default="response", help="with --calls: the rows' field")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        build, rows, tokenizer, threads, passes = args.child
        print(json.dumps(child(build, rows, tokenizer, int(threads), int(passes))))
        return
    if not (args.a and args.b):
        parser.error("two build folders are needed: A and B")
    tokenizer = args.tokenizer
    if tokenizer is None:
        from data_io.tokenizer.vocabularies import vocabulary_path

        tokenizer = str(vocabulary_path("qwen"))
    rows = args.corpus / "rows"
    if not rows.is_dir():
        raise SystemExit(
            f"no {rows}: build the race's corpus first (python -m benchmarks.tokenize_corpus)"
        )
    env = {**os.environ, "RAYON_NUM_THREADS": str(args.threads)}
    if args.calls:
        env["TOKENIZE_AB_CALLS"] = json.dumps(
            {"texts": args.calls, "arrow": args.arrow, "mb": args.mb, "field": args.field}
        )
    results: dict[str, list[dict]] = {"A": [], "B": []}
    for round_no in range(args.rounds):
        line = []
        for name, build in (("A", args.a), ("B", args.b)):
            command = [sys.executable, "-m", "benchmarks.tokenize_ab", "--child",
                       str(Path(build).resolve()), str(rows), tokenizer,
                       str(args.threads), str(args.passes)]  # fmt: skip
            done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"build {name} failed:\n{done.stderr.strip()}")
            speeds = json.loads(done.stdout.strip().splitlines()[-1])
            results[name].append(speeds)
            line.append(f"{name} {speeds['first']:.1f} / {speeds['warm']:.1f}")
        print(f"round {round_no + 1}: " + " | ".join(line) + " MB/s (first / warm)", flush=True)
    for key in ("first", "warm"):
        a = statistics.median(r[key] for r in results["A"])
        b = statistics.median(r[key] for r in results["B"])
        what = "texts" if args.calls else "rows"
        print(f"{key}: A {a:.1f}, B {b:.1f} MB/s of {what} (medians), B/A {b / a:.2f}x")


if __name__ == "__main__":
    main()
