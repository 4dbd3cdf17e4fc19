"""``--dedup near`` (rust/prepare/near.rs) against an exact-Jaccard oracle and datasketch.

Corpus: ``--bases`` documents of 200 words drawn from a 20,000-word vocabulary (ASCII words, so
the oracle's word rule is ours), and of each base five copies with a share 0, 0.01, 0.03, 0.1,
0.3 of their words replaced (share 0 gets a one-word prefix: no exact copy), shuffled by
``--seed``. The oracle gives each document the highest Jaccard similarity of its 5-word shingle
set with any earlier document (candidates from an inverted index of shingles). Both engines use
5-word shingles and 14 bands of 8 rows, and drop a document when any of its bands was seen in
any earlier document: data_io through ``_core.prepare_batch(near=...)`` and ``HashDedup`` (as
prepare does; timed: those calls, one rayon thread), datasketch's ``MinHash`` and
``MinHashLSH(params=(14, 8))`` in its own venv (benchmarks/peers/datasketch_near.py; timed:
its MinHash and LSH work). Reported, for each: recall at Jaccard >= 0.9 and >= 0.8, the share
dropped in [0.5, 0.8) and under 0.3 (false positives), the share of dropped documents at 0.5 or
more, agreement between the engines and documents per second; beside the S-curve
``1 - (1 - s^rows)^bands`` (mean over each group's documents of their closest similarity).

    .venv/bin/python -m benchmarks.near_dedup [--bases 500] [--seed 7]

datasketch's venv (once): ``python3.11 -m venv work/bench_venvs/datasketch &&
work/bench_venvs/datasketch/bin/pip install datasketch``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

_HERE = Path(__file__).resolve().parent
ROOT = _HERE.parent
# benchmarks/tokenize.py would shadow the standard library's `tokenize`: take this folder off
# the import path and put the checkout on it.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != _HERE]
os.environ["RAYON_NUM_THREADS"] = "1"  # one core each: datasketch runs on one
PEER_PYTHON = ROOT / "work" / "bench_venvs" / "datasketch" / "bin" / "python"
PEER_SCRIPT = _HERE / "peers" / "datasketch_near.py"
NGRAM, BANDS, ROWS = 5, 14, 8
SHARES = (0.0, 0.01, 0.03, 0.1, 0.3)


def planted_corpus(bases: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(20_000)]
    originals = [rng.choices(vocabulary, k=200) for _ in range(bases)]
    documents = [" ".join(words) for words in originals]
    for base in originals:
        for share in SHARES:
            words = list(base)
            for i in rng.sample(range(len(words)), int(share * len(words))):
                words[i] = rng.choice(vocabulary)
            documents.append(("Title " if share == 0 else "") + " ".join(words))
    rng.shuffle(documents)
    return documents


def closest_jaccard(documents: list[str]) -> list[float]:
    """Each document's highest Jaccard similarity with an earlier one (shingles as the peer's)."""
    index: defaultdict[tuple[str, ...], list[int]] = defaultdict(list)
    sizes: list[int] = []
    closest = []
    for j, text in enumerate(documents):
        words = re.findall(r"[^\W_]+", text.lower())
        shingles = {tuple(words[i : i + NGRAM]) for i in range(max(1, len(words) - NGRAM + 1))}
        shared = Counter(i for s in shingles for i in index[s])
        closest.append(
            max((n / (len(shingles) + sizes[i] - n) for i, n in shared.items()), default=0.0)
        )
        for s in shingles:
            index[s].append(j)
        sizes.append(len(shingles))
    return closest


def ours(path: Path, work: Path) -> tuple[np.ndarray, float]:
    """data_io's keep mask and the seconds of its prepare_batch and HashDedup calls."""
    from data_io import _core
    from data_io.formats.raw_reading import DocumentReader
    from data_io.formats.raw_text import ReadOptions, ReadStats, expand_inputs
    from data_io.prepare.dedup import HashDedup, NearDedup

    class _Quiet:
        def describe(self, _name: str) -> None: ...
        def advance_bytes(self, _n: int) -> None: ...

    options = ReadOptions()
    reader = DocumentReader(options, ReadStats(), _Quiet())  # type: ignore[arg-type]
    near = NearDedup(ngram=NGRAM, bands=BANDS, rows=ROWS).as_tuple()
    dedup, documents, seconds = HashDedup(work, 1 << 28), 0, 0.0
    for batch in reader.batches(expand_inputs([path], options)[0]):
        started = time.perf_counter()
        *_, found, _ = _core.prepare_batch(
            batch,
            text_field="text",
            fail_invalid=False,
            normalize=False,
            filter=False,
            min_line_chars=0,
            min_doc_chars=0,
            resolve=reader.resolve,
            near=near,
        )
        dedup.add(found, documents)
        seconds += time.perf_counter() - started
        documents += len(found)
    started = time.perf_counter()
    keep, _ = dedup.keep_mask(documents, None, work / "kept.u64")
    return np.array(keep), seconds + time.perf_counter() - started


