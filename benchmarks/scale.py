"""Scale-out on this machine: ``data_io tokenize --executor local`` with 1 and 2 workers on one
big JSONL file (cut into byte ranges), beside the plain run with 1 and 2 threads, and what the
plan and the finalize step cost as a fraction of the run. Every scaled output is checked
byte-identical to the plain run's.

    python -m benchmarks.scale [--copies 4] [--unit-mb 4] [--vocab shipped|qwen|gpt2]
        [--stored plain|zst-parts|gz-parts|gz]

``--stored`` writes the file as zstd frames of 4 MiB of text (``big.jsonl.zst``) or BGZF members
(``big.jsonl.gz``): the units are then runs of its parts, each decoding its own; or as one gzip
member (``gz``, level 6, as ``gzip`` writes it): the plan decompresses it once and cuts it at
entry points, each unit decompressing from its own. "slowest unit" is the longest unit's own
seconds: what bounds the wall clock with a worker a unit.

Input: the Python-docs rows (benchmarks/corpus.py) repeated ``--copies`` times in one file.
Figures are MB of input per second, wall clock (a fresh process each: the encoder's load and
cold caches are in every figure), best of ``--rounds``; the machine is shared, so compare the
ratios within one run.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "trained_tokenizers" / "bpe" / "tokenizer.json"


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".data_io_scale" not in p.parts
    }


def plain(inputs: Path, out: Path, tokenizer: Path, threads: int) -> float:
    """One plain run in a fresh process (as each worker is: no encoder loaded, caches cold)."""
    shutil.rmtree(out, ignore_errors=True)
    code = (
        "import time; from data_io.tokenize import tokenize; t = time.perf_counter(); "
        f"tokenize([{str(inputs)!r}], {str(out)!r}, tokenizer_path={str(tokenizer)!r}, "
        f"threads={threads}, progress=False); print(time.perf_counter() - t)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return float(done.stdout.strip().splitlines()[-1])


def scaled(inputs: Path, out: Path, tokenizer: Path, workers: int, unit_mb: float) -> dict:
    """Plan, units on ``workers`` processes (one thread each), finalize: the time of each."""
    from data_io.scale.plan import plan_tokenize
    from data_io.tokenize import tokenize_options

    shutil.rmtree(out, ignore_errors=True)

    def plan() -> Any:
        options = tokenize_options([inputs], out, tokenizer_path=tokenizer, progress=False)
        return plan_tokenize(options, int(unit_mb * (1 << 20)))

    return timed_run(plan, workers)


def timed_run(plan: Callable[[], Any], workers: int) -> dict:
    """``plan()`` (a stage's manifest), its units on ``workers`` local processes (one thread
    each), then finalize: the seconds of each, their total, and the units' count."""
    from data_io.scale.finalize import finalize
    from data_io.scale.local import run_local

    began = time.perf_counter()
    manifest = plan()
    manifest.save()
    planned = time.perf_counter()
    left = run_local(
        manifest, manifest.units, workers=workers, threads_per_worker=1, progress=False
    )
    assert not left, f"units not done: {left}"
    ran = time.perf_counter()
    # What bounds the wall clock with a worker a unit (a cluster): the slowest unit's own time.
    records = [manifest.read_record(unit.id, "done") or {} for unit in manifest.units]
    slowest = max((record.get("seconds", 0.0) for record in records), default=0.0)
    finalize(manifest, progress=False)
    ended = time.perf_counter()
    return {
        "plan": planned - began,
        "units": ran - planned,
        "finalize": ended - ran,
        "total": ended - began,
        "count": len(manifest.units),
        "slowest": slowest,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=ROOT / "work" / "bench_scale")
    parser.add_argument("--copies", type=int, default=4, help="corpus repetitions (~20 MB each)")
    parser.add_argument("--unit-mb", type=float, default=4)
    parser.add_argument(
        "--vocab", default="shipped", help="shipped, or a data_io.tokenizer.vocabularies name"
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--stored", choices=["plain", "zst-parts", "gz-parts", "gz"], default="plain"
    )
    args = parser.parse_args()

    from benchmarks.corpus import docs_rows, docs_sources, write_jsonl

    tokenizer = SHIPPED
    if args.vocab != "shipped":
        from data_io.tokenizer.vocabularies import vocabulary_path

        tokenizer = vocabulary_path(args.vocab)
    inputs = args.workdir / "rows"
    big = inputs / "big.jsonl"
    if not big.exists():
        write_jsonl(big, docs_rows(docs_sources()) * args.copies)
    if args.stored != "plain":
        sys.path.insert(0, str(ROOT))
        from tests.formats.parted import parted  # the tests' writer of parts

        stored = args.workdir / f"rows-{args.stored}"
        stored.mkdir(parents=True, exist_ok=True)
        if args.stored == "gz":
            target = stored / "big.jsonl.gz"
            if not target.exists():
                target.write_bytes(gzip.compress(big.read_bytes(), compresslevel=6, mtime=0))
        else:
            suffix, chunk = {"zst-parts": (".zst", 4 << 20), "gz-parts": (".gz", 65280)}[
                args.stored
            ]
            target = stored / f"big.jsonl{suffix}"
            if not target.exists():
                target.write_bytes(parted(big.read_bytes(), suffix, chunk))
        inputs, big = stored, target
    mb = big.stat().st_size / 1e6
    best: dict[str, float] = {}
    phases: dict[int, dict] = {}
    for _ in range(args.rounds):
        for threads in (1, 2):
            seconds = plain(inputs, args.workdir / f"plain{threads}", tokenizer, threads)
            best[f"plain {threads}"] = min(best.get(f"plain {threads}", 1e9), seconds)
        for workers in (1, 2):
            result = scaled(
                inputs, args.workdir / f"scaled{workers}", tokenizer, workers, args.unit_mb
            )
            if result["total"] < phases.get(workers, {"total": 1e9})["total"]:
                phases[workers] = result
    reference = _tree(args.workdir / "plain1")
    for workers in (1, 2):
        same = _tree(args.workdir / f"scaled{workers}") == reference
        assert same, f"the output of {workers} workers differs from the plain run's"
    print(
        f"\n{mb:.1f} MB of JSONL ({args.stored}) in one file, vocabulary {args.vocab}, units of "
        f"{args.unit_mb:g} MB ({phases[1]['count']} units); best of {args.rounds}; "
        "every scaled output byte-identical to the plain run's\n"
    )
    print(
        "| run | wall s | MB/s | vs 1 worker | plan s | units s | slowest unit s | finalize s "
        "| plan + finalize |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for threads in (1, 2):
        seconds = best[f"plain {threads}"]
        print(
            f"| plain `data_io tokenize --threads {threads}` | {seconds:.2f} | "
            f"{mb / seconds:.1f} | | | | | | |"
        )
    for workers in (1, 2):
        p = phases[workers]
        overhead = (p["plan"] + p["finalize"]) / p["total"]
        ratio = phases[1]["total"] / p["total"]
        print(
            f"| `--executor local --workers {workers}` (1 thread each) | {p['total']:.2f} | "
            f"{mb / p['total']:.1f} | {ratio:.2f}x | {p['plan']:.2f} | {p['units']:.2f} | "
            f"{p['slowest']:.2f} | {p['finalize']:.2f} | {overhead:.0%} |"
        )
    per_core = mb / phases[1]["units"]
    finalize_rate = mb / phases[1]["finalize"]
    print(
        f"\nper core (units alone): {per_core:.1f} MB/s; finalize: {finalize_rate:.0f} MB/s "
        "on one node (reads every part, hashes every source, writes every task)"
    )


if __name__ == "__main__":
    main()
