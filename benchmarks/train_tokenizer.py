"""Tokenizer training, side by side: ``data_io train-tokenizer`` (its Rust trainer, and with
``--trainer hf`` the ``tokenizers`` crate's, as ``data_io-hf``) against the Python ``tokenizers``
``BpeTrainer`` (the same normaliser, split regex, ByteLevel alphabet and special tokens: the
oracle of the merges), rustbpe and bpeasy (both PyPI), on the same texts; for unigram, the Python
``tokenizers`` ``UnigramTrainer`` and SentencePiece (``sentencepiece``, the trainer unigram comes
from).

The texts are a folder of rows (``rows/*.jsonl``: instruction and response, each one text), e.g.
the encoder race's corpus (``python -m benchmarks.tokenize_corpus work/race/corpus --mb 150``).
Each engine runs in a fresh process, one after another, ``--rounds`` times; the parent reads each
child's peak RSS from ``wait4`` (and stays small: a child's peak RSS counts its parent's resident
memory). data_io reads the rows itself (``--prefix-config none``: every text); the peers get the texts in memory, NFC-normalised beforehand (they have no normaliser),
and their time counts only the training call. Reported per engine and thread count: wall time,
MB/s of text, peak RSS, and how its vocabulary compares with HF's (the merges, for data_io; the
set of token byte strings, for the tiktoken-style peers).

    python -m benchmarks.train_tokenizer work/race/corpus/main [--vocab 32768 131072]
        [--threads 1 2] [--engines data_io hf rustbpe bpeasy] [--rounds 1] [--mb 24 [150 ...]]
        [--type unigram]

``--type unigram`` trains unigram: data_io (its counting pass, then the ``tokenizers`` crate's
EM passes), ``data_io-hf`` (the crate's trainer fed the texts) and the Python ``tokenizers``
``UnigramTrainer`` (``hf``, the oracle; compared by the set of pieces, whose scores it makes up
for the bytes it did not learn in a hash order of its own), and ``sentencepiece``
(``SentencePieceTrainer`` on the same NFC texts, one sentence each, with byte fallback, full
character coverage and the special tokens as user-defined symbols; its own pre-tokenization,
whitespace as ``▁``, so its pieces are not compared).

Several ``--mb`` give the memory against the corpus size (with a corpus whose distinct words
keep growing: ``benchmarks.heaps_corpus``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

from data_io.tokenizer.vocabularies import byte_level_alphabet

ROOT = Path(__file__).resolve().parent.parent
SPECIALS_NOTE = (
    "data_io's 31 special tokens (formats.md §2) registered first, as in train-tokenizer"
)


def read_texts(rows: Path, megabytes: float | None) -> list[str]:
    """The texts of the rows files in name order (instruction, then response), up to ``megabytes``
    of UTF-8."""
    texts, size = [], 0
    limit = None if megabytes is None else int(megabytes * 1e6)
    for path in sorted(rows.glob("*.jsonl")):
        with open(path, encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                for key in ("instruction", "response"):
                    text = row.get(key) or ""
                    if text:
                        texts.append(text)
                        size += len(text.encode())
                if limit is not None and size >= limit:
                    return texts
    return texts


# train-tokenizer cuts each text to --truncate-len characters (10,000 by default, as the
# original): the peers see whole texts, so data_io must too.
NO_TRUNCATION = 2**31 - 1
# The split regex of rust/train (formats.md §2): the HF oracle and the peers use the same.
SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def child(
    engine: str, rows: str, vocab: int, megabytes: float | None, out: str, kind: str = "bpe"
) -> dict:
    """One engine's training in this process; returns its timing and vocabulary."""
    if engine in ("data_io", "data_io-hf"):
        from data_io.tokenizer.train import default_special_tokens, train_tokenizer

        # data_io reads the rows itself (`rows` is the prefix the parent wrote, with --mb).
        start = time.perf_counter()
        result = train_tokenizer([rows], Path(out) / "tokenizer.json", vocab_size=vocab,
                                 prefix_config=None, truncate_len=NO_TRUNCATION, progress=False,
                                 trainer="hf" if engine == "data_io-hf" else "rust",
                                 special_tokens=default_special_tokens(),
                                 tokenizer_type=kind)  # fmt: skip
        seconds = time.perf_counter() - start
        model = json.loads((Path(out) / "tokenizer.json").read_text(encoding="utf-8"))["model"]
        passes = {}
        if result.counting is not None:
            passes = {
                "count_seconds": result.counting.count_seconds,
                "merge_seconds": result.counting.merge_seconds,
                "words": result.counting.words,
            }
        return {"seconds": seconds, **_learned(model)} | passes
    texts = [unicodedata.normalize("NFC", t) for t in read_texts(Path(rows), megabytes)]
    if engine == "sentencepiece":
        return _sentencepiece_trained(texts, vocab, kind)
    if kind == "unigram" and engine != "hf":
        raise SystemExit(f"{engine} trains BPE only")
    if engine == "hf":
        return _hf_trained(texts, vocab, kind)
    if engine == "rustbpe":
        import rustbpe

        tokenizer = rustbpe.Tokenizer()
        start = time.perf_counter()
        tokenizer.train_from_iterator(iter(texts), vocab, pattern=SPLIT_REGEX)
        seconds = time.perf_counter() - start
        ranks = tokenizer.get_mergeable_ranks()
        return {"seconds": seconds, "vocab": sorted(_byte_level(bytes(t)) for t, _ in ranks)}
    if engine == "bpeasy":
        import bpeasy

        start = time.perf_counter()
        ranks = bpeasy.train_bpe(iter(texts), SPLIT_REGEX, 256, vocab)
        seconds = time.perf_counter() - start
        return {"seconds": seconds, "vocab": sorted(_byte_level(bytes(t)) for t in ranks)}
    raise SystemExit(f"unknown engine {engine!r}")


