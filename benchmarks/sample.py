"""Benchmark: `python sample_tokenized.py epochs=10` on a synthetic corpus of the real size.

Builds (once, cached under --corpus) a tokenized corpus in the tokenizer's layout: tens of task
folders named after prefix_config.yaml's prefixes, ~1.4M rows, ~1.7B tokens, vocab 65,536,
tokens.npy as <u4 (the tokenizer's default) or <u2 (--token-dtype). Then times the sampler as
a subprocess (wall clock, user and system CPU, peak RSS from wait4): --runs fresh builds
(median and range: a shared machine is noisy), then a re-run that must reuse the output.
Prints a Markdown table, with a digest of the epoch arrays (it must not change when the code
is optimised); the sampler's own report goes to --report.

    .venv/bin/python -m benchmarks.sample                   # full size (writes ~7 GB + ~3.4 GB)
    .venv/bin/python -m benchmarks.sample --scale 0.05      # quick check

Reference (issue 3): the original takes 8.0 s and 8.3 GB peak RSS for this size on a 2-core,
24 GB machine; the targets are <= 2 s and <= 1 GB with identical epoch arrays.
"""

from __future__ import annotations

import os
import sys

# This folder holds tokenize.py (the tokenizer's benchmark), which as the script's folder on
# sys.path would shadow the standard library's tokenize (imported by dataclasses, inspect,
# tracebacks): take the folder off the path before anything else is imported.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from data_io.sampling.synthetic import SyntheticTask, write_corpus  # noqa: E402

# (task-name template, number of files, share of rows): a mix of capped, uncapped, repeated
# and unmatched tasks, as in the real corpus.
LAYOUT = [
    ("SYNTH__synth_{:03d}.parquet", 8, 0.20),
    ("flan__cot_fsopt_data__task{:03d}.parquet", 3, 0.04),
    ("flan__niv2_fsopt_data__task{:03d}.parquet", 10, 0.05),
    ("dmmath__train-easy__module{:02d}.parquet", 5, 0.08),
    ("ampsmathematica__topic{:02d}.parquet", 3, 0.03),
    ("tasksource__task{:02d}.parquet", 4, 0.03),
    ("openmathinstruct2__part{:02d}.parquet", 2, 0.20),
    ("acereason__all{:02d}.parquet", 1, 0.10),
    ("openthoughts2__all{:02d}.parquet", 1, 0.10),
    ("Platypus__arb_{:02d}.jsonl", 2, 0.005),
    ("gsm8k_train.jsonl", 1, 0.005),
    ("numinamath.jsonl", 1, 0.10),
    ("textbookreasoning__cot.parquet", 1, 0.05),
]


def build_layout(rows: int, tokens: int, token_dtype: str, seed: int) -> dict[str, SyntheticTask]:
    rng = np.random.default_rng(seed)
    mean_row = tokens / rows
    tasks = {}
    for template, files, share in LAYOUT:
        for index in range(files):
            count = max(1, round(rows * share / files))
            # Instruction ~30% and response ~70% of a row, long-tailed; a few exceed 4097.
            inst = rng.gamma(1.2, 0.3 * mean_row / 1.2, count).astype(np.int64) + 4
            resp = rng.gamma(1.0, 0.7 * mean_row, count).astype(np.int64) + 1
            tasks[template.format(index)] = SyntheticTask(inst, resp, token_dtype=token_dtype)
    return tasks


def ensure_corpus(path: Path, rows: int, tokens: int, token_dtype: str) -> None:
    spec = {"rows": rows, "tokens": tokens, "token_dtype": token_dtype, "version": 1}
    stamp = path / "benchmark_spec.json"
    if stamp.exists() and json.loads(stamp.read_text()) == spec:
        return
    shutil.rmtree(path, ignore_errors=True)
    started = time.perf_counter()
    write_corpus(path, build_layout(rows, tokens, token_dtype, seed=0), vocab_size=65_536)
    stamp.write_text(json.dumps(spec))
    print(f"built corpus in {time.perf_counter() - started:.1f} s", file=sys.stderr)


@dataclass(frozen=True)
class Timing:
    """One sampler run: wall seconds, CPU seconds (user, system) and peak RSS bytes."""

    wall: float
    user: float
    system: float
    peak_rss: int

    @property
    def cpu(self) -> float:
        return self.user + self.system


def run_sampler(corpus: Path, output: Path, report: Path, epochs: int) -> Timing:
    """Time one sampler run as a subprocess (``wait4`` gives its CPU time and peak RSS)."""
    command = [
        sys.executable,
        str(ROOT / "sample_tokenized.py"),
        f"epochs={epochs}",
        f"tokenized_path={corpus}",
        f"output_path={output}",
        f"prefix_config_path={ROOT / 'prefix_config.yaml'}",
        "--quiet",
    ]
    with report.open("w") as stdout:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=stdout, cwd=ROOT)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"sampler failed: {' '.join(command)}")
    return Timing(wall, usage.ru_utime, usage.ru_stime, usage.ru_maxrss * 1024)


