"""Throughput and memory of ``data_io prepare`` end to end, beside the data_io encoder alone on
the same documents (the target: prepare >= 80% of its MB/s) and the field's baseline,
datatrove's tokenization step (``JsonlReader`` -> ``DocumentTokenizer``, the same tokenizer
file, run by benchmarks/peers/datatrove_tokenize.py in its own venv).

Corpus (``--corpus``): by default the encoder race's multilingual documentation, one paragraph
per JSONL row (``work/race/corpus150/main/docs``, 154 MB: the Debian handbook in 26 languages,
man pages in 13, the Debian Reference in 9, the Python, Linux, Perl, PostgreSQL, git and Node.js
documentation; built by ``python -m benchmarks.tokenize_corpus work/race/corpus150 --mb 150``).
``--corpus txt`` builds the older corpus of ``.txt`` files (Debian package documentation, a
document per blank-line-separated block) of ``--mb`` MB.

Every measurement runs in its own process (so that the encoder's thread count and the peak RSS
are its own), for each tokenizer (``--tokenizers``: the shipped BPE and Qwen2.5's vocabulary) and
each thread count (MB/s per core: per CPU-second the run used): prepare without
de-duplication, with exact documents, exact lines and near-duplicates; the encoder alone
(``TextEncoder.encode_batch`` over prepare's documents in prepare's batches, first pass, the
reading and cleaning untimed); the floor: prepare with the encoder's null engine
(``DATA_IO_ENCODER=null``: every step but encoding, which no encoder speed can go below);
datatrove with as many workers as threads (JSONL corpora). MB/s
counts input bytes. (The ``char`` tokenizer is no floor any more: its ids are made in Python
from each text, so it runs slower than the BPE encoders.)

    .venv/bin/python -m benchmarks.prepare [--corpus DIR|txt] [--tokenizers bpe,qwen]
        [--threads 1,2] [--workdir work/bench_prepare] [--no-datatrove] [--rounds N]

With ``--rounds N`` every row runs N times, round after round, and reports its fastest round
with the spread of all: on a shared machine the ratios of fastest rounds measured side by side
are steadier than one run's. "vs encoder alone" then also gives, in brackets, the median over
the rounds of each round's ratio (a prepare row against the encoder row of the same round,
minutes apart rather than the whole run): this VM's speed drifts between rounds, so a fast or
slow round of one row alone moves the ratio of fastest rounds.

datatrove's venv: ``python -m benchmarks.prepare --setup-datatrove`` (pip, once).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
ROOT = _HERE.parent
# benchmarks/tokenize.py would shadow the standard library's `tokenize`: take this folder off
# the import path (the corpus helper is loaded by its path) and put the checkout on it.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != _HERE]
TOKENIZERS = {
    "bpe": ROOT / "trained_tokenizers" / "bpe" / "tokenizer.json",
    "qwen": Path.home() / ".cache" / "data_io" / "vocab" / "qwen" / "tokenizer.json",
}
RACE_DOCS = ROOT / "work" / "race" / "corpus150" / "main" / "docs"
DATATROVE_VENV = ROOT / "work" / "bench_venvs" / "datatrove"
DATATROVE_VERSION = "0.10.1"
DATATROVE_SCRIPT = _HERE / "peers" / "datatrove_tokenize.py"
EOS = "<|endoftext|>"  # in both vocabularies: prepare's default EOS and datatrove's
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


def child_prepare(
    corpus: Path, out: Path, dedup: str, memory: str, tokenizer: str, field: str
) -> dict:
    from data_io.prepare import prepare

    started, cpu = time.perf_counter(), time.process_time()
    result = prepare(
        [corpus],
        out,
        tokenizer=tokenizer,
        dedup=dedup,
        dedup_memory=memory,
        text_field=field,
        progress=False,
    )
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "cpu_seconds": time.process_time() - cpu,
        "text_bytes": result.bytes_read,
        "documents": result.documents_read,
        "duplicates": result.duplicates,
        "duplicate_lines": result.duplicate_lines,
        "tokens": sum(result.tokens.values()),
        "dedup_peak_bytes": result.dedup_peak_bytes,
        "dedup_runs": result.dedup_runs,
        "peak_rss_mb": _peak_rss_mb(),
    }


def _prepared_batches(corpus: Path, field: str) -> tuple[list[list[str]], int]:
    """prepare's documents in prepare's batches (read, cleaned; untimed) and the input size."""
    from data_io import _core
    from data_io.formats.raw_reading import DocumentReader
    from data_io.formats.raw_text import ReadOptions, ReadStats, expand_inputs
    from data_io.prepare.normalize import CleanOptions

    class _Quiet:
        def describe(self, _name: str) -> None: ...
        def advance_bytes(self, _n: int) -> None: ...

    read, clean = ReadOptions(text_field=field), CleanOptions()
    sources, _ = expand_inputs([corpus], read)
    reader = DocumentReader(read, ReadStats(), _Quiet())  # type: ignore[arg-type]
    batches = []
    for batch in reader.batches(sources):
        _, texts, *_ = _core.prepare_batch(
            batch,
            text_field=read.text_field,
            fail_invalid=False,
            normalize=clean.normalize,
            filter=clean.filter,
            min_line_chars=clean.min_line_chars,
            min_doc_chars=clean.min_doc_chars,
            resolve=reader.resolve,
        )
        batches.append(texts or [])
    return batches, sum(s.size for s in sources)


def child_encoder(corpus: Path, tokenizer: str, field: str) -> dict:
    """data_io's encoder alone over prepare's documents, in prepare's batches, first pass (the
    encoder loaded untimed): the speed prepare's encoding step could reach by itself."""
    from data_io.tokenizer.encoder import TextEncoder

    batches, size = _prepared_batches(corpus, field)
    encoder = TextEncoder(tokenizer)
    eos = encoder.eos_id_for(EOS)
    encoder.vocab_size  # noqa: B018  (loads the encoder before the clock starts)
    started, cpu = time.perf_counter(), time.process_time()
    tokens = sum(len(encoder.encode_batch(batch, eos).ids) for batch in batches)
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "cpu_seconds": time.process_time() - cpu,
        "text_bytes": size,
        "tokens": tokens,
        "peak_rss_mb": _peak_rss_mb(),
    }