def _hf_trained(texts: list[str], vocab: int, kind: str) -> dict:
    """The Python ``tokenizers`` trainer of ``kind`` with data_io's pipeline and special tokens:
    the oracle."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers.trainers import BpeTrainer, UnigramTrainer

    from data_io.tokenizer.train import default_special_tokens

    tokenizer = Tokenizer(models.Unigram() if kind == "unigram" else models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    common = {
        "vocab_size": vocab,
        "special_tokens": default_special_tokens(),
        "initial_alphabet": pre_tokenizers.ByteLevel.alphabet(),
        "show_progress": False,
    }
    if kind == "unigram":
        trainer = UnigramTrainer(**common)
    else:
        trainer = BpeTrainer(min_frequency=2, **common)
    start = time.perf_counter()
    tokenizer.train_from_iterator(texts, trainer=trainer)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, **_learned(json.loads(tokenizer.to_str())["model"])}


def _sentencepiece_trained(texts: list[str], vocab: int, kind: str) -> dict:
    """SentencePiece's trainer of ``kind`` on ``texts`` (each one sentence, newlines kept), on
    the threads the parent gave (``RAYON_NUM_THREADS``)."""
    import io

    import sentencepiece

    from data_io.tokenizer.train import default_special_tokens

    model = io.BytesIO()
    start = time.perf_counter()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_writer=model,
        model_type=kind,
        vocab_size=vocab,
        num_threads=int(os.environ.get("RAYON_NUM_THREADS", "1")),
        byte_fallback=True,
        character_coverage=1.0,
        input_sentence_size=0,
        shuffle_input_sentence=False,
        max_sentence_length=1 << 30,  # every text, however long (the default skips > 4192 bytes)
        user_defined_symbols=default_special_tokens(),
        minloglevel=2,
    )
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "pieces": vocab,
        "own_pretokenizer": True,
        "model_bytes": len(model.getvalue()),
    }


def _learned(model: dict) -> dict:
    """A BPE model's merges and vocabulary; a unigram model's pieces (each once: its trainer
    lists a special token's text twice when it learns it too)."""
    if model["type"] == "Unigram":
        return {"vocab": sorted({piece for piece, _score in model["vocab"]})}
    return {"merges": _merges(model), "vocab": sorted(model["vocab"])}


def _merges(model: dict) -> list[str]:
    return [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]


BYTE_CHARS = byte_level_alphabet()


def _byte_level(token: bytes) -> str:
    """A token's bytes in ByteLevel's printable alphabet, as HF's vocabulary spells them."""
    return "".join(BYTE_CHARS[b] for b in token)


def _write_rows(folder: Path, texts: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "rows.jsonl", "w", encoding="utf-8") as f:
        for i in range(0, len(texts), 2):
            pair = [*texts[i : i + 2], ""]
            row = {"condition": "direct", "instruction": pair[0], "response": pair[1]}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def run_child(
    engine: str,
    rows: Path,
    vocab: int,
    mb: float | None,
    threads: int,
    data_io_rows: Path,
    kind: str = "bpe",
) -> dict:
    env = {**os.environ, "RAYON_NUM_THREADS": str(threads), "RAYON_RS_NUM_CPUS": str(threads)}
    with tempfile.TemporaryDirectory(prefix="train_bench_", dir=data_io_rows.parent) as out:
        source = data_io_rows if engine.startswith("data_io") else rows
        command = [sys.executable, "-m", "benchmarks.train_tokenizer", "--child", engine,
                   str(source), "--vocab", str(vocab), "--out", out, "--type", kind]  # fmt: skip
        if mb is not None and not engine.startswith("data_io"):
            command += ["--mb", str(mb)]
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE)
        assert process.stdout is not None
        output = process.stdout.read()
        _, status, usage = os.wait4(process.pid, 0)
        if status != 0:
            raise SystemExit(f"{engine} failed (status {status})")
    result = json.loads(output)
    result["peak_rss_mb"] = usage.ru_maxrss / 1024
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rows", type=Path, help="a corpus folder holding rows/*.jsonl, or rows/")
    parser.add_argument("--vocab", type=int, nargs="+", default=[32768])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, os.cpu_count() or 1])
    parser.add_argument("--engines", nargs="+", default=["data_io", "hf", "rustbpe", "bpeasy"])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--mb", type=float, nargs="+", default=[None],
                        help="use the first MB of text only; several: RSS against corpus size")  # fmt: skip
    parser.add_argument("--type", choices=("bpe", "unigram"), default="bpe")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    rows = args.rows / "rows" if (args.rows / "rows").is_dir() else args.rows
    if args.child:
        mb = args.mb[0]
        print(json.dumps(child(args.child, str(rows), args.vocab[0], mb, args.out, args.type)))
        return
    print(f"{SPECIALS_NOTE}; each engine in a fresh process, peak RSS from wait4")
    print("| text MB | vocab | engine | threads | seconds | MB/s | MB/s per thread | count s | "
          "merge s | distinct words | peak RSS MB | RSS MB per GB of text | "
          "vocabulary vs HF's |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for mb in args.mb:
        with tempfile.TemporaryDirectory(prefix="train_bench_rows_", dir=ROOT / "work") as tmp:
            # data_io reads rows from disk: the whole folder, or the prefix written here. The
            # texts are read in a process of their own: a child's peak RSS includes its parent's
            # resident memory (Linux keeps the high-water mark across fork and exec), so the
            # parent must stay small.
            data_io_rows = rows if mb is None else Path(tmp) / "rows"
            with multiprocessing.get_context("fork").Pool(1) as pool:
                text_mb = pool.apply(_measure_and_write, (rows, mb, data_io_rows))
            for vocab, threads in itertools.product(args.vocab, args.threads):
                results = {}
                for engine in args.engines:
                    runs = [
                        run_child(engine, rows, vocab, mb, threads, data_io_rows, args.type)
                        for _ in range(args.rounds)
                    ]
                    results[engine] = runs[-1] | {
                        "seconds": statistics.median(r["seconds"] for r in runs),
                        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
                    }
                oracle = results.get("hf")
                for engine, result in results.items():
                    _print_row(text_mb, vocab, engine, threads, result, oracle)


def _print_row(
    text_mb: float, vocab: int, engine: str, threads: int, result: dict, oracle: dict | None
) -> None:
    passes = ("-", "-", "-")
    if "count_seconds" in result:
        passes = (
            f"{result['count_seconds']:.2f}",
            f"{result['merge_seconds']:.2f}",
            f"{result['words']:,}",
        )
    rate = text_mb / result["seconds"]
    print(
        f"| {text_mb:,.0f} | {vocab:,} | {engine} | {threads} | {result['seconds']:.2f} | "
        f"{rate:.1f} | {rate / threads:.1f} | {' | '.join(passes)} | "
        f"{result['peak_rss_mb']:.0f} | {result['peak_rss_mb'] / (text_mb / 1e3):.0f} | "
        f"{_compare(result, oracle)} |",
        flush=True,
    )


def _measure_and_write(rows: Path, mb: float | None, prefix: Path) -> float:
    """MB of text in the first ``mb`` MB of ``rows`` (all of it: None), written as rows to
    ``prefix`` when that is not ``rows`` itself."""
    texts = read_texts(rows, mb)
    if prefix != rows:
        _write_rows(prefix, texts)
    return sum(len(t.encode()) for t in texts) / 1e6


def _compare(result: dict, oracle: dict | None) -> str:
    if result.get("own_pretokenizer"):
        return "- (its own pre-tokenizer)"
    if oracle is None or result is oracle:
        return "(the oracle)" if result is oracle else "-"
    if "merges" in result:
        same = result["merges"] == oracle["merges"]
        return (
            "merges identical" if same else f"merges differ ({_first_difference(result, oracle)})"
        )
    ours, theirs = set(result["vocab"]), set(oracle["vocab"])
    if ours == theirs:
        return "the same tokens"
    return f"{len(ours & theirs) / max(1, len(theirs)):.1%} of HF's tokens"


def _first_difference(result: dict, oracle: dict) -> str:
    for k, (a, b) in enumerate(zip(result["merges"], oracle["merges"], strict=False)):
        if a != b:
            return f"first at merge {k}: {a!r} vs {b!r}"
    return f"{len(result['merges'])} vs {len(oracle['merges'])} merges"


if __name__ == "__main__":
    main()
