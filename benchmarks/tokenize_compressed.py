"""``data_io tokenize`` on one compressed JSONL file of rows, as one stream and as parts that
decode on their own (``rust/reader/frames``: zstd frames as ``pzstd`` writes them, BGZF members
as ``bgzip`` does), beside the plain file, 1 and 2 threads, each run its own process. The rows:
the race's (``work/race/corpus150/main/rows``, built by ``python -m benchmarks.tokenize_corpus
work/race/corpus150 --mb 150``) joined into one file, compressed once into
``work/tokenize_compressed/``. Qwen's vocabulary. Prints seconds, fastest of ``--rounds``, and
checks that every run writes the plain file's tokens.

    .venv/bin/python -m benchmarks.tokenize_compressed [--rounds 3] [--threads 1,2]
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import zstandard

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.formats.parted import parted  # noqa: E402  the tests' writer of parts

ROWS = ROOT / "work" / "race" / "corpus150" / "main" / "rows"
KEPT = ROOT / "work" / "tokenize_compressed"
QWEN = Path.home() / ".cache" / "data_io" / "vocab" / "qwen" / "tokenizer.json"
FILES = {
    "rows.jsonl": lambda data: data,
    "rows.jsonl.zst": lambda data: zstandard.ZstdCompressor(level=3).compress(data),
    "rows-frames.jsonl.zst": lambda data: parted(data, ".zst", 4 << 20),
    "rows.jsonl.gz": lambda data: gzip.compress(data, compresslevel=6),
    "rows-bgzf.jsonl.gz": lambda data: parted(data, ".gz", 65280),
}
_CHILD = """
import sys, time
from data_io.tokenize import tokenize
began = time.perf_counter()
tokenize([sys.argv[1]], sys.argv[2], tokenizer_path=sys.argv[3], threads=int(sys.argv[4]),
         progress=False)
print(time.perf_counter() - began)
"""


def inputs() -> dict[str, Path]:
    KEPT.mkdir(parents=True, exist_ok=True)
    data = b"".join(path.read_bytes() for path in sorted(ROWS.glob("*.jsonl")))
    made = {}
    for name, compress in FILES.items():
        path = KEPT / name
        if not path.exists():
            part = path.with_name(path.name + ".part")
            part.write_bytes(compress(data))
            part.rename(path)
        made[name] = path
    return made


def run(source: Path, out: Path, threads: int) -> float:
    shutil.rmtree(out, ignore_errors=True)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(source), str(out), str(QWEN), str(threads)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return float(done.stdout.strip().splitlines()[-1])


def tokens(out: Path) -> np.ndarray:
    (task,) = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return np.load(task / "tokens.npy")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", default="1,2")
    args = parser.parse_args()
    files = inputs()
    with tempfile.TemporaryDirectory(prefix="data_io_tokenize_compressed_") as tmp:
        plain = Path(tmp) / "plain"
        run(files["rows.jsonl"], plain, 1)
        reference = tokens(plain)
        print(f"{files['rows.jsonl'].stat().st_size / 1e6:.0f} MB of rows, Qwen, seconds, "
              f"fastest of {args.rounds} (all in brackets)\n")  # fmt: skip
        print("| file | MB stored | threads | seconds |")
        print("|---|---:|---:|---|")
        for threads in (int(t) for t in args.threads.split(",")):
            for name, path in files.items():
                times = []
                for _ in range(args.rounds):
                    out = Path(tmp) / "out"
                    times.append(run(path, out, threads))
                    assert np.array_equal(tokens(out), reference), name
                spread = ", ".join(f"{t:.2f}" for t in times)
                stored = path.stat().st_size / 1e6
                print(f"| {name} | {stored:.1f} | {threads} | {min(times):.2f} ({spread}) |")


if __name__ == "__main__":
    main()