def datasketch(path: Path) -> tuple[np.ndarray, float, str]:
    """datasketch's keep mask, the seconds of its MinHash and LSH work, and its version."""
    args = [str(PEER_PYTHON), str(PEER_SCRIPT), "--input", str(path), "--ngram", str(NGRAM)]
    done = subprocess.run(
        [*args, "--bands", str(BANDS), "--rows", str(ROWS)],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    keep = np.ones(report["documents"], dtype=bool)
    keep[report["dropped"]] = False
    return keep, report["seconds"], report["datasketch"]


def s_curve(s: float) -> float:
    return 1 - (1 - s**ROWS) ** BANDS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bases", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    if not PEER_PYTHON.exists():
        raise SystemExit(f"no datasketch venv at {PEER_PYTHON}: see this module's docstring")
    documents = planted_corpus(args.bases, args.seed)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "docs.jsonl"
        path.write_text("".join(json.dumps({"text": d}) + "\n" for d in documents))
        keep, our_seconds = ours(path, Path(folder))
        peer_keep, peer_seconds, peer_version = datasketch(path)
    closest = np.array(closest_jaccard(documents))
    dropped = {"data_io": ~keep, f"datasketch {peer_version}": ~peer_keep}
    seconds = dict(zip(dropped, (our_seconds, peer_seconds), strict=True))
    groups: list[tuple[str, Callable[[np.ndarray], np.ndarray]]] = [
        ("recall, J ≥ 0.9", lambda j: j >= 0.9),
        ("recall, J ≥ 0.8", lambda j: j >= 0.8),
        ("dropped, 0.5 ≤ J < 0.8", lambda j: (j >= 0.5) & (j < 0.8)),
        ("false positives: dropped, J < 0.3", lambda j: j < 0.3),
    ]
    print(f"{len(documents):,} documents; {NGRAM}-word shingles, {BANDS} bands x {ROWS} rows")
    print(
        "S-curve 1-(1-s^r)^b: " + ", ".join(f"{s}: {s_curve(s):.4f}" for s in (0.9, 0.8, 0.5, 0.3))
    )
    print(f"\n| measure | documents | S-curve at each J, mean | {' | '.join(dropped)} |")
    print("|---|---:|---:|" + "---:|" * len(dropped))
    for name, select in groups:
        chosen = select(closest)
        expected = float(np.mean([s_curve(s) for s in closest[chosen]])) if chosen.any() else 0
        shares = " | ".join(f"{d[chosen].mean():.2%}" for d in dropped.values())
        print(f"| {name} | {chosen.sum():,} | {expected:.2%} | {shares} |")
    precision = " | ".join(f"{(closest[d] >= 0.5).mean():.2%}" for d in dropped.values())
    print(f"| dropped with J ≥ 0.5 (precision) | — | — | {precision} |")
    print(
        f"| dropped | {len(documents):,} | — | {' | '.join(f'{d.sum():,}' for d in dropped.values())} |"
    )
    ours_only, peer_only = ~keep & peer_keep, ~peer_keep & keep
    same = f"{1 - (ours_only | peer_only).mean():.2%}"
    print(f"| same decision as the other engine | {len(documents):,} | — | {same} | {same} |")
    print(f"| dropped by this engine only | — | — | {ours_only.sum():,} | {peer_only.sum():,} |")
    rates = " | ".join(f"{len(documents) / s:,.0f}" for s in seconds.values())
    print(f"| documents/s (one core) | {len(documents):,} | — | {rates} |")


if __name__ == "__main__":
    main()
