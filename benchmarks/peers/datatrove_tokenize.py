"""The field's baseline for benchmarks/prepare.py: datatrove's tokenization step on our input.

Runs datatrove's ``LocalPipelineExecutor`` with ``JsonlReader`` -> ``DocumentTokenizer`` over a
folder of ``.jsonl`` files (a "text" field each), with a local tokenizer.json, and prints ONE JSON
line on stdout: the datatrove version, wall and CPU seconds of the pipeline's run, the input
bytes, the documents and tokens (from datatrove's own stats: the reader's "documents", the
tokenizer's "tokens", EOS included) and the peak RSS. Everything else (datatrove's logs) goes to
stderr. It runs under its own venv (work/bench_venvs/datatrove), so it never imports data_io:

    work/bench_venvs/datatrove/bin/python benchmarks/peers/datatrove_tokenize.py \\
        --input DIR --tokenizer tokenizer.json [--eos-token TEXT] [--workers N] --output DIR

The encoder's own threads (HF tokenizers' rayon pool) follow the environment, as in
benchmarks/prepare.py: set RAYON_NUM_THREADS (and TOKENIZERS_PARALLELISM=true) to pin them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import sys
import time
from importlib.metadata import version
from pathlib import Path

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.tokens import DocumentTokenizer
from datatrove.utils.stats import PipelineStats


def _stat_total(stats: PipelineStats, step: int, metric: str) -> int:
    """One metric of the pipeline's step number `step`, summed over all tasks."""
    return int(stats.stats[step].stats[metric].total)


def _cpu_seconds() -> float:
    """User + system CPU of this process and its reaped children (the pool's workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, required=True, help="folder of .jsonl files")
    parser.add_argument("--tokenizer", type=Path, required=True, help="a local tokenizer.json")
    parser.add_argument("--eos-token", default="<|endoftext|>", help="'' for no EOS")
    parser.add_argument("--workers", type=int, default=1, help="datatrove tasks = workers")
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()

    inputs = sorted(args.input.glob("*.jsonl"))
    if not inputs or not args.tokenizer.is_file():
        sys.exit(f"no .jsonl in {args.input} or no file {args.tokenizer}")
    args.output.mkdir(parents=True, exist_ok=True)
    executor = LocalPipelineExecutor(
        pipeline=[
            # the same files we count as input_bytes: *.jsonl at the top of the folder
            JsonlReader(str(args.input), glob_pattern="*.jsonl", recursive=False),
            DocumentTokenizer(
                output_folder=str(args.output),
                # load_tokenizer() takes an existing file path as Tokenizer.from_file: no Hub
                tokenizer_name_or_path=str(args.tokenizer.resolve()),
                # set as a TemplateProcessing post-processor: "$A <EOS>", one per document
                eos_token=args.eos_token or None,
                # on by default: a second pass that rewrites each task's file in random order
                shuffle_documents=False,
            ),
        ],
        tasks=args.workers,
        workers=args.workers,
        logging_dir=str(args.output / "logs"),
        # a rerun into the same output folder must run again, not skip "completed" tasks
        skip_completed=False,
        # fork, not the default forkserver: the pool's workers are then our own children, whose
        # CPU time RUSAGE_CHILDREN counts once the pool has joined them
        start_method="fork",
    )

    cpu0, wall0 = _cpu_seconds(), time.perf_counter()
    # datatrove logs to stderr (loguru); anything else that prints must not reach our stdout
    with contextlib.redirect_stdout(sys.stderr):
        stats = executor.run()
    wall, cpu = time.perf_counter() - wall0, _cpu_seconds() - cpu0
    # ru_maxrss is in KiB on Linux; RUSAGE_CHILDREN gives the largest child, not a sum
    peak_kib = max(
        resource.getrusage(who).ru_maxrss
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )

    report = {
        "datatrove": version("datatrove"),
        "seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
        "input_bytes": sum(path.stat().st_size for path in inputs),
        "documents": _stat_total(stats, 0, "documents"),
        "tokens": _stat_total(stats, 1, "tokens"),
        "peak_rss_mb": round(peak_kib / 1024, 1),
        "workers": args.workers,
        "counts_from": "datatrove stats",
    }
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
