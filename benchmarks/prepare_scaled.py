"""``data_io prepare --executor local`` on one compressed JSONL file cut into ranges of its text
(``formats.ranges``: each unit decompresses the text before its range), for a gzip file
(``gz``, one member as ``gzip -6`` writes it) into ranges from entry points the plan finds (each
unit decompresses its own text: the plan decompresses the file once, its "plan s"), or, for a
file of parts (``zst-parts``, ``gz-parts``, ``xz-parts``), into ranges of its parts (each unit
decompresses its own), beside the plain run:
what cutting costs (the units' seconds, one worker running them in turn, against the file as
one unit) and what it gives (the slowest unit's own seconds, which bound a run with a worker
a unit, and ``--workers`` workers' wall clock). Every scaled output is checked
byte-identical to the plain run's.

    .venv/bin/python -m benchmarks.prepare_scaled [--formats zst,gz,zst-parts] [--ranges 1,2,4,8]
        [--rounds 2] [--workers 2] [--corpus DIR]

Input: ``work/prepare_compressed/110mb/rows.jsonl.{zst,gz}`` and ``rows-parts.jsonl.*``
(``benchmarks.prepare_compressed --formats ...`` writes them), Qwen's vocabulary, ``--dedup doc``. The units of a plan run in this process's
workers (fresh processes, one thread each); the plain run is its own process, one thread.
Best of ``--rounds``; the machine is shared, so compare the ratios within one run.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "work" / "prepare_compressed" / "110mb"
QWEN = Path.home() / ".cache" / "data_io" / "vocab" / "qwen" / "tokenizer.json"
OPTIONS = {"tokenizer": str(QWEN), "dedup": "doc"}


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".data_io_scale" not in p.parts and p.suffix != ".json"
    }


def plain(source: Path, out: Path) -> float:
    """One plain run, one thread, in a fresh process."""
    shutil.rmtree(out, ignore_errors=True)
    code = (
        "import time; from data_io.prepare import prepare; t = time.perf_counter(); "
        f"prepare([{str(source)!r}], {str(out)!r}, threads=1, progress=False, **{OPTIONS!r}); "
        "print(time.perf_counter() - t)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return float(done.stdout.strip().splitlines()[-1])


def scaled(source: Path, out: Path, unit_bytes: int, workers: int) -> dict:
    """Plan, units on ``workers`` processes (one thread each), finalize: the time of each."""
    from benchmarks.scale import timed_run
    from data_io.scale.plan import plan_prepare

    shutil.rmtree(out, ignore_errors=True)
    return timed_run(lambda: plan_prepare([str(source)], out, dict(OPTIONS), unit_bytes), workers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--formats", default="zst,gz")
    parser.add_argument("--ranges", default="1,2,4,8", help="ranges to cut the file into")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=ROOT / "work" / "bench_prepare_scaled")
    parser.add_argument(
        "--corpus", type=Path, default=CORPUS, help="holding rows.jsonl and its compressed forms"
    )
    parser.add_argument("--workers", type=int, default=2, help="the wall-clock column's workers")
    parser.add_argument("--text-field", default="text", help="the rows' text field")
    args = parser.parse_args()
    OPTIONS["text_field"] = args.text_field
    corpus = args.corpus
    text_mb = (corpus / "rows.jsonl").stat().st_size / 1e6
    print(f"{text_mb:.0f} MB of JSONL text, Qwen, --dedup doc; best of {args.rounds}\n")
    print(
        "| file | run | units | units s (1 worker) | vs one unit | slowest unit s "
        f"| {args.workers} workers: wall s | plan s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for suffix in args.formats.split(","):
        kind, _, parts = suffix.partition("-")
        source = corpus / (f"rows-parts.jsonl.{kind}" if parts else f"rows.jsonl.{kind}")
        inputs = args.workdir / suffix
        inputs.mkdir(parents=True, exist_ok=True)
        link = inputs / source.name
        if not link.exists():
            link.symlink_to(source)
        best_plain = min(plain(link, args.workdir / "plain") for _ in range(args.rounds))
        reference = _tree(args.workdir / "plain")
        print(f"| {source.name} | plain, 1 thread | — | {best_plain:.2f} | | | | |")
        one_unit = None
        for count in (int(c) for c in args.ranges.split(",")):
            # A unit size the text's estimate cuts into `count` ranges (1: a unit size above it).
            # A file of parts is cut by its bytes on disk.
            size = source.stat().st_size if parts else text_mb * 1e6
            unit_bytes = int(size / count) + 1 if count > 1 else 1 << 40
            serial = min(
                (scaled(link, args.workdir / "s1", unit_bytes, 1) for _ in range(args.rounds)),
                key=lambda r: r["units"],
            )
            both = min(
                (
                    scaled(link, args.workdir / "s2", unit_bytes, args.workers)
                    for _ in range(args.rounds)
                ),
                key=lambda r: r["total"],
            )
            for out in ("s1", "s2"):
                assert _tree(args.workdir / out) == reference, f"{out} differs from plain"
            one_unit = one_unit or serial["units"]
            wall = both["total"]
            print(
                f"| {source.name} | `--executor local` | {serial['count']} | "
                f"{serial['units']:.2f} | {serial['units'] / one_unit:.2f}x | "
                f"{serial['slowest']:.2f} | {wall:.2f} | {both['plan']:.2f} |"
            )
    print("\nEvery scaled output's shards byte-identical to the plain run's.")


if __name__ == "__main__":
    main()
