"""``data_io prepare`` on compressed JSONL (gzip, zstd, bzip2, xz; Rust decompresses each
while it reads, ``RawDocuments.open_file(compression=...)``) and on the same rows as Parquet
(``--formats parquet``: pyarrow reads, Rust takes each batch's buffers) and as a ``datasets``
folder (``--formats saved``: ``save_to_disk``, read through ``datasets``' Arrow batches) beside
the same text plain, round
after round, each run its own process; with ``--baseline DIR``, also the build whose ``data_io``
package (its extension inside) is in ``DIR``, run alternately with this one: e.g. the commit
before a change, ``git archive REV data_io | tar -x -C DIR`` plus its built ``_core.abi3.so``.
The corpus: the first ``--mb`` MB of whole rows of the race's documentation
(``work/race/corpus150/main/docs``, built by ``python -m benchmarks.tokenize_corpus
work/race/corpus150 --mb 150``), compressed as the tools' defaults do (gzip -6, zstd -3,
bzip2 -9, xz -6; Parquet with pyarrow's defaults, 65,536 rows a group) once and kept in
``work/prepare_compressed/``. The ``-parts`` formats are the same text in parts that decode on
their own, as parallel compressors write it (``rust/reader/frames``): ``zst-parts`` zstd -3
frames of 4 MiB of text (as ``pzstd`` and the seekable format do), ``gz-parts`` BGZF members of
65,280 bytes of text (``bgzip``'s), ``xz-parts`` ``xz -6 -T2`` (blocks of 24 MiB of text; without
the ``xz`` command, xz streams of 24 MiB), ``bz2-parts`` bzip2 -9 streams of 900,000 bytes of
text (``pbzip2``'s); a run of more than one thread decompresses them on as many threads. Prints the fastest round of
each cell with the spread, and checks that every run, of either build, writes this build's
shards of the plain file.

    .venv/bin/python -m benchmarks.prepare_compressed [--mb 110] [--threads 1,2] [--rounds 3]
        [--formats gz,zst,bz2,xz,parquet,saved,zst-parts,gz-parts,xz-parts,bz2-parts]
        [--tokenizer qwen|null] [--baseline DIR]
        [--read-only]

With ``--read-only`` the children import ``datasets`` and torch (``to_iterable_dataset`` does)
before the clock for a ``saved`` folder: the reading is timed, not the imports.
"""

from __future__ import annotations

import argparse
import bz2
import filecmp
import gzip
import lzma
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.json as pj
import pyarrow.parquet as pq
import zstandard

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.formats.parted import parted  # noqa: E402  the test's writer of parts

DOCS = ROOT / "work" / "race" / "corpus150" / "main" / "docs"
KEPT = ROOT / "work" / "prepare_compressed"
QWEN = Path.home() / ".cache" / "data_io" / "vocab" / "qwen" / "tokenizer.json"

# With --read-only: only read the file into batches of documents, as prepare's reader does.
_READ_CHILD = """
import sys, time
from pathlib import Path
from data_io.formats.raw_reading import DocumentReader
from data_io.formats.raw_text import ReadOptions, ReadStats, expand_inputs
if Path(sys.argv[1]).is_dir():  # a datasets folder: its imports before the clock
    import datasets, torch
class Quiet:
    def describe(self, name): pass
    def advance_bytes(self, count): pass
options = ReadOptions()
sources = expand_inputs([Path(sys.argv[1])], options)[0]
began = time.perf_counter()
for batch in DocumentReader(options, ReadStats(), Quiet()).batches(sources):
    pass
print(time.perf_counter() - began)
"""

# Run in a child: prepare one file; the build is the first data_io on its path.
_CHILD = """
import sys, time
from data_io.cli import main
began = time.perf_counter()
main(["prepare", sys.argv[1], "-o", sys.argv[2], "--tokenizer", sys.argv[3],
      "--threads", sys.argv[4], "-q"])
print(time.perf_counter() - began)
"""

# Where each format's copy of the rows is kept (else rows.jsonl.KIND).
_STORED = {
    "parquet": "rows.parquet",
    "saved": "rows.saved",
    "zst-parts": "rows-parts.jsonl.zst",
    "gz-parts": "rows-parts.jsonl.gz",
    "xz-parts": "rows-parts.jsonl.xz",
    "bz2-parts": "rows-parts.jsonl.bz2",
}

_COMPRESS: dict[str, Callable[[bytes], bytes]] = {
    "gz": lambda data: gzip.compress(data, compresslevel=6),
    "zst": lambda data: zstandard.ZstdCompressor(level=3).compress(data),
    "bz2": lambda data: bz2.compress(data, compresslevel=9),
    "xz": lambda data: lzma.compress(data, preset=6),
    "zst-parts": lambda data: parted(data, ".zst", 4 << 20),
    "gz-parts": lambda data: parted(data, ".gz", 65280),
    "xz-parts": lambda data: _xz_blocks(data),
    "bz2-parts": lambda data: b"".join(  # pbzip2 -9: a stream of 900,000 bytes of text each
        bz2.compress(data[k : k + 900_000], 9) for k in range(0, len(data), 900_000)
    ),
}


def _xz_blocks(data: bytes) -> bytes:
    """``xz -6 -T2``: blocks of 24 MiB of text (xz's default with threads), or streams of that
    much without the command."""
    if shutil.which("xz") is None:
        return parted(data, ".xz", 24 << 20)
    done = subprocess.run(["xz", "-6", "-T2", "-c"], input=data, capture_output=True, check=True)
    return done.stdout


