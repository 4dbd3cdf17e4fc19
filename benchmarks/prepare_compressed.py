"""``data_io prepare`` on compressed JSONL: Rust decompressing gzip and zstd while it reads
(``RawDocuments.open_file(compression=...)``) against Python decompressing them and handing
the text over in pieces (what prepare did before; the same build, with
``raw_reading._READ_IN_RUST`` narrowed to plain files), round after round, each run its own
process. The corpus: the first ``--mb`` MB of whole rows of the race's documentation
(``work/race/corpus150/main/docs``, built by ``python -m benchmarks.tokenize_corpus
work/race/corpus150 --mb 150``), compressed with gzip -6 and zstd -3. Prints the fastest
round of each cell with the spread, and checks that both readings write the same shards.

    .venv/bin/python -m benchmarks.prepare_compressed [--mb 110] [--threads 1,2] [--rounds 3]
        [--tokenizer qwen|null]
"""

from __future__ import annotations

import argparse
import filecmp
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import zstandard

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "work" / "race" / "corpus150" / "main" / "docs"
QWEN = Path.home() / ".cache" / "data_io" / "vocab" / "qwen" / "tokenizer.json"

# Run in a child: prepare one file, the reading chosen by argv[1] ("rust" or "python").
_CHILD = """
import sys, time
import data_io.formats.raw_reading as reading
if sys.argv[1] == "python":
    reading._READ_IN_RUST = (None,)
from data_io.cli import main
began = time.perf_counter()
main(["prepare", sys.argv[2], "-o", sys.argv[3], "--tokenizer", sys.argv[4],
      "--threads", sys.argv[5], "-q"])
print(time.perf_counter() - began)
"""


def corpus(folder: Path, megabytes: float) -> dict[str, Path]:
    """The first ``megabytes`` of whole rows, plain, gzip and zstd."""
    limit = int(megabytes * 1e6)
    rows = bytearray()
    for path in sorted(DOCS.glob("*.jsonl")):
        with path.open("rb") as lines:
            for line in lines:
                if len(rows) + len(line) > limit:
                    break
                rows += line
        if len(rows) >= limit * 0.99:
            break
    plain = folder / "rows.jsonl"
    plain.write_bytes(rows)
    (folder / "rows.jsonl.gz").write_bytes(gzip.compress(bytes(rows), compresslevel=6))
    (folder / "rows.jsonl.zst").write_bytes(zstandard.ZstdCompressor(level=3).compress(rows))
    return {
        kind: folder / f"rows.jsonl{suffix}" for kind, suffix in (("gz", ".gz"), ("zst", ".zst"))
    }


def run(reading: str, source: Path, out: Path, tokenizer: str, threads: int) -> float:
    shutil.rmtree(out, ignore_errors=True)
    env_null = {"DATA_IO_ENCODER": "null"} if tokenizer == "null" else {}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, reading, str(source), str(out), str(QWEN), str(threads)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **env_null, "OPENBLAS_NUM_THREADS": "1"},
        cwd=ROOT,
    )
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=110)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokenizer", choices=("qwen", "null"), default="qwen")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="data_io_prepare_compressed_") as tmp:
        folder = Path(tmp)
        sources = corpus(folder, args.mb)
        text_mb = (folder / "rows.jsonl").stat().st_size / 1e6
        times: dict[tuple, list[float]] = {}
        for threads in (int(t) for t in args.threads.split(",")):
            for _ in range(args.rounds):
                for kind, source in sources.items():
                    for reading in ("python", "rust"):
                        out = folder / f"out_{reading}_{kind}"
                        seconds = run(reading, source, out, args.tokenizer, threads)
                        times.setdefault((kind, threads, reading), []).append(seconds)
                    same = filecmp.dircmp(
                        folder / f"out_python_{kind}", folder / f"out_rust_{kind}"
                    )
                    # The metadata's finishing time differs; the shards must not.
                    assert not [f for f in same.diff_files if f != "dataset_metadata.json"], same
                    for split in ("train", "val"):
                        sub = same.subdirs.get(split)
                        assert sub is None or not sub.diff_files, (split, sub.diff_files)
        print(f"\n{text_mb:.1f} MB of JSONL text, tokenizer {args.tokenizer}, fastest of "
              f"{args.rounds} rounds (all rounds in brackets), seconds:\n")  # fmt: skip
        print("| file | threads | Python decompresses | Rust decompresses | speed-up |")
        print("|---|---:|---|---|---:|")
        for (kind, threads, reading), seconds in times.items():
            if reading != "rust":
                continue
            python = times[(kind, threads, "python")]
            spread = lambda s: f"{min(s):.2f} ({', '.join(f'{x:.2f}' for x in s)})"  # noqa: E731
            print(f"| .jsonl.{kind} | {threads} | {spread(python)} | {spread(seconds)} "
                  f"| {min(python) / min(seconds):.2f}x |")  # fmt: skip


if __name__ == "__main__":
    began = time.perf_counter()
    main()
    print(f"\n({time.perf_counter() - began:.0f} s)")
