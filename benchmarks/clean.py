"""Benchmark of the cleaning stage: rows/s and peak RSS on synthetic inputs of any size.

Two cleaners, each run as ``python -m <module> --source ... --out ...`` in a child process:

- ``flan`` (grouped Parquet, vectorised): FLAN-style shards, ``--tasks`` task names spread over
  four subsets, one output file per (subset, task);
- ``gsm8k_train`` (flat JSON Lines, record by record): a local `hf download`-style copy read
  through ``datasets`` (streaming), one Python call per row.

Peak RSS is the child's own high-water mark (``VmHWM``, read when it exits; ``ru_maxrss`` would
include the parent's at fork time). Inputs are generated with pyarrow, without a Python loop.

    python -m benchmarks.clean                      # 5,000,000 rows per cleaner
    python -m benchmarks.clean --rows 200000        # a quick run while developing
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

REPO_ROOT = Path(__file__).resolve().parents[1]
SUBSETS = ("cot_zsopt_data", "flan_zsopt_data", "niv2_zsopt_data", "t0_fsopt_data")
SHARD_ROWS = 500_000

# Runs a cleaner module in-process and reports its own peak RSS on stderr when it ends.
_CHILD = """
import runpy, sys
from pathlib import Path
sys.argv = [sys.argv[1], *sys.argv[2:]]
try:
    runpy.run_module(sys.argv[0], run_name="__main__")
finally:
    status = Path("/proc/self/status").read_text()
    peak = next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]
    print(f"PEAK_KIB {peak}", file=sys.stderr)
"""


def _words(rng: np.random.Generator, count: int, length: int) -> pa.Array:
    """``count`` random lowercase strings of about ``length`` characters (a vocabulary pool)."""
    letters = rng.integers(ord("a"), ord("z") + 1, size=(count, length), dtype=np.uint8)
    letters[:, rng.integers(3, 9, size=length // 6).cumsum() % length] = ord(" ")
    data = pa.py_buffer(letters.tobytes())
    offsets = pa.py_buffer((np.arange(count + 1, dtype=np.int32) * length).tobytes())
    return pa.Array.from_buffers(pa.string(), count, [None, offsets, data])


def _pick(rng: np.random.Generator, pool: pa.Array, rows: int) -> pa.Array:
    return pool.take(pa.array(rng.integers(0, len(pool), size=rows)))


def make_flan(root: Path, rows: int, tasks: int, rng: np.random.Generator) -> int:
    prompts, answers = _words(rng, 20_000, 300), _words(rng, 5_000, 40)
    names = pa.array(
        [f"task{index:04d}_synthetic/{'nli' if index % 3 else 'qa'}" for index in range(tasks)]
    )
    written = 0
    shard = 0
    while written < rows:
        n = min(SHARD_ROWS, rows - written)
        subset = SUBSETS[shard % len(SUBSETS)]
        serial = pc.cast(pa.array(np.arange(written, written + n)), pa.string())
        table = pa.table(
            {
                "inputs": pc.binary_join_element_wise(_pick(rng, prompts, n), serial, " #"),
                "targets": _pick(rng, answers, n),
                "_template_idx": pa.array(rng.integers(0, 10, size=n)),
                "_task_source": pa.repeat(pa.scalar(subset.split("_")[0], pa.string()), n),
                "_task_name": _pick(rng, names, n),
                "_template_type": pa.repeat(pa.scalar("zs_opt", pa.string()), n),
            }
        )
        path = root / subset / f"part.{shard}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path, row_group_size=100_000)
        written += n
        shard += 1
    return sum(p.stat().st_size for p in root.rglob("*.parquet"))


def make_gsm8k(root: Path, rows: int, rng: np.random.Generator) -> int:
    questions, rationales = _words(rng, 20_000, 200), _words(rng, 20_000, 150)
    shards = max(1, -(-rows // SHARD_ROWS))
    for shard in range(shards):
        n = min(SHARD_ROWS, rows - shard * SHARD_ROWS)
        answer = pc.cast(pa.array(rng.integers(-999, 99_999, size=n)), pa.string())
        table = pa.table(
            {
                "question": pc.binary_join_element_wise(_pick(rng, questions, n), " How many?", ""),
                "answer": pc.binary_join_element_wise(_pick(rng, rationales, n), answer, "\n#### "),
            }
        )
        path = root / "main" / f"train-{shard:05d}-of-{shards:05d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path, row_group_size=100_000)
    readme = "---\nconfigs:\n- config_name: main\n  data_files:\n  - split: train\n    path: main/train-*\n---\n"
    (root / "README.md").write_text(readme)
    return sum(p.stat().st_size for p in root.rglob("*.parquet"))


def run(module: str, source: Path, out: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHILD,
            module,
            "--source",
            str(source),
            "--out",
            str(out),
            # Not --quiet: that also drops the summary, whose first line is parsed below. Its
            # stderr is not a terminal, so no progress bar is drawn either way.
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{module} failed:\n{done.stderr}")
    peak = int(
        next(line for line in done.stderr.splitlines() if line.startswith("PEAK_KIB")).split()[1]
    )
    lines = done.stdout.splitlines()
    if not lines:
        raise SystemExit(f"{module} printed no summary to parse:\n{done.stderr}")
    summary = lines[0]
    records = int(summary.split(": ", 1)[1].split(" records read")[0].replace(",", ""))
    return {"seconds": seconds, "records": records, "peak_rss_mib": peak / 1024, "summary": summary}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rows", type=int, default=5_000_000, help="rows per cleaner (default 5,000,000)"
    )
    parser.add_argument("--tasks", type=int, default=1_000, help="FLAN task names (output files)")
    parser.add_argument(
        "--workdir", type=Path, help="keep inputs and outputs here (default: a temp dir)"
    )
    parser.add_argument("--only", choices=("flan", "gsm8k_train"), help="run one of the two")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-clean-") as scratch:
        work = args.workdir or Path(scratch)
        rng = np.random.default_rng(0)
        cases = []
        if args.only in (None, "flan"):
            size = make_flan(work / "FLAN", args.rows, args.tasks, rng)
            cases.append(
                ("flan", "pipe_clustered.clean_flan", work / "FLAN", work / "out_flan", size)
            )
        if args.only in (None, "gsm8k_train"):
            size = make_gsm8k(work / "gsm8k", args.rows, rng)
            cases.append(
                (
                    "gsm8k_train",
                    "pipe.clean_gsm8k_train",
                    work / "gsm8k",
                    work / "out" / "gsm8k.jsonl",
                    size,
                )
            )
        results = {}
        for name, module, source, out, size in cases:
            result = run(module, source, out)
            result["input_parquet_mib"] = size / 2**20
            result["rows_per_second"] = result["records"] / result["seconds"]
            results[name] = result
            print(
                f"{name:<12} {result['records']:>11,} rows  {result['seconds']:7.1f} s  "
                f"{result['rows_per_second']:>10,.0f} rows/s  peak RSS {result['peak_rss_mib']:6.0f} MiB  "
                f"(input {result['input_parquet_mib']:,.0f} MiB Parquet)"
            )
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