def corpus(megabytes: float, formats: list[str]) -> dict[str, Path]:
    """The first ``megabytes`` of whole rows, plain and in each of ``formats`` (made once)."""
    folder = KEPT / f"{megabytes:g}mb"
    folder.mkdir(parents=True, exist_ok=True)
    plain = folder / "rows.jsonl"
    if not plain.exists():
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
        _write(plain, bytes(rows))
    files = {"plain": plain}
    for kind in formats:
        files[kind] = folder / _STORED.get(kind, f"rows.jsonl.{kind}")
        if files[kind].exists():
            continue
        print(f"writing {plain.name} as {files[kind].name} ...", flush=True)
        if kind == "parquet":
            part = files[kind].with_name(files[kind].name + ".part")
            pq.write_table(pj.read_json(plain).select(["text"]), part, row_group_size=65536)
            part.rename(files[kind])
        elif kind == "saved":
            import datasets  # heavy: only for this format

            part = files[kind].with_name(files[kind].name + ".part")
            texts = pj.read_json(plain).column("text").to_pylist()
            datasets.Dataset.from_dict({"text": texts}).save_to_disk(part)
            part.rename(files[kind])
        else:
            _write(files[kind], _COMPRESS[kind](plain.read_bytes()))
    return files


def _write(path: Path, data: bytes) -> None:
    part = path.with_name(path.name + ".part")
    part.write_bytes(data)
    part.rename(path)


def run(
    build: Path | None, source: Path, out: Path, tokenizer: str, threads: int, read_only: bool
) -> float:
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    if tokenizer == "null":
        env["DATA_IO_ENCODER"] = "null"
    if build is not None:
        env["PYTHONPATH"] = str(build)
    if read_only:  # the reader's threads (a file of parts decompresses on as many)
        env["RAYON_NUM_THREADS"] = str(threads)
    child = [_READ_CHILD, str(source)] if read_only else [_CHILD, str(source), str(out)]
    done = subprocess.run(
        [sys.executable, "-c", *child, str(QWEN), str(threads)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=ROOT if build is None else build,
    )
    return float(done.stdout.strip().splitlines()[-1])


def _stored_bytes(path: Path) -> int:
    """A file's size, or the bytes of the files in a folder."""
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def same_shards(a: Path, b: Path) -> None:
    """``a`` and ``b`` hold the same shards (the metadata's finishing time may differ)."""
    same = filecmp.dircmp(a, b)
    assert not [f for f in same.diff_files if f != "dataset_metadata.json"], same.diff_files
    for split in ("train", "val"):
        sub = same.subdirs.get(split)
        assert sub is None or not sub.diff_files, (split, sub.diff_files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=110)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--formats", default="gz,zst,bz2,xz,parquet")
    parser.add_argument("--tokenizer", choices=("qwen", "null"), default="qwen")
    parser.add_argument("--baseline", type=Path, help="a folder holding another build's data_io")
    parser.add_argument(
        "--read-only", action="store_true", help="time reading into batches only, no prepare"
    )
    args = parser.parse_args()
    sources = corpus(args.mb, args.formats.split(","))
    builds: dict[str, Path | None] = {"this build": None}
    if args.baseline is not None:
        builds["baseline"] = args.baseline.resolve()
    with tempfile.TemporaryDirectory(prefix="data_io_prepare_compressed_") as tmp:
        folder = Path(tmp)
        times: dict[tuple[str, int, str], list[float]] = {}
        for threads in (int(t) for t in args.threads.split(",")):
            for round_no in range(args.rounds):
                # Builds in turn, the first of each round alternating: on this VM a process
                # can run slower for the one just before it (the memory it gave back).
                order = list(builds.items())
                if round_no % 2:
                    order.reverse()
                for kind, source in sources.items():
                    for name, build in order:
                        out = folder / f"out_{kind}_{name.replace(' ', '_')}"
                        seconds = run(build, source, out, args.tokenizer, threads, args.read_only)
                        times.setdefault((kind, threads, name), []).append(seconds)
                    if args.read_only:
                        continue
                    # Every file, read by either build, gives this build's shards of the text.
                    for name in builds:
                        tag = name.replace(" ", "_")
                        same_shards(folder / "out_plain_this_build", folder / f"out_{kind}_{tag}")
    text_mb = sources["plain"].stat().st_size / 1e6
    what = "reading only" if args.read_only else f"tokenizer {args.tokenizer}"
    print(f"\n{text_mb:.1f} MB of JSONL text, {what}, fastest of "
          f"{args.rounds} rounds (all rounds in brackets), seconds:\n")  # fmt: skip
    columns = list(builds)
    print("| file | MB stored | threads | " + " | ".join(columns) + " | vs plain |"
          + (" vs baseline |" if len(columns) > 1 else ""))  # fmt: skip
    print(
        "|---|---:|---:|" + "---|" * len(columns) + "---:|" + ("---:|" if len(columns) > 1 else "")
    )
    spread = lambda s: f"{min(s):.2f} ({', '.join(f'{x:.2f}' for x in s)})"  # noqa: E731
    for (kind, threads, name), seconds in times.items():
        if name != "this build":
            continue
        stored = _stored_bytes(sources[kind]) / 1e6
        cells = [spread(times[(kind, threads, column)]) for column in columns]
        plain = min(times[("plain", threads, "this build")])
        name = {"plain": ".jsonl", "parquet": ".parquet", "saved": "save_to_disk folder"}.get(
            kind, sources[kind].name.removeprefix("rows")
        )
        row = f"| {name} | {stored:.1f} | {threads} | "
        row += " | ".join(cells) + f" | {min(seconds) / plain:.2f}x |"
        if len(columns) > 1:
            row += f" {min(times[(kind, threads, 'baseline')]) / min(seconds):.2f}x |"
        print(row)


if __name__ == "__main__":
    began = time.perf_counter()
    main()
    print(f"\n({time.perf_counter() - began:.0f} s)")
