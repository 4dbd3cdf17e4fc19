"""The online de-duplication set (``_core.SeenHashes``, rust/prepare/seen.rs) alone: recording
a corpus's worth of 128-bit records batch by batch, as ``--dedup near`` records its bands (a
dozen a document), then sorting them for the kept-hashes file; seconds for each, by thread
count, beside another build when given. Each is timed twice in a process: on pages new to it
(as a run meets them: on a VM the first touch of the 136 MB table weighs) and on reused ones.

    .venv/bin/python -m benchmarks.seen_hashes [--records 4200000] [--batch 196000]
        [--threads 1,2] [--rounds 3] [--baseline DIR] [--bands 14]

The default is the race's main slice under ``--dedup near``: 300k documents of 14 bands, in
8 MiB batches of about 14k documents. One record in seven repeats an earlier one. Each run is
its own process (``RAYON_NUM_THREADS``), the builds alternating round by round; the table
gives each build's fastest round. ``--bands N``: near-dedup's (band hash, band number) records
of N bands, in the set made for them (``SeenHashes(budget, bands)``, which holds each band's
hashes apart); a build from before that set holds the same records as 128-bit ones.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
ROOT = _HERE.parent


def child(spec: dict) -> dict:
    import numpy as np

    from data_io import _core

    rng = np.random.default_rng(0)
    # The whole 64-bit range, as hashes spread (the set's shards are cut by the top bits).
    records = rng.integers(0, 2**64, size=(spec["records"], 2), dtype=np.uint64)
    if spec.get("bands"):
        records[:, 1] = rng.integers(0, spec["bands"], size=len(records), dtype=np.uint64)
    records[1::7] = records[0::7][: len(records[1::7])]  # repeats
    batches = [
        np.ascontiguousarray(records[start : start + spec["batch"]])
        for start in range(0, len(records), spec["batch"])
    ]
    times = {}
    # Twice: the first set's pages are new to the process (as in a run), the second's reused.
    for when in ("new", "reused"):
        try:
            seen = _core.SeenHashes(8 << 30, spec.get("bands") or None)
        except TypeError:  # a build from before the banded set
            seen = _core.SeenHashes(8 << 30)
        began = time.perf_counter()
        seen.expect(len(records))
        for batch in batches:
            seen.first_seen(batch)
        times[f"record_{when}_s"] = time.perf_counter() - began
        began = time.perf_counter()
        ordered = seen.sorted()
        times[f"sort_{when}_s"] = time.perf_counter() - began
        del seen
    return {**times, "kept": len(ordered), "mib": ordered.nbytes >> 20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=4_200_000)
    parser.add_argument("--batch", type=int, default=196_000, help="records per call")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another checkout's data_io, alternated")
    parser.add_argument("--bands", type=int, default=0, help="near-dedup's records, N bands")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    from benchmarks.build_child import run_child  # not in the child, whose path lacks it

    builds = {"this": ROOT}
    if args.baseline is not None:
        builds["baseline"] = args.baseline.resolve()
    spec = {"records": args.records, "batch": args.batch, "bands": args.bands}
    print(f"{args.records:,} records in batches of {args.batch:,}; fastest of {args.rounds} rounds")
    print("\n| threads | build | record s (new pages / reused) | sort s (new / reused) | kept |")
    print("|---:|---|---:|---:|---:|")
    for threads in (int(t) for t in args.threads.split(",")):
        runs: dict[str, list[dict]] = {name: [] for name in builds}
        for round_no in range(args.rounds):
            order = list(builds.items())
            for name, build in order if round_no % 2 == 0 else order[::-1]:
                runs[name].append(run_child(__file__, build, spec, threads))
        for name, done in runs.items():
            best = {key: min(r[key] for r in done) for key in done[0] if key.endswith("_s")}
            print(
                f"| {threads} | {name} | {best['record_new_s']:.3f} / {best['record_reused_s']:.3f}"
                f" | {best['sort_new_s']:.3f} / {best['sort_reused_s']:.3f} | {done[0]['kept']:,} |"
            )


if __name__ == "__main__":
    main()
