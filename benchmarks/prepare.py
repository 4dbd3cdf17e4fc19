"""Throughput and memory of ``data_io prepare`` end to end, beside the HF ``tokenizers``
``encode_batch`` alone on the same documents (the encoder's own speed: the target is >= 80%).

Corpus (real English text, rebuilt offline from Debian packages, >= 150 MB by default):
the kernel documentation (``linux-doc-6.1``: reStructuredText and text files, downloaded once
with ``apt-get download``), the Python 3.11 documentation sources (``python3.11-doc``, see
benchmarks/corpus.py) and, to reach the size, the Debian changelogs and docs under
``/usr/share/doc`` of this machine. Each source file becomes one ``.txt`` input whose documents
are its blank-line-separated blocks.

Every measurement runs in its own process (so that the encoder's thread count and the peak RSS
are its own): prepare with 1 and all threads, with and without de-duplication, the pipeline
floor (prepare with the nearly free ``char`` tokenizer: the Python side alone), and the
baseline: ``tokenizers.Tokenizer.encode_batch`` over the same documents, after reading and
normalising them (not timed), with 1 and all threads. MB/s counts input text bytes.

    .venv/bin/python -m benchmarks.prepare [--workdir work/bench_prepare] [--mb 150]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
ROOT = _HERE.parent
# benchmarks/tokenize.py would shadow the standard library's `tokenize`: take this folder off
# the import path (the corpus helper is loaded by its path) and put the checkout on it.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != _HERE]
TOKENIZER = ROOT / "trained_tokenizers" / "bpe" / "tokenizer.json"
CACHE = Path.home() / ".cache" / "data_io" / "debian-docs"
LINUX_DOC = "linux-doc-6.1"


def _linux_docs() -> Path:
    extracted = _corpus_module().extract_deb(LINUX_DOC, CACHE / "x")
    return extracted / "usr" / "share" / "doc" / LINUX_DOC


def _corpus_module():
    """benchmarks/corpus.py, loaded by its path (this folder is kept off the import path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("corpus", _HERE / "corpus.py")
    assert spec is not None and spec.loader is not None
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    return corpus


def _python_docs() -> Path:
    return _corpus_module().docs_sources()


def _text_files(root: Path) -> list[Path]:
    """Readable text files under ``root`` (plain or gzip), sorted; HTML and binaries skipped."""
    keep = []
    for path in sorted(root.rglob("*")):
        name = path.name.lower()
        if not path.is_file() or any(name.endswith(s) for s in (".html", ".png", ".svg", ".js")):
            continue
        if name.endswith((".rst", ".txt", ".gz")) or "changelog" in name or "readme" in name:
            keep.append(path)
    return keep


def build_corpus(folder: Path, megabytes: int) -> Path:
    """Write ``folder/corpus/NNNNN.txt`` until ``megabytes`` of text (once; reused after)."""
    corpus = folder / "corpus"
    done = corpus / ".complete"
    if done.is_file() and int(done.read_text()) >= megabytes:
        return corpus
    shutil.rmtree(corpus, ignore_errors=True)
    corpus.mkdir(parents=True)
    total, number = 0, 0
    for root in (_linux_docs(), _python_docs(), Path("/usr/share/doc")):
        for path in _text_files(root):
            try:
                data = (
                    gzip.decompress(path.read_bytes())
                    if path.suffix == ".gz"
                    else (path.read_bytes())
                )
                text = data.decode("utf-8")
            except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile):
                continue  # binary or non-UTF-8: not prose
            (corpus / f"{number:05d}.txt").write_text(text, encoding="utf-8")
            number += 1
            total += len(text.encode("utf-8"))
            if total >= megabytes << 20:
                done.write_text(str(megabytes))
                return corpus
    raise SystemExit(f"only {total >> 20} MB of text found; pass a smaller --mb")


# -- children: one measurement each ---------------------------------------------------------------
def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_prepare(corpus: Path, out: Path, dedup: bool, memory: str, tokenizer: str) -> dict:
    from data_io.prepare import prepare

    started = time.perf_counter()
    result = prepare(
        [corpus], out, tokenizer=tokenizer, dedup=dedup, dedup_memory=memory, progress=False
    )
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "text_bytes": result.bytes_read,
        "documents": result.documents_read,
        "duplicates": result.duplicates,
        "tokens": sum(result.tokens.values()),
        "dedup_peak_bytes": result.dedup_peak_bytes,
        "dedup_runs": result.dedup_runs,
        "peak_rss_mb": _peak_rss_mb(),
    }


def _prepared_texts(corpus: Path) -> tuple[list[str], int]:
    """prepare's documents (read and normalised, untimed) and the corpus size on disk."""
    from data_io.formats.raw_text import ReadOptions, ReadStats, expand_inputs, read_documents
    from data_io.prepare.normalize import CleanOptions, CleanStats, clean_batch

    read = ReadOptions()
    sources, _ = expand_inputs([corpus], read)
    stats = ReadStats()
    texts = clean_batch(
        [d for s in sources for d in read_documents(s, read, stats)], CleanOptions(), CleanStats()
    )
    return texts, sum(s.size for s in sources)