def _env(threads: int) -> dict[str, str]:
    # OPENBLAS_NUM_THREADS as the data_io command sets it (its threads spin after numpy's import).
    return {
        **os.environ,
        "RAYON_NUM_THREADS": str(threads),
        "TOKENIZERS_PARALLELISM": "true",
        "OPENBLAS_NUM_THREADS": "1",
    }


def _child(kind: str, threads: int, corpus: Path, out: Path, options: dict) -> dict:
    spec = json.dumps({"kind": kind, "corpus": str(corpus), "out": str(out), **options})
    shutil.rmtree(out, ignore_errors=True)
    env = _env(threads)
    if options.get("floor"):  # the encoder's null engine: every step of prepare but encoding
        env["DATA_IO_ENCODER"] = "null"
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


def _datatrove(threads: int, corpus: Path, out: Path, tokenizer: Path) -> dict:
    """datatrove's JsonlReader -> DocumentTokenizer with ``threads`` workers (and its encoder's
    threads pinned alike), in its own venv."""
    shutil.rmtree(out, ignore_errors=True)
    done = subprocess.run(
        [
            *(str(DATATROVE_VENV / "bin" / "python"), str(DATATROVE_SCRIPT)),
            *("--input", str(corpus), "--tokenizer", str(tokenizer), "--eos-token", EOS),
            *("--workers", str(threads), "--output", str(out)),
        ],
        env=_env(1),  # one encoder thread per worker: `threads` workers use `threads` cores
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    shutil.rmtree(out, ignore_errors=True)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    report["text_bytes"] = report.pop("input_bytes")
    return report


def setup_datatrove() -> None:
    """datatrove in its own venv (it pins its own dependencies; data_io's stay untouched)."""
    subprocess.run([sys.executable, "-m", "venv", str(DATATROVE_VENV)], check=True)
    pip = [str(DATATROVE_VENV / "bin" / "python"), "-m", "pip", "install", "-q"]
    # No extras: JsonlReader needs orjson, DocumentTokenizer tokenizers (the extras bring
    # trafilatura, nltk, datasets... which these two steps never import).
    subprocess.run([*pip, f"datatrove=={DATATROVE_VERSION}", "tokenizers", "orjson"], check=True)


def print_saved(path: Path) -> None:
    """The table of a finished run, from its results.json:
    ``python -c "from benchmarks.prepare import print_saved; print_saved(...)"``."""
    _table(json.loads(Path(path).read_text()))


def _corpus(args: argparse.Namespace) -> Path:
    if args.corpus == "txt":
        return build_corpus(args.workdir, args.mb)
    corpus = Path(args.corpus)
    if not corpus.is_dir():
        raise SystemExit(
            f"no corpus at {corpus}: build it with `python -m benchmarks.tokenize_corpus "
            "work/race/corpus150 --mb 150`, or pass --corpus txt"
        )
    return corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(RACE_DOCS), help="a folder of inputs, or txt")
    parser.add_argument("--mb", type=int, default=150, help="size of the txt corpus")
    parser.add_argument("--tokenizers", default="bpe,qwen", help=f"of {', '.join(TOKENIZERS)}")
    parser.add_argument("--threads", default=f"1,{os.cpu_count() or 1}")
    parser.add_argument("--workdir", type=Path, default=ROOT / "work" / "bench_prepare")
    parser.add_argument("--dedup-memory", default="1GB", help="dedup budget (prepare's default)")
    parser.add_argument("--no-datatrove", action="store_true", help="leave datatrove out")
    parser.add_argument(
        "--no-floor",
        action="store_true",
        help="leave out the floor: prepare with the encoder's null engine (no encoding)",
    )
    parser.add_argument(
        "--dedup-modes",
        default="none,doc,doc@8MB,line,line@8MB,near,near@8MB",
        help="prepare's rows: MODE or MODE@BUDGET (a budget the hashes outgrow: sorted runs)",
    )
    parser.add_argument("--text-field", default="text", help="the JSONL field of the text")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every row this many times, round after round (interleaved); each row reports "
        "its fastest round and the spread of all (this VM's rows move 10-30%% between runs)",
    )
    parser.add_argument("--setup-datatrove", action="store_true", help="make its venv and exit")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.setup_datatrove:
        setup_datatrove()
        return
    if args.child:
        spec = json.loads(args.child)
        corpus, out = Path(spec["corpus"]), Path(spec["out"])
        if spec["kind"] == "encoder":
            report = child_encoder(corpus, spec["tokenizer"], spec["field"])
        else:
            report = child_prepare(
                corpus, out, spec["dedup"], spec["memory"], spec["tokenizer"], spec["field"]
            )
        print(json.dumps(report))
        return
    corpus = _corpus(args)
    jsonl = any(corpus.glob("*.jsonl"))
    datatrove = not args.no_datatrove and jsonl and (DATATROVE_VENV / "bin" / "python").is_file()
    if not args.no_datatrove and jsonl and not datatrove:
        print("datatrove left out: make its venv with --setup-datatrove", file=sys.stderr)
    out = args.workdir / "out"
    planned: list[tuple[str, int, str, Any, tuple]] = []

    def measure(name: str, threads: int, vocabulary: str, run: Any, *args: Any) -> None:
        planned.append((name, threads, vocabulary, run, args))

    for threads in [int(t) for t in args.threads.split(",")]:
        for vocabulary in args.tokenizers.split(","):
            path = TOKENIZERS[vocabulary]
            base = {"tokenizer": str(path), "memory": args.dedup_memory, "field": args.text_field}
            measure("data_io encoder alone", threads, vocabulary, _child, "encoder", threads,
                    corpus, out, base)  # fmt: skip
            for choice in args.dedup_modes.split(","):
                dedup, _, memory = choice.partition("@")
                name = "prepare, no dedup" if dedup == "none" else f"prepare, dedup {dedup}"
                name += f", {memory} budget" if memory else ""
                run = {**base, "memory": memory or args.dedup_memory}
                measure(f"data_io {name}", threads, vocabulary, _child, "prepare", threads,
                        corpus, out, {**run, "dedup": dedup})  # fmt: skip
            if not args.no_floor:
                measure("floor: prepare without encoding, dedup doc", threads, vocabulary,
                        _child, "prepare", threads, corpus, out,
                        {**base, "dedup": "doc", "floor": True})  # fmt: skip
            if datatrove:
                measure("datatrove DocumentTokenizer", threads, vocabulary, _datatrove, threads,
                        corpus, out, path)  # fmt: skip
    rounds: list[list[dict]] = [[] for _ in planned]
    for round_number in range(max(1, args.rounds)):
        for runs, (name, threads, vocabulary, run, run_args) in zip(rounds, planned, strict=True):
            report = run(*run_args)
            report.update(name=name, threads=threads, tokenizer=vocabulary, round=round_number)
            runs.append(report)
            print(json.dumps(report), file=sys.stderr)
    rows = [_fastest(runs) for runs in rounds]
    args.workdir.mkdir(parents=True, exist_ok=True)
    (args.workdir / "results.json").write_text(json.dumps(rows, indent=1))
    _table(rows)


