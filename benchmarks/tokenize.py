"""Throughput of ``data_io tokenize`` against the HF ``tokenizers`` Python loop and ``tiktoken``,
on the same text and the same vocabulary (trained_tokenizers/bpe), measured side by side.

Input: the Python 3.11 documentation as rows (benchmarks/corpus.py): one big JSONL file, the
same as Parquet, and the same rows in 64 small JSONL files. Figures are MB of input file per
second, end to end (reading rows included for every contender).

    python -m benchmarks.tokenize [--workdir work/bench_tokenize] [--copies 4]

``--race`` runs the encoder race of issue 12 instead (see ``race`` below): ``data_io tokenize``
(default encoder, ``DATA_IO_ENCODER=hf``, and the floor) against ``tokenizers`` (this venv's and
1.0rc in its own venv), tiktoken and gigatoken, on Debian's multilingual documentation
(benchmarks/tokenize_corpus.py), 1 and 2 threads, cold, first pass and warm, ids checked per
text; and the in-memory cells of issue 27: ``TextEncoder.encode_batch`` (``list[str]`` and
pyarrow arrays) against gigatoken's ``encode_batch`` on the same texts, 4096 at a time:

    python -m benchmarks.tokenize --race [--mb 150] [--cjk-mb 20] [--vocab qwen] [--threads 1,2]
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

_HERE = Path(__file__).resolve().parent
# This file's name shadows the standard library's `tokenize` (imported by pandas, linecache, ...):
# take its folder off the import path (put the checkout on it) and load helpers by their path.
sys.path[:] = [str(_HERE.parent)] + [p for p in sys.path if Path(p or ".").resolve() != _HERE]
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")


def _load_sibling(name: str):
    """benchmarks/<name>.py by its path (imported on use: the race's children in another venv
    have neither pyarrow nor data_io)."""
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", _HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ROOT = Path(__file__).resolve().parent.parent
TOKENIZER = ROOT / "trained_tokenizers" / "bpe" / "tokenizer.json"
DEFAULT_WORKDIR = ROOT / "work" / "bench_tokenize"


def jsonl_texts(path: Path) -> list[str]:
    texts = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            texts += [row["instruction"], row["response"]]
    return texts


def timed(fn: Callable[[], object], repeat: int = 3) -> float:
    """Best of ``repeat`` wall times (the machine is shared and noisy)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def data_io_run(inputs: Path, out: Path, threads: int) -> Callable[[], object]:
    from data_io.tokenize import tokenize

    def run() -> object:
        shutil.rmtree(out, ignore_errors=True)
        return tokenize([inputs], out, tokenizer_path=TOKENIZER, threads=threads, progress=False)

    return run


def hf_loop(path: Path) -> Callable[[], object]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(TOKENIZER))
    tok.encode_special_tokens = True
    return lambda: [tok.encode(t, add_special_tokens=False).ids for t in jsonl_texts(path)]


def hf_batch(path: Path) -> Callable[[], object]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(TOKENIZER))
    tok.encode_special_tokens = True
    return lambda: tok.encode_batch(jsonl_texts(path), add_special_tokens=False)


def tiktoken_encoding():
    """The same byte-level BPE as a tiktoken Encoding: ranks = HF ids of byte strings."""
    import tiktoken

    spec = json.loads(TOKENIZER.read_text())
    byte_of = {ch: b for b, ch in enumerate(_byte_level_chars())}
    ranks = {
        bytes(byte_of[c] for c in token): rank for token, rank in spec["model"]["vocab"].items()
    }
    specials = {t["content"]: t["id"] for t in spec["added_tokens"]}
    pattern = spec["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
    return tiktoken.Encoding(
        "data_io_bpe", pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials
    )


def _byte_level_chars() -> list[str]:
    """GPT-2's byte-to-unicode table (the ByteLevel alphabet), in byte order."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(0xA1, 0xAC + 1))
        + list(range(0xAE, 0xFF + 1))
    )
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def tiktoken_loop(path: Path, enc) -> Callable[[], object]:
    return lambda: [enc.encode_ordinary(t) for t in jsonl_texts(path)]


def tiktoken_batch(path: Path, enc, threads: int) -> Callable[[], object]:
    return lambda: enc.encode_ordinary_batch(jsonl_texts(path), num_threads=threads)


def agreement(path: Path, enc) -> float:
    """Share of texts that tiktoken encodes exactly as HF (NFC aside, they should agree)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(TOKENIZER))
    texts = jsonl_texts(path)[:2000]
    same = sum(tok.encode(t, add_special_tokens=False).ids == enc.encode_ordinary(t) for t in texts)
    return same / len(texts)