def child_baseline(corpus: Path, engine: str) -> dict:
    """An encoder alone over prepare's documents, in prepare's batches: HF tokenizers'
    ``encode_batch`` ("baseline"), or data_io's own encoder ("encoder": the seam prepare uses)."""
    texts, size = _prepared_texts(corpus)
    if engine == "encoder":
        from data_io.tokenizer.encoder import TextEncoder

        ours = TextEncoder(TOKENIZER)

        def encode(batch: list[str]) -> int:
            return len(ours.encode_batch(batch).ids)
    else:
        from tokenizers import Tokenizer

        hf = Tokenizer.from_file(str(TOKENIZER))

        def encode(batch: list[str]) -> int:
            return sum(len(e.ids) for e in hf.encode_batch(batch, add_special_tokens=False))

    started = time.perf_counter()
    tokens = sum(encode(texts[start : start + 2048]) for start in range(0, len(texts), 2048))
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "text_bytes": size, "tokens": tokens, "peak_rss_mb": _peak_rss_mb()}


def _child(kind: str, threads: int, corpus: Path, out: Path, dedup: bool, memory: str) -> dict:
    env = {**os.environ, "RAYON_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "true"}
    tokenizer = "char" if kind == "floor" else str(TOKENIZER)
    spec = json.dumps(
        {
            "kind": kind,
            "corpus": str(corpus),
            "out": str(out),
            "dedup": dedup,
            "memory": memory,
            "tokenizer": tokenizer,
        }
    )
    shutil.rmtree(out, ignore_errors=True)
    done = subprocess.run(
        [sys.executable, __file__, "--child", spec],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    shutil.rmtree(out, ignore_errors=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def print_saved(path: Path, memory: str) -> None:
    """The table of a finished run, from its results.json."""
    _table(json.loads(path.read_text()), memory)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=ROOT / "work" / "bench_prepare")
    parser.add_argument("--mb", type=int, default=150, help="corpus size (default: 150)")
    parser.add_argument("--dedup-memory", default="8MB", help="budget of the dedup runs")
    parser.add_argument(
        "--floor-only", action="store_true", help="only the pipeline floor rows (char tokenizer)"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        spec = json.loads(args.child)
        if spec["kind"] in ("prepare", "floor"):
            report = child_prepare(
                Path(spec["corpus"]),
                Path(spec["out"]),
                spec["dedup"],
                spec["memory"],
                spec["tokenizer"],
            )
        else:
            report = child_baseline(Path(spec["corpus"]), spec["kind"])
        print(json.dumps(report))
        return
    corpus = build_corpus(args.workdir, args.mb)
    cores = os.cpu_count() or 1
    rows = []
    for threads in sorted({1, cores}):
        for name, kind, dedup in (
            ("HF tokenizers encode_batch alone", "baseline", False),
            ("data_io encoder alone (the seam prepare uses)", "encoder", False),
            ("data_io prepare, no dedup", "prepare", False),
            ("data_io prepare, dedup", "prepare", True),
            # The `char` tokenizer costs next to nothing: what is left is prepare's own work
            # (read, clean, hash, spool, pass 2), the most any encoder could let it reach.
            ("data_io prepare, dedup, char tokenizer (pipeline floor)", "floor", True),
        ):
            if args.floor_only and kind != "floor":
                continue
            report = _child(kind, threads, corpus, args.workdir / "out", dedup, args.dedup_memory)
            report.update(name=name, threads=threads)
            rows.append(report)
            print(json.dumps(report), file=sys.stderr)
    (args.workdir / "results.json").write_text(json.dumps(rows, indent=1))
    _table(rows, args.dedup_memory)


def _table(rows: list[dict], memory: str) -> None:
    print(
        "| run | threads | MB/s | MB/s per core | vs HF encode_batch | vs data_io encoder "
        "| peak RSS (MB) | notes |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    base = {r["threads"]: r for r in rows if r["name"].startswith("HF")}
    ours = {r["threads"]: r for r in rows if r["name"].startswith("data_io encoder")}

    def rate(r: dict) -> float:
        return r["text_bytes"] / r["seconds"]

    def versus(reference: dict, r: dict) -> str:
        # By rate, not time: prepare reads a file whose content it has seen once (a copy in the
        # corpus is skipped), the encoders alone take every file.
        if "floor" in r["name"] or r["threads"] not in reference:
            return "—"
        return f"{rate(r) / rate(reference[r['threads']]):.0%}"

    for r in rows:
        mb_s = r["text_bytes"] / 2**20 / r["seconds"]
        ratio_text = f"{versus(base, r)} | {versus(ours, r)}"
        notes = f"{r['text_bytes'] / 2**20:.0f} MB, {r['tokens']:,} tokens"
        if r.get("dedup_runs"):
            notes += (
                f"; {r['duplicates']:,} duplicates; dedup budget {memory}, peak "
                f"{r['dedup_peak_bytes'] / 2**20:.1f} MB, {r['dedup_runs']} runs spilled"
            )
        print(
            f"| {r['name']} | {r['threads']} | {mb_s:.2f} | {mb_s / r['threads']:.2f} | "
            f"{ratio_text} | {r['peak_rss_mb']:.0f} | {notes} |"
        )


if __name__ == "__main__":
    main()