def _fastest(runs: list[dict]) -> dict:
    """A row's fastest round, with every round's MB/s beside it (``rounds_mb_s``)."""
    best = dict(min(runs, key=lambda r: r["seconds"]))
    if len(runs) > 1:
        best["rounds_mb_s"] = [r["text_bytes"] / 2**20 / r["seconds"] for r in runs]
    return best


def _table(rows: list[dict]) -> None:
    print(
        "| run | vocabulary | threads | MB/s | MB/s per core | vs encoder alone "
        "| vs datatrove per core | peak RSS (MB) | notes |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")

    def rate(r: dict) -> float:
        return r["text_bytes"] / 2**20 / r["seconds"]

    def per_core(r: dict) -> float:
        # By the CPU time the run used (all its threads and processes), not the threads asked
        # for: prepare's Python thread reads while the encoder's threads work.
        return r["text_bytes"] / 2**20 / r["cpu_seconds"]

    def find(name: str, r: dict) -> dict | None:
        return next(
            (x for x in rows
             if x["name"].startswith(name) and (x["tokenizer"], x["threads"]) == (r["tokenizer"], r["threads"])),
            None,
        )  # fmt: skip

    def per_round(r: dict, encoder: dict) -> str:
        # Each round's ratio against the encoder's in the same round; their median.
        pairs = zip(r.get("rounds_mb_s", []), encoder.get("rounds_mb_s", []), strict=False)
        ratios = sorted(mine / theirs for mine, theirs in pairs)
        return f" [{statistics.median(ratios):.0%}]" if len(ratios) > 1 else ""

    for r in rows:
        encoder, datatrove = find("data_io encoder", r), find("datatrove", r)
        prepare = r["name"].startswith("data_io prepare") and r["tokenizer"] != "char"
        versus_encoder = (
            f"{rate(r) / rate(encoder):.0%}{per_round(r, encoder)}" if prepare and encoder else "—"
        )
        versus_datatrove = (
            f"{per_core(r) / per_core(datatrove):.1f}×" if prepare and datatrove else "—"
        )
        notes = f"{r['text_bytes'] / 2**20:.0f} MB, {r['tokens']:,} tokens"
        if r.get("duplicates"):
            lines = r.get("duplicate_lines")
            notes += f"; {r['duplicates']:,} duplicates" + (f" ({lines:,} lines)" if lines else "")
            notes += (
                "; dedup peak "
                f"{r['dedup_peak_bytes'] / 2**20:.1f} MB, {r['dedup_runs']} runs spilled"
            )
        if "cpu_seconds" in r:
            notes += f"; {r['cpu_seconds'] / r['seconds']:.2f} cores used"
        if r.get("rounds_mb_s"):
            spread = r["rounds_mb_s"]
            notes += f"; fastest of {len(spread)} rounds ({min(spread):.1f}–{max(spread):.1f} MB/s)"
        print(
            f"| {r['name']} | {r['tokenizer']} | {r['threads']} | {rate(r):.1f} | "
            f"{per_core(r):.1f} | {versus_encoder} | {versus_datatrove} | "
            f"{r['peak_rss_mb']:.0f} | {notes} |"
        )


if __name__ == "__main__":
    main()
