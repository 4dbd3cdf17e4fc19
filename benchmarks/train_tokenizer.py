"""Tokenizer training, side by side: ``data_io train-tokenizer`` (its Rust trainer, and with
``--trainer hf`` the ``tokenizers`` crate's, as ``data_io-hf``) against the Python ``tokenizers``
``BpeTrainer`` (the same normaliser, split regex, ByteLevel alphabet and special tokens: the
oracle of the merges), rustbpe and bpeasy (both PyPI), on the same texts.

The texts are a folder of rows (``rows/*.jsonl``: instruction and response, each one text), e.g.
the encoder race's corpus (``python -m benchmarks.tokenize_corpus work/race/corpus --mb 150``).
Each engine runs in a fresh process, one after another, ``--rounds`` times; the parent reads each
child's peak RSS from ``wait4``. data_io reads the rows itself (``--prefix-config none``: every
text); the peers get the texts in memory, NFC-normalised beforehand (they have no normaliser),
and their time counts only the training call. Reported per engine and thread count: wall time,
MB/s of text, peak RSS, and how its vocabulary compares with HF's (the merges, for data_io; the
set of token byte strings, for the tiktoken-style peers).

    python -m benchmarks.train_tokenizer work/race/corpus/main [--vocab 32768] [--threads 1 2]
        [--engines data_io hf rustbpe bpeasy] [--rounds 1] [--mb 24]
"""

from __future__ import annotations

import argparse
import json
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


def child(engine: str, rows: str, vocab: int, megabytes: float | None, out: str) -> dict:
    """One engine's training in this process; returns its timing and vocabulary."""
    if engine in ("data_io", "data_io-hf"):
        from data_io.tokenizer.train import default_special_tokens, train_tokenizer

        corpus = Path(out) / "corpus"
        _write_rows(corpus, read_texts(Path(rows), megabytes))
        start = time.perf_counter()
        train_tokenizer([corpus], Path(out) / "tokenizer.json", vocab_size=vocab,
                        prefix_config=None, truncate_len=NO_TRUNCATION, progress=False,
                        trainer="hf" if engine == "data_io-hf" else "rust",
                        special_tokens=default_special_tokens())  # fmt: skip
        seconds = time.perf_counter() - start
        model = json.loads((Path(out) / "tokenizer.json").read_text(encoding="utf-8"))["model"]
        return {"seconds": seconds, "merges": _merges(model), "vocab": sorted(model["vocab"])}
    texts = [unicodedata.normalize("NFC", t) for t in read_texts(Path(rows), megabytes)]
    if engine == "hf":
        from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
        from tokenizers.trainers import BpeTrainer

        from data_io.tokenizer.train import default_special_tokens

        tokenizer = Tokenizer(models.BPE())
        tokenizer.normalizer = normalizers.NFC()
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(SPLIT_REGEX), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
        tokenizer.decoder = decoders.ByteLevel()
        trainer = BpeTrainer(
            vocab_size=vocab,
            min_frequency=2,
            special_tokens=default_special_tokens(),
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        start = time.perf_counter()
        tokenizer.train_from_iterator(texts, trainer=trainer)
        seconds = time.perf_counter() - start
        model = json.loads(tokenizer.to_str())["model"]
        return {"seconds": seconds, "merges": _merges(model), "vocab": sorted(model["vocab"])}
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


def run_child(engine: str, args: argparse.Namespace, threads: int) -> dict:
    env = {**os.environ, "RAYON_NUM_THREADS": str(threads), "RAYON_RS_NUM_CPUS": str(threads)}
    with tempfile.TemporaryDirectory(prefix="train_bench_") as out:
        command = [sys.executable, "-m", "benchmarks.train_tokenizer", "--child", engine,
                   str(args.rows), "--vocab", str(args.vocab), "--out", out]  # fmt: skip
        if args.mb is not None:
            command += ["--mb", str(args.mb)]
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
    parser.add_argument("--vocab", type=int, default=32768)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, os.cpu_count() or 1])
    parser.add_argument("--engines", nargs="+", default=["data_io", "hf", "rustbpe", "bpeasy"])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--mb", type=float, default=None, help="use the first MB of text only")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    rows = args.rows / "rows" if (args.rows / "rows").is_dir() else args.rows
    if args.child:
        print(json.dumps(child(args.child, str(rows), args.vocab, args.mb, args.out)))
        return
    args.rows = rows
    text_mb = sum(len(t.encode()) for t in read_texts(rows, args.mb)) / 1e6
    print(f"{text_mb:.1f} MB of text from {rows}, vocab {args.vocab:,}; {SPECIALS_NOTE}")
    print("| engine | threads | seconds | MB/s | peak RSS MB | vocabulary vs HF's |")
    print("|---|---|---|---|---|---|")
    for threads in args.threads:
        results = {}
        for engine in args.engines:
            runs = [run_child(engine, args, threads) for _ in range(args.rounds)]
            results[engine] = runs[-1] | {
                "seconds": statistics.median(r["seconds"] for r in runs),
                "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
            }
        oracle = results.get("hf")
        for engine, result in results.items():
            print(
                f"| {engine} | {threads} | {result['seconds']:.2f} | "
                f"{text_mb / result['seconds']:.1f} | {result['peak_rss_mb']:.0f} | "
                f"{_compare(result, oracle)} |"
            )


def _compare(result: dict, oracle: dict | None) -> str:
    if oracle is None or result is oracle:
        return "(the oracle)" if result is oracle else "-"
    if "merges" in result:
        same = result["merges"] == oracle["merges"]
        return (
            "merges identical" if same else f"merges differ ({_first_difference(result, oracle)})"
        )
    ours, theirs = set(result["vocab"]), set(oracle["vocab"])
    return f"{len(ours & theirs) / max(1, len(theirs)):.1%} of HF's tokens"


def _first_difference(result: dict, oracle: dict) -> str:
    for k, (a, b) in enumerate(zip(result["merges"], oracle["merges"], strict=False)):
        if a != b:
            return f"first at merge {k}: {a!r} vs {b!r}"
    return f"{len(result['merges'])} vs {len(oracle['merges'])} merges"


if __name__ == "__main__":
    main()
