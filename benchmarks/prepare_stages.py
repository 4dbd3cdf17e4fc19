"""Where ``data_io prepare``'s Python side spends its time, stage by stage (a harness, not a test).

Each stage runs over the whole corpus on its own, timed (the documents it needs are made, untimed,
by the stages before it): reading (chunks, lines, UTF-8 decode, blocks), cleaning (NFC, the
whitespace regexes, the short-line filter; then the Rust cleaner `prepare` runs), hashing, the split hash, and the whole pipeline with
the nearly free ``char`` tokenizer. MB/s counts input bytes on disk.

    .venv/bin/python -m benchmarks.prepare_stages FOLDER [--jsonl] [--parquet] [--profile]

``--jsonl`` / ``--parquet`` write a copy of FOLDER's documents in that format (under /tmp) and
time reading it; ``--profile`` prints cProfile's top functions for the whole pipeline.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [str(_HERE.parent)] + [p for p in sys.path if Path(p or ".").resolve() != _HERE]

from data_io.formats.raw_text import (  # noqa: E402
    ReadOptions,
    ReadStats,
    _chunks,
    _pieces,
    expand_inputs,
    read_documents,
)
from data_io.prepare import normalize as nz  # noqa: E402
from data_io.prepare.dedup import hash_texts  # noqa: E402
from data_io.prepare.normalize import (  # noqa: E402
    CleanOptions,
    CleanStats,
    clean_batch,
    clean_texts,
)
from data_io.prepare.split import is_val  # noqa: E402


def _timed(name: str, size: int, work) -> object:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    result = work()
    seconds = time.perf_counter() - started
    print(f"{name:<34} {seconds:7.2f} s {size / 2**20 / seconds:8.1f} MB/s")
    return result


def _read_all(sources) -> list[str]:  # type: ignore[no-untyped-def]
    stats, read = ReadStats(), ReadOptions()
    return [d for s in sources for d in read_documents(s, read, stats)]


def _stages(sources, size: int) -> None:  # type: ignore[no-untyped-def]
    _timed("read: chunks", size, lambda: sum(len(c) for s in sources for c in _chunks(s, None)))
    _timed("read: pieces", size, lambda: sum(1 for s in sources for _ in _pieces(s, None)))
    lines = [raw for s in sources for _, _, raw in _pieces(s, None)]
    _timed("read: decode pieces", size, lambda lines=lines: [raw.decode() for raw in lines])
    del lines
    texts = _timed("read: documents (all)", size, lambda: _read_all(sources))
    stats = CleanStats()
    _timed(
        "clean: NFC check", size, lambda: [nz.unicodedata.is_normalized("NFC", t) for t in texts]
    )
    _timed("clean: _CONTROL.sub", size, lambda: [nz._CONTROL.sub("", t) for t in texts])
    _timed(
        "clean: _TRAILING_SPACE.sub", size, lambda: [nz._TRAILING_SPACE.sub("", t) for t in texts]
    )
    _timed("clean: _BLANK_RUNS.sub", size, lambda: [nz._BLANK_RUNS.sub("\n\n", t) for t in texts])
    _timed("clean: normalize (all)", size, lambda: [nz._normalize(t, stats) for t in texts])
    _timed("clean: short lines", size, lambda: [nz._drop_short_lines(t, 2, stats) for t in texts])
    _timed("clean: clean_batch (Python)", size, lambda: clean_batch(texts, CleanOptions(), stats))
    cleaned = _timed(
        "clean: clean_texts (Rust, what prepare runs)",
        size,
        lambda: [
            text
            for start in range(0, len(texts), 2048)
            for text in clean_texts(texts[start : start + 2048], CleanOptions(), stats)
        ],
    )
    _timed("utf-8 encode", size, lambda: [t.encode() for t in cleaned])
    hashes = _timed("hash_texts", size, lambda: hash_texts(cleaned))
    _timed("is_val", size, lambda: is_val(hashes, 0, 0.01))


def _pipeline(inputs: list[Path], size: int, profile: bool) -> None:
    from data_io.prepare import prepare

    with tempfile.TemporaryDirectory() as tmp:
        work = lambda: prepare(inputs, Path(tmp) / "out", tokenizer="char", progress=False)  # noqa: E731
        if not profile:
            _timed("pipeline (char tokenizer)", size, work)
            return
        profiler = cProfile.Profile()
        profiler.runcall(work)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(18)


def _copy_as(texts: list[str], kind: str, folder: Path) -> Path:
    if kind == "jsonl":
        path = folder / "corpus.jsonl"
        with open(path, "w", encoding="utf-8") as out:
            out.writelines(json.dumps({"text": t}) + "\n" for t in texts)
        return path
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = folder / "corpus.parquet"
    pq.write_table(pa.table({"text": texts}), path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--jsonl", action="store_true")
    parser.add_argument("--parquet", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--no-stages", action="store_true")
    args = parser.parse_args()
    sources, _ = expand_inputs([args.folder], ReadOptions())
    size = sum(s.size for s in sources)
    print(f"{len(sources)} files, {size / 2**20:.1f} MB")
    if not args.no_stages:
        _stages(sources, size)
    _pipeline([args.folder], size, args.profile)
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("jsonl", "parquet"):
            if getattr(args, kind):
                path = _copy_as(_read_all(sources), kind, Path(tmp))
                (copy,), _ = expand_inputs([path], ReadOptions())
                _timed(f"read: {kind} documents", copy.size, lambda c=copy: _read_all([c]))
                _pipeline([path], copy.size, args.profile)


if __name__ == "__main__":
    main()