def split_halves(big: Path, workdir: Path) -> list[Path]:
    """The big file's lines in two folders of one file each (first half, second half)."""
    lines = big.read_bytes().splitlines(keepends=True)
    folders = []
    for index, part in enumerate((lines[: len(lines) // 2], lines[len(lines) // 2 :])):
        folder = workdir / f"half_{index}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        (folder / "half.jsonl").write_bytes(b"".join(part))
        folders.append(folder)
    return folders


def _tokenize_alone(folder: str, out: str, start, durations) -> None:
    run = data_io_run(Path(folder), Path(out), 1)  # imports done before the clock starts
    start.wait()
    began = time.perf_counter()
    run()
    durations.put(time.perf_counter() - began)


def independent_halves(halves: list[Path], out: Path) -> Callable[[], float]:
    """Two processes, each tokenizing half the file with 1 thread, sharing nothing: the most
    that 2 cores of this machine give for this exact work, at this moment. Timed from a
    barrier passed once both have started, to the slower one's end (process start-up and
    imports are not part of it, as they are not part of the in-process runs)."""
    import multiprocessing

    def run() -> float:
        context = multiprocessing.get_context("spawn")
        start, durations = context.Barrier(len(halves)), context.Queue()
        processes = [
            context.Process(
                target=_tokenize_alone, args=(str(half), str(out / half.name), start, durations)
            )
            for half in halves
        ]
        for process in processes:
            process.start()
        for process in processes:
            process.join()
            if process.exitcode != 0:
                raise SystemExit(f"tokenizing {halves} in two processes failed")
        return max(durations.get() for _ in processes)

    return run


def target_ratios(big: Path, workdir: Path, rounds: int = 3) -> dict[str, float]:
    """The issue's two ratios, measured interleaved (HF loop, data_io 1 thread, 2 threads, two
    independent 1-thread processes on the halves, again and again), taking each one's best
    round, so that a noisy neighbour skews all alike. The two processes give the machine's
    ceiling for the 2-thread ratio: a shared VM's 2 vCPUs do not always add up to 2 cores."""
    out = workdir / "out"
    contenders = {
        "hf": hf_loop(big),
        "one": data_io_run(big.parent, out, 1),
        "two": data_io_run(big.parent, out, 2),
        "halves": independent_halves(split_halves(big, workdir / "halves"), workdir / "out_halves"),
    }
    best = dict.fromkeys(contenders, float("inf"))
    for _ in range(rounds):
        for name, fn in contenders.items():
            # The halves report their own time (see independent_halves); the rest is timed.
            seconds = fn() if name == "halves" else timed(fn, repeat=1)
            best[name] = min(best[name], seconds)
    return {
        "per_core": best["hf"] / best["one"],
        "scaling": best["one"] / best["two"],
        "ceiling": best["one"] / best["halves"],
    }


# -- the encoder race (issue 12) ------------------------------------------------------------------
# Every engine runs in its own process (its thread pool sized by RAYON_NUM_THREADS, its memory its
# own), encodes the same texts twice (first pass, then warm: the same process again, so engines
# that keep a cache across calls start with it full), and writes one 8-byte digest of its ids per
# text, which the parent compares with the ids of `tokenizers` (this venv's) text by text.
# MB counts UTF-8 bytes of text (instructions and responses), the same for every engine.
RC_VENV = ROOT / "work" / "bench_venvs" / "tokenizers_rc"
RC_VERSION = "1.0.0rc3"
ORACLE = "tokenizers"
ENGINES = {
    "data_io": "data_io tokenize, default encoder (fast when it serves the vocabulary)",
    "data_io-hf": "data_io tokenize, DATA_IO_ENCODER=hf",
    "floor": "floor: data_io tokenize, DATA_IO_ENCODER=null (else pyarrow read_json)",
    "tokenizers": "tokenizers (this venv) encode_batch_fast, texts in memory",
    "tokenizers-rc": f"tokenizers {RC_VERSION} encode_batch, texts in memory",
    "tiktoken": "tiktoken encode_ordinary_batch (NFC first when the vocabulary has it)",
    "gigatoken": "gigatoken encode_files(JsonlFileSource)",
    # The in-memory cells (issue 27): the same texts, BATCH at a time, as a loader hands them.
    "data_io-batch": "data_io TextEncoder.encode_batch(list[str]), texts in memory",
    "data_io-arrow": "data_io TextEncoder.encode_batch(pyarrow large_string), texts in memory",
    "gigatoken-batch": "gigatoken Tokenizer.encode_batch(list[str]), texts in memory",
    # The encoder's load cache off (DATA_IO_ENCODER_CACHE=off): the first load on a machine.
    "data_io-batch-uncached": "data_io-batch, its load cache off",
    "data_io-arrow-uncached": "data_io-arrow, its load cache off",
}
# Which engines keep state across calls in one process, i.e. what "warm" means for each.
WARM = {
    "data_io": "same process: the loaded encoder and its piece cache (shared by the threads) are kept",
    "data_io-hf": "same process: the loaded encoder is kept",
    "floor": "page cache",
    "tokenizers": "same Tokenizer: BPE word cache (10k words) warm",
    "tokenizers-rc": "same Tokenizer: its word cache warm",
    "tiktoken": "no cache: warm = same process",
    "gigatoken": "same Tokenizer: pre-token cache warm",
    "data_io-batch": "same TextEncoder: its piece cache (shared by the threads) warm",
    "data_io-arrow": "same TextEncoder: its piece cache warm; the Arrow arrays made untimed",
    "gigatoken-batch": "same Tokenizer: pre-token cache warm",
    "data_io-batch-uncached": "same TextEncoder: its piece cache (shared by the threads) warm",
    "data_io-arrow-uncached": "same TextEncoder: its piece cache warm; the Arrow arrays made untimed",
}
BATCH = 4096  # texts per encode call for the in-memory engines (--batch)


def corpus_texts(corpus: Path) -> list[str]:
    """The texts in the order every engine sees them: rows files sorted, instruction then
    response of each row (the order of data_io's tasks and of the docs files)."""
    texts = []
    for path in sorted((corpus / "rows").glob("*.jsonl")):
        with path.open(encoding="utf-8") as rows:
            for line in rows:
                row = json.loads(line)
                texts += [row["instruction"], row["response"]]
    return texts


def _digest(ids) -> bytes:
    import array
    import hashlib

    data = (
        ids.astype("<u4").tobytes() if hasattr(ids, "astype") else array.array("I", ids).tobytes()
    )
    return hashlib.blake2b(data, digest_size=8).digest()


class Clock:
    """Seconds spent inside ``with clock:`` blocks only (digests are computed outside), wall and
    CPU (all threads of the process: CPU / wall shows how many cores an engine really used)."""

    seconds = cpu = 0.0
    total_cpu = 0.0  # of every clock, for the child's report

    def __enter__(self) -> None:
        self._start, self._start_cpu = time.perf_counter(), time.process_time()

    def __exit__(self, *_: object) -> None:
        self.seconds += time.perf_counter() - self._start
        Clock.total_cpu += time.process_time() - self._start_cpu


def _in_memory_pass(encode: Callable[[list[str]], list], texts: list[str], digests: list | None):
    clock = Clock()
    for start in range(0, len(texts), BATCH):
        with clock:
            batch = encode(texts[start : start + BATCH])
        if digests is not None:
            digests += [_digest(ids) for ids in batch]
    return clock.seconds


def engine_tokenizers(spec: dict, texts: list[str]) -> tuple[float, Callable]:
    import tokenizers
    from tokenizers import Tokenizer

    spec["version"] = tokenizers.__version__
    began = time.perf_counter()
    tokenizer = Tokenizer.from_file(spec["tokenizer"])
    if hasattr(tokenizer, "encode_batch_fast"):  # 0.2x: a flag on the tokenizer
        tokenizer.encode_special_tokens = True
        fast = tokenizer.encode_batch_fast

        def encode(batch: list[str]) -> list:
            return [e.ids for e in fast(batch, add_special_tokens=False)]
    else:  # 1.0: an argument of encode_batch

        def encode(batch: list[str]) -> list:
            found = tokenizer.encode_batch(
                batch, add_special_tokens=False, encode_special_tokens=True
            )
            return [e.ids for e in found]

    return time.perf_counter() - began, lambda digests: _in_memory_pass(encode, texts, digests)


def engine_tiktoken(spec: dict, texts: list[str]) -> tuple[float, Callable]:
    import unicodedata

    import tiktoken

    spec["version"] = tiktoken.__version__
    began = time.perf_counter()
    encoding = _tiktoken_for(spec)
    nfc = (json.loads(Path(spec["tokenizer"]).read_text()).get("normalizer") or {}).get("type")
    threads = spec["threads"]

    def encode(batch: list[str]) -> list:
        if nfc == "NFC":  # tiktoken does not normalise; Qwen's own wrapper does this too
            batch = [unicodedata.normalize("NFC", t) for t in batch]
        return encoding.encode_ordinary_batch(batch, num_threads=threads)

    return time.perf_counter() - began, lambda digests: _in_memory_pass(encode, texts, digests)


def _tiktoken_for(spec: dict):
    if spec["vocab"] == "shipped":
        return tiktoken_encoding()
    from data_io.tokenizer.vocabularies import tiktoken_encoding as of_vocabulary

    return of_vocabulary(spec["vocab"])


def engine_gigatoken(spec: dict, texts: list[str]) -> tuple[float, Callable]:
    from importlib.metadata import version

    import awkward as ak
    import gigatoken

    spec["version"] = version("gigatoken")
    began = time.perf_counter()
    tokenizer = gigatoken.Tokenizer(spec["tokenizer"])
    files = [str(p) for p in sorted((Path(spec["corpus"]) / "docs").glob("*.jsonl"))]
    load = time.perf_counter() - began

    def run(digests: list | None) -> float:
        clock = Clock()
        with clock:
            encoded = tokenizer.encode_files(gigatoken.JsonlFileSource(files, field="text"))
        if digests is not None:
            flat = ak.to_numpy(ak.flatten(encoded))
            ends = ak.to_numpy(ak.num(encoded)).cumsum()
            starts = ends - ak.to_numpy(ak.num(encoded))
            digests += [_digest(flat[a:b]) for a, b in zip(starts, ends, strict=True)]
        return clock.seconds

    return load, run


def _batch_digests(ids, offsets) -> list[bytes]:
    """One digest per text of a flat ids array and its ``len + 1`` offsets."""
    return [_digest(ids[a:b]) for a, b in itertools.pairwise(offsets)]


def engine_gigatoken_batch(spec: dict, texts: list[str]) -> tuple[float, Callable]:
    from importlib.metadata import version

    import awkward as ak
    import gigatoken

    spec["version"] = version("gigatoken")
    began = time.perf_counter()
    tokenizer = gigatoken.Tokenizer(spec["tokenizer"])
    load = time.perf_counter() - began
    batches = [texts[start : start + BATCH] for start in range(0, len(texts), BATCH)]

    def run(digests: list | None) -> float:
        clock = Clock()
        for batch in batches:
            with clock:
                # Parallel explicitly (its default is too, outside multiprocessing workers).
                encoded = tokenizer.encode_batch(batch, parallel=True)
            if digests is not None:
                flat = ak.to_numpy(ak.flatten(encoded))
                counts = ak.to_numpy(ak.num(encoded))
                offsets = [0, *counts.cumsum().tolist()]
                digests += _batch_digests(flat, offsets)
        return clock.seconds

    return load, run


def engine_data_io_batch(spec: dict, texts: list[str]) -> tuple[float, Callable]:
    """``TextEncoder.encode_batch`` on the texts as a list of str or, for ``data_io-arrow``, as
    pyarrow arrays (made before the clock starts: the form a loader already holds)."""
    import pyarrow as pa

    from data_io.tokenizer.encoder import TextEncoder

    began = time.perf_counter()
    encoder = TextEncoder(spec["tokenizer"], tables="process")
    load = time.perf_counter() - began
    spec["version"] = encoder._encoder.engine
    # (An older build, run for comparison with PYTHONPATH, has no load cache.)
    cache = getattr(encoder, "load_cache", None) or "none"
    spec["note"] = f"load cache {cache.split(' ')[0]}"
    batches: list = [texts[start : start + BATCH] for start in range(0, len(texts), BATCH)]
    if spec["engine"].startswith("data_io-arrow"):
        batches = [pa.array(batch, pa.large_string()) for batch in batches]

    def run(digests: list | None) -> float:
        clock = Clock()
        for batch in batches:
            with clock:
                encoded = encoder.encode_batch(batch)
            if digests is not None:
                digests += _batch_digests(encoded.ids, encoded.offsets)
        return clock.seconds

    return load, run


def _layout_tokens(tokenizer_path: str) -> dict:
    """data_io's layout tokens, each replaced by <|endoftext|> when the vocabulary lacks it (GPT-2
    has no <|im_start|>): the race times encoding, not the layout."""
    from tokenizers import Tokenizer

    from data_io.tokenize import DEFAULT_BOQ, DEFAULT_CONDITIONS, DEFAULT_EOA, DEFAULT_EOQ

    vocabulary = Tokenizer.from_file(tokenizer_path)

    def have(token: str) -> str:
        return token if vocabulary.token_to_id(token) is not None else "<|endoftext|>"

    return {
        "boq": have(DEFAULT_BOQ),
        "eoq": have(DEFAULT_EOQ),
        "eoa": have(DEFAULT_EOA),
        "conditions": {tag: have(token) for tag, token in DEFAULT_CONDITIONS.items()},
    }


def engine_data_io(spec: dict, texts: list[str]) -> tuple[float, Callable]:
    from data_io import _core
    from data_io.tokenize import tokenize

    # Which engine the seam picks for this vocabulary, and what loading it costs: the process
    # keeps the loaded encoder (Encoder.shared in rust/encoder/mod.rs), so `tokenize` below reuses
    # it, as the other engines reuse their Tokenizer object.
    began = time.perf_counter()
    encoder = _core.Encoder(spec["tokenizer"])
    load = time.perf_counter() - began
    spec["version"] = str(getattr(encoder, "engine", "hf-tokenizers"))
    corpus, out = Path(spec["corpus"]), Path(spec["workdir"]) / "out"
    options = _layout_tokens(spec["tokenizer"])

    def run(digests: list | None) -> float:
        shutil.rmtree(out, ignore_errors=True)  # a kept output would make the run a no-op
        clock = Clock()
        with clock:
            tokenize(
                [corpus / "rows"],
                out,
                tokenizer_path=spec["tokenizer"],
                threads=spec["threads"],
                progress=False,
                **options,
            )
        if digests is not None:
            digests += _data_io_digests(corpus, out, options["conditions"])
        return clock.seconds

    return load, run


def _data_io_digests(corpus: Path, out: Path, conditions: dict) -> list[bytes]:
    """Digests of each text's ids in data_io's output: the instruction's ids sit between BOQ +
    its condition tags and EOQ, the response's before EOA (formats.md §3)."""
    import numpy as np

    digests = []
    for rows_file in sorted((corpus / "rows").glob("*.jsonl")):
        task = out / rows_file.name
        tokens = np.load(task / "tokens.npy", mmap_mode="r")
        columns = [
            np.load(task / f"{c}.npy") for c in ("inst_start", "inst_len", "resp_start", "resp_len")
        ]
        with rows_file.open(encoding="utf-8") as rows:
            tags = [len(json.loads(line)["condition"].split(",")) for line in rows]
        for row, (i_start, i_len, r_start, r_len) in enumerate(zip(*columns, strict=True)):
            first = i_start + 1 + tags[row]
            digests.append(_digest(np.asarray(tokens[first : i_start + i_len - 1])))
            digests.append(_digest(np.asarray(tokens[r_start : r_start + r_len - 1])))
    return digests


def engine_floor(spec: dict, texts: list[str]) -> tuple[float, Callable]:
    """data_io tokenize with the no-op encoder when the seam has one (DATA_IO_ENCODER=null);
    otherwise reading and parsing the rows with pyarrow's JSON reader in one thread."""
    from data_io import _core
    from data_io.errors import DataIoError

    try:  # made under DATA_IO_ENCODER=null (see _run_child)
        engine = str(getattr(_core.Encoder(spec["tokenizer"]), "engine", "no engine getter"))
        if "null" in engine:
            spec["note"] = f"data_io tokenize, DATA_IO_ENCODER=null (engine {engine})"
            return engine_data_io(spec, texts)
        refused = f"engine {engine}"
    except DataIoError as err:
        refused = str(err).split(";")[0][:70]
    spec["note"] = f"no null encoder ({refused}): pyarrow read_json of the rows instead, 1 thread"
    spec["threads_used"] = 1
    import pyarrow.json as pj

    files = sorted((Path(spec["corpus"]) / "rows").glob("*.jsonl"))

    def run(_: list | None) -> float:
        clock = Clock()
        with clock:
            for path in files:
                table = pj.read_json(path, read_options=pj.ReadOptions(use_threads=False))
                table.column("instruction"), table.column("response")
        return clock.seconds

    return 0.0, run


def race_child(spec: dict) -> dict:
    """One engine, one corpus, one thread count: two passes; digests of the first pass."""
    global BATCH
    BATCH = spec.get("batch", BATCH)
    texts = corpus_texts(Path(spec["corpus"]))
    builders = {
        "tokenizers": engine_tokenizers,
        "tokenizers-rc": engine_tokenizers,
        "tiktoken": engine_tiktoken,
        "gigatoken": engine_gigatoken,
        "gigatoken-batch": engine_gigatoken_batch,
        "data_io-batch": engine_data_io_batch,
        "data_io-arrow": engine_data_io_batch,
        "data_io-batch-uncached": engine_data_io_batch,
        "data_io-arrow-uncached": engine_data_io_batch,
        "data_io": engine_data_io,
        "data_io-hf": engine_data_io,
        "floor": engine_floor,
    }
    load, run = builders[spec["engine"]](spec, texts)
    digests: list[bytes] | None = [] if spec.get("digests") else None
    first = run(digests)
    first_cpu, Clock.total_cpu = Clock.total_cpu, 0.0
    # Warm: the fastest of the later passes (a cache may still be learning on the second).
    warm_passes = [run(None) for _ in range(spec.get("passes", 2) - 1)]
    warm = min(warm_passes)
    Clock.total_cpu /= len(warm_passes)
    if digests:
        Path(spec["digests"]).write_bytes(b"".join(digests))
    return {"load_s": load, "first_s": first, "warm_s": warm, "texts": len(texts),
            "digests": len(digests or []), "first_cores_used": first_cpu / first,
            "warm_cores_used": Clock.total_cpu / warm, "note": spec.get("note", ""),
            "version": spec.get("version", ""),
            "threads_used": spec.get("threads_used", spec["threads"])}  # fmt: skip


def _run_child(spec: dict) -> dict:
    env = {**os.environ, "RAYON_NUM_THREADS": str(spec["threads"])}
    env.pop("DATA_IO_ENCODER", None)
    if spec["engine"] == "data_io-hf":
        env["DATA_IO_ENCODER"] = "hf"
    elif spec["engine"] == "floor":
        env["DATA_IO_ENCODER"] = "null"
    if spec["engine"].endswith("-uncached"):
        env["DATA_IO_ENCODER_CACHE"] = "off"
    python = (
        str(RC_VENV / "bin" / "python") if spec["engine"] == "tokenizers-rc" else sys.executable
    )
    done = subprocess.run(
        [python, str(Path(__file__).resolve()), "--race-child", json.dumps(spec)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def engine_available(engine: str) -> str | None:
    """Why ``engine`` cannot run here, or None."""
    if engine == "tokenizers-rc" and not (RC_VENV / "bin" / "python").is_file():
        return (
            f"no {RC_VENV}: python3 -m venv {RC_VENV} && "
            f"{RC_VENV}/bin/pip install tokenizers=={RC_VERSION}"
        )
    module = {"gigatoken": "gigatoken", "gigatoken-batch": "gigatoken", "tiktoken": "tiktoken"}.get(
        engine
    )
    if module and importlib.util.find_spec(module) is None:
        return f"{module} is not installed: pip install -e '.[bench]'"
    return None


def race(args: argparse.Namespace) -> list[dict]:
    corpora = _load_sibling("tokenize_corpus").build(args.workdir / "corpus", args.mb, args.cjk_mb)
    tokenizer = str(TOKENIZER if args.vocab == "shipped" else _vocabulary_path(args.vocab))
    engines = [e.strip() for e in args.engines.split(",")]
    threads = [int(t) for t in args.threads.split(",")]
    results = []
    for slice_name, corpus in corpora.items():
        info = json.loads((corpus / "corpus.json").read_text())
        oracle: bytes | None = None
        for count in threads:
            # The oracle runs at every thread count when named, else once per slice (its ids).
            oracle_now = ORACLE in engines or oracle is None
            for engine in [ORACLE] * oracle_now + [e for e in engines if e != ORACLE]:
                row = {"slice": slice_name, "engine": engine, "threads": count,
                       "text_bytes": info["text_bytes"], "vocab": args.vocab}  # fmt: skip
                missing = engine_available(engine)
                if missing:
                    results.append({**row, "error": missing})
                    continue
                digests = args.workdir / f"digests_{slice_name}_{engine}_{count}.bin"
                digests.unlink(missing_ok=True)
                spec = {"engine": engine, "corpus": str(corpus), "tokenizer": tokenizer,
                        "vocab": args.vocab, "threads": count, "digests": str(digests),
                        "workdir": str(args.workdir / "run"), "batch": args.batch}  # fmt: skip
                row.update(_run_child(spec))
                if digests.is_file():
                    ours = digests.read_bytes()
                    oracle = ours if engine == ORACLE and oracle is None else oracle
                    row["identical"] = _identical(ours, oracle)
                results.append(row)
                print(json.dumps(row), file=sys.stderr)
    return results


def pairs(args: argparse.Namespace) -> list[dict]:
    """The race without the oracle, run as interleaved rounds: each round runs every engine once
    (a fresh process: first pass, then ``--passes`` - 1 warm passes, the fastest kept), so that
    a busy spell of the shared machine hits every engine alike. Ids are not compared here."""
    corpora = _load_sibling("tokenize_corpus").build(args.workdir / "corpus", args.mb, args.cjk_mb)
    tokenizer = str(TOKENIZER if args.vocab == "shipped" else _vocabulary_path(args.vocab))
    engines = [e.strip() for e in args.engines.split(",") if e.strip() != ORACLE]
    results = []
    for slice_name, corpus in corpora.items():
        info = json.loads((corpus / "corpus.json").read_text())
        for count in (int(t) for t in args.threads.split(",")):
            for round_no in range(args.pairs):
                for engine in engines:
                    spec = {"engine": engine, "corpus": str(corpus), "tokenizer": tokenizer,
                            "vocab": args.vocab, "threads": count, "passes": args.passes,
                            "workdir": str(args.workdir / "run")}  # fmt: skip
                    row = {"slice": slice_name, "engine": engine, "threads": count,
                           "round": round_no, "text_bytes": info["text_bytes"],
                           **_run_child(spec)}  # fmt: skip
                    results.append(row)
                    print(json.dumps(row), file=sys.stderr)
    return results


def pairs_table(results: list[dict], base_engine: str = "data_io") -> str:
    """Per slice and thread count: each engine's MB/s of text round by round, and each engine's
    median over ``base_engine``'s (first pass, warm)."""
    lines = [
        "| slice | threads | engine | cold MB/s by round | first pass MB/s by round "
        f"| warm MB/s by round | median vs {base_engine} (cold / first / warm) |",
        "|---|---:|---|---|---|---|---|",
    ]
    groups: dict[tuple, dict[str, list[dict]]] = {}
    for r in results:
        if "error" not in r:
            groups.setdefault((r["slice"], r["threads"]), {}).setdefault(r["engine"], []).append(r)
    for (slice_name, count), by_engine in groups.items():

        def speeds(rows: list[dict], key: str) -> list[float]:
            if key == "cold":  # a fresh process: the load and the first pass
                return [r["text_bytes"] / 1e6 / (r["load_s"] + r["first_s"]) for r in rows]
            return [r["text_bytes"] / 1e6 / r[key] for r in rows]

        base = by_engine.get(base_engine)
        keys = ("cold", "first_s", "warm_s")
        for engine, rows in by_engine.items():
            versus = ""
            if base and engine != base_engine:
                versus = " / ".join(
                    f"{statistics.median(speeds(rows, k)) / statistics.median(speeds(base, k)):.2f}x"
                    for k in keys
                )
            by_round = " | ".join(" / ".join(f"{v:.1f}" for v in speeds(rows, k)) for k in keys)
            lines.append(f"| {slice_name} | {count} | {engine} | {by_round} | {versus} |")
    return "\n".join(lines)


def _vocabulary_path(name: str) -> Path:
    """A named vocabulary's tokenizer.json, or ``name`` itself when it is a file (a machine
    without network cannot build the named ones)."""
    if Path(name).is_file():
        return Path(name)
    from data_io.tokenizer.vocabularies import vocabulary_path

    return vocabulary_path(name)


def _identical(digests: bytes, oracle: bytes | None) -> int | None:
    """How many texts have the oracle's ids (None when there is no oracle run to compare with)."""
    if oracle is None or len(digests) != len(oracle):
        return None
    return sum(digests[i : i + 8] == oracle[i : i + 8] for i in range(0, len(oracle), 8))


def race_table(results: list[dict]) -> str:
    lines = [
        "| slice | engine | threads | cold MB/s (load + first pass) | first pass MB/s | per core "
        "| warm MB/s | per core | ids identical to tokenizers | cores used | load s | warm means |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        name = ENGINES.get(r["engine"], r["engine"])
        name += f" [{r['version']}]" if r.get("version") else ""
        if "error" in r:
            lines.append(f"| {r['slice']} | {name} | {r['threads']} | not run: {r['error']} |")
            continue
        mb, cores = r["text_bytes"] / 1e6, r.get("threads_used", r["threads"])
        first, warm = mb / r["first_s"], mb / r["warm_s"]
        cold = mb / (r["load_s"] + r["first_s"])
        same = "n/a" if r.get("identical") is None else f"{r['identical']:,}/{r['texts']:,}"
        note = WARM.get(r["engine"], "") + (f"; {r['note']}" if r.get("note") else "")
        lines.append(
            f"| {r['slice']} | {name} | {cores} | {cold:.1f} | {first:.1f} | {first / cores:.1f} "
            f"| {warm:.1f} | {warm / cores:.1f} | {same} | {r['first_cores_used']:.2f} "
            f"| {r['load_s']:.2f} | {note} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--copies", type=int, default=4, help="corpus repetitions in the big file")
    parser.add_argument(
        "--targets", action="store_true", help="only the issue's two ratios, interleaved"
    )
    parser.add_argument("--race", action="store_true", help="the encoder race of issue 12")
    parser.add_argument("--mb", type=float, default=150, help="race: multilingual corpus size")
    parser.add_argument("--cjk-mb", type=float, default=20, help="race: CJK slice size")
    parser.add_argument(
        "--vocab", default="qwen", help="race: shipped, gpt2, qwen, ... or a tokenizer.json"
    )
    parser.add_argument("--threads", default="1,2", help="race: thread counts")
    parser.add_argument(
        "--batch", type=int, default=BATCH, help="race: texts per call of the in-memory engines"
    )
    parser.add_argument("--engines", default=",".join(ENGINES), help="race: engines to run")
    parser.add_argument(
        "--pairs", type=int, default=0, help="race: N interleaved rounds instead, no oracle"
    )
    parser.add_argument("--passes", type=int, default=3, help="--pairs: passes per process")
    parser.add_argument(
        "--pairs-base",
        default="data_io",
        help="--pairs: the engine the others' medians are divided by (e.g. gigatoken-batch)",
    )
    parser.add_argument("--race-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.race_child:
        print(json.dumps(race_child(json.loads(args.race_child))))
        return
    if args.race and args.pairs:
        args.workdir = args.workdir if args.workdir != DEFAULT_WORKDIR else ROOT / "work" / "race"
        results = pairs(args)
        (args.workdir / "pairs.json").write_text(json.dumps(results, indent=1))
        print(f"\nVocabulary {args.vocab}; {os.cpu_count()} cores; {args.pairs} rounds.\n")
        print(pairs_table(results, args.pairs_base))
        return
    if args.race:
        args.workdir = args.workdir if args.workdir != DEFAULT_WORKDIR else ROOT / "work" / "race"
        results = race(args)
        (args.workdir / "race.json").write_text(json.dumps(results, indent=1))
        print(
            f"\nVocabulary {args.vocab}; {os.cpu_count()} cores; figures from a busy machine are "
            f"indicative. JSON: {args.workdir / 'race.json'}\n"
        )
        print(race_table(results))
        return
    if not TOKENIZER.is_file():
        raise SystemExit(f"{TOKENIZER} is missing: run `python trained_tokenizers/build.py` first")
    paths = _load_sibling("corpus").build(args.workdir / "corpus", copies=args.copies)
    big = paths["big_jsonl"]
    if args.targets:
        ratios = target_ratios(big, args.workdir)
        print(
            f"interleaved best of 3, one big JSONL file: data_io 1 thread vs HF Python loop "
            f"{ratios['per_core']:.2f}x; data_io 2 threads vs 1 {ratios['scaling']:.2f}x; "
            f"machine ceiling (two independent 1-thread processes on the halves vs 1 thread) "
            f"{ratios['ceiling']:.2f}x, so data_io reaches "
            f"{ratios['scaling'] / ratios['ceiling']:.0%} of it"
        )
        return
    big_mb = big.stat().st_size / 1e6
    parquet_mb = paths["big_parquet"].stat().st_size / 1e6
    many_mb = sum(p.stat().st_size for p in paths["many"].glob("*.jsonl")) / 1e6
    cores = os.cpu_count() or 1
    enc = tiktoken_encoding()
    out = args.workdir / "out"
    rows = []

    def add(name: str, threads: int, mb: float, fn: Callable[[], object]) -> None:
        seconds = timed(fn)
        rows.append((name, threads, mb / seconds, mb / seconds / threads))
        print(f"  {name:<44} {threads} thr  {mb / seconds:8.2f} MB/s", file=sys.stderr)

    print(
        f"input: {big_mb:.1f} MB JSONL ({parquet_mb:.1f} MB Parquet), {cores} cores",
        file=sys.stderr,
    )
    add("HF tokenizers, Python encode loop", 1, big_mb, hf_loop(big))
    add("tiktoken, Python encode_ordinary loop", 1, big_mb, tiktoken_loop(big, enc))
    add("data_io tokenize, big JSONL", 1, big_mb, data_io_run(big.parent, out, 1))
    add(
        "data_io tokenize, big Parquet", 1, big_mb, data_io_run(paths["big_parquet"].parent, out, 1)
    )
    add("data_io tokenize, 64 small JSONL", 1, many_mb, data_io_run(paths["many"], out, 1))
    add("HF tokenizers, encode_batch", cores, big_mb, hf_batch(big))
    add("tiktoken, encode_ordinary_batch", cores, big_mb, tiktoken_batch(big, enc, cores))
    add("data_io tokenize, big JSONL", cores, big_mb, data_io_run(big.parent, out, cores))
    add(
        "data_io tokenize, big Parquet",
        cores,
        big_mb,
        data_io_run(paths["big_parquet"].parent, out, cores),
    )
    add("data_io tokenize, 64 small JSONL", cores, many_mb, data_io_run(paths["many"], out, cores))

    single = {name: rate for name, threads, rate, _ in rows if threads == 1}
    multi = {name: rate for name, threads, rate, _ in rows if threads == cores}
    print(
        f"\nInput: Python 3.11 docs as rows, {big_mb:.1f} MB JSONL; vocabulary: trained_tokenizers/bpe "
        f"({json.loads(TOKENIZER.read_text())['model']['type']}, "
        f"{len(json.loads(TOKENIZER.read_text())['model']['vocab']):,} tokens); {cores} cores.\n"
    )
    print("| contender | threads | MB/s | MB/s per thread |")
    print("|---|---:|---:|---:|")
    for name, threads, rate, per in rows:
        print(f"| {name} | {threads} | {rate:.2f} | {per:.2f} |")
    base = single["HF tokenizers, Python encode loop"]
    print(
        f"\n- data_io (1 thread, big JSONL) vs HF Python loop: "
        f"{single['data_io tokenize, big JSONL'] / base:.2f}x"
    )
    print(
        f"- data_io (1 thread, big JSONL) vs tiktoken loop: "
        f"{single['data_io tokenize, big JSONL'] / single['tiktoken, Python encode_ordinary loop']:.2f}x"
    )
    print(
        f"- data_io scaling on one big JSONL file, {cores} threads vs 1: "
        f"{multi['data_io tokenize, big JSONL'] / single['data_io tokenize, big JSONL']:.2f}x"
    )
    print(f"- tiktoken/HF agreement on the first 2000 texts: {agreement(big, enc):.1%}")


if __name__ == "__main__":
    main()