def describe(runs: list[Timing]) -> str:
    """``median (min-max)`` of wall and CPU over the runs, and the largest peak RSS."""

    def spread(values: list[float]) -> str:
        if len(values) == 1:
            return f"{values[0]:.2f} s"
        return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"

    return (
        f"{spread([run.wall for run in runs])} wall, {spread([run.cpu for run in runs])} CPU "
        f"(user {statistics.median([run.user for run in runs]):.2f} + system "
        f"{statistics.median([run.system for run in runs]):.2f}), "
        f"{max(run.peak_rss for run in runs) / 2**30:.2f} GiB peak RSS"
    )


def io_floor(corpus: Path, output: Path, pool_bytes: int) -> tuple[float, float]:
    """CPU seconds of the pool's bare I/O, measured beside the runs: reading every source
    ``tokens.npy`` (512 KiB reads) and writing ``pool_bytes`` to a new file next to the
    output (512 KiB writes), one thread, no conversion. No sampler can copy the pool for less
    on this machine; on tmpfs the writes are serialised by the kernel (one inode lock)."""
    buffer = bytearray(512 << 10)
    started = time.process_time()
    for path in sorted(corpus.glob("*/tokens.npy")):
        descriptor = os.open(path, os.O_RDONLY)
        try:
            position = 0
            while read := os.preadv(descriptor, [buffer], position):
                position += read
        finally:
            os.close(descriptor)
    reading = time.process_time() - started
    scratch = output.with_name(output.name + ".io-floor")
    descriptor = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    started = time.process_time()
    try:
        position = 0
        while position < pool_bytes:
            position += os.pwrite(
                descriptor, buffer[: min(len(buffer), pool_bytes - position)], position
            )
        writing = time.process_time() - started
    finally:
        os.close(descriptor)
        scratch.unlink()
    return reading, writing


def epoch_digest(output: Path, epochs: int) -> str:
    digest = hashlib.sha256()
    for epoch in range(epochs):
        for name in ("inst_start", "inst_len", "resp_start", "resp_len"):
            digest.update((output / f"epoch_{epoch}" / f"{name}.npy").read_bytes())
    return digest.hexdigest()[:16]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the full size")
    parser.add_argument("--rows", type=int, default=1_400_000)
    parser.add_argument("--tokens", type=int, default=1_700_000_000)
    parser.add_argument("--token-dtype", default="<u4", choices=["<u4", "<u2"])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--corpus", type=Path, default=Path("/tmp/data_io_bench/tokenized"))
    shm = Path("/dev/shm")
    default_out = (shm if shm.is_dir() else Path("/tmp")) / "data_io_bench_sampled"
    parser.add_argument("--output", type=Path, default=default_out)
    parser.add_argument("--report", type=Path, default=Path("/tmp/data_io_bench/report.md"))
    parser.add_argument("--keep", action="store_true", help="keep the output afterwards")
    parser.add_argument(
        "--runs", type=int, default=3, help="fresh builds to time (the machine is noisy)"
    )
    args = parser.parse_args()

    rows, tokens = int(args.rows * args.scale), int(args.tokens * args.scale)
    corpus = args.corpus.with_name(f"{args.corpus.name}-{rows}-{args.token_dtype[1:]}")
    args.report.parent.mkdir(parents=True, exist_ok=True)
    ensure_corpus(corpus, rows, tokens, args.token_dtype)
    load = os.getloadavg()[0]
    fresh = []
    for _ in range(args.runs):
        shutil.rmtree(args.output, ignore_errors=True)
        fresh.append(run_sampler(corpus, args.output, args.report, args.epochs))
    reuse = run_sampler(corpus, args.output, args.report, args.epochs)
    metadata = json.loads((args.output / "metadata.json").read_text())
    pool_bytes = (args.output / "tokens.npy").stat().st_size
    floor_read, floor_write = io_floor(corpus, args.output, pool_bytes)
    print(
        f"| corpus | {rows:,} rows, {tokens:,} tokens ({args.token_dtype}), output {args.output} |"
    )
    print("|---|---|")
    # CPU time is reported too: on a shared machine the wall clock includes waiting for cores.
    print(f"| fresh build ({len(fresh)} runs: median (min-max)) | {describe(fresh)} |")
    print(f"| re-run (reuse) | {describe([reuse])} |")
    print(
        f"| pool I/O floor (one thread, no conversion) | reading the sources {floor_read:.2f} s "
        f"CPU + writing {pool_bytes / 1e9:.1f} GB to {args.output.parent} {floor_write:.2f} s "
        f"CPU = {floor_read + floor_write:.2f} s |"
    )
    print(f"| machine | {os.cpu_count()} CPUs, load average {load:.1f} before the runs |")
    print(f"| pool | {metadata['num_tokens']:,} tokens as {metadata['token_dtype']} |")
    print(
        f"| epochs | {args.epochs} x {metadata['rows_per_epoch']:,} rows, digest "
        f"{epoch_digest(args.output, args.epochs)} |"
    )
    if not args.keep:
        shutil.rmtree(args.output, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
