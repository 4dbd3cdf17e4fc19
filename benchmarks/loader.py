"""Benchmark of data_io.load on a synthetic sampled corpus (formats.md §4) built in a temp dir.

Measures, per worker process (iterating in-process is exactly what one DataLoader worker does):
* tokens/s delivered for both layouts at batch_max_length 4096·k (packed at world size 1 and 8);
* time from constructing the dataset to its first batch, for a 10M-row epoch;
* the cost of resuming mid-epoch and of planning a whole epoch's packing.

    .venv/bin/python -m benchmarks.loader            # 1M pool rows, 10M-row epoch
    .venv/bin/python -m benchmarks.loader --quick    # 100k / 1M, for a smoke run

Targets (issue 4): >= 2M tokens/s per worker; first batch <= 1 s after construction at 10M rows.
Timings on a shared machine vary: run it on an idle one for figures you quote.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from numpy.lib.format import open_memmap
from torch.utils.data import DataLoader, IterableDataset
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from data_io.load import ResumableDataLoader, SampledDataset
from data_io.load.packing.layouts import PACKED_KEYS, SCALAR_KEYS

CONTEXT = 4097  # the sampler's default context_size


def build_corpus(folder: Path, pool_rows: int, epoch_rows: int, seed: int = 0) -> dict[str, float]:
    """Pool of ``pool_rows`` rows (lengths roughly like instruction data), epoch 0 = every row
    once, epoch 1 = ``epoch_rows`` rows (rows repeated, as the sampler's ``repeat`` does)."""
    rng = np.random.default_rng(seed)
    il = np.clip(rng.lognormal(4.0, 0.8, pool_rows).astype(np.int64), 3, 2048)
    rl = np.clip(rng.lognormal(5.2, 1.0, pool_rows).astype(np.int64), 2, CONTEXT - il)
    sizes = il + rl
    starts = np.cumsum(sizes) - sizes
    total = int(sizes.sum())
    tokens = open_memmap(folder / "tokens.npy", mode="w+", dtype=np.uint16, shape=(total,))
    chunk = 1 << 25
    for at in tqdm(range(0, total, chunk), desc="token pool", unit="chunk", file=sys.stderr):
        n = min(chunk, total - at)
        tokens[at : at + n] = rng.integers(0, 65536, n, dtype=np.uint16)
    tokens.flush()
    del tokens
    for epoch, rows in enumerate((pool_rows, epoch_rows)):
        order = rng.permutation(np.resize(np.arange(pool_rows), rows))
        edir = folder / f"epoch_{epoch}"
        edir.mkdir()
        columns = {"inst_start": starts, "inst_len": il, "resp_start": starts + il, "resp_len": rl}
        for name, values in columns.items():
            np.save(edir / f"{name}.npy", values[order].astype("<i8"))
    meta = {
        "tokenizer_info": {"vocab_size": 65536},
        "vocab_size": None,
        "max_seq_len": CONTEXT,
        "total_length": total,
    }
    (folder / "metadata.json").write_text(json.dumps(meta))
    return {"pool_tokens": total, "mean_row": total / pool_rows}


def real_tokens(batch: dict) -> int:
    if "total_seqlen" in batch:
        return int(batch["total_seqlen"])
    return int(batch["attention_mask"].numpy().sum())


def throughput(ds: SampledDataset, seconds: float) -> tuple[float, float, int]:
    """(real tokens/s, batch slots/s, batches) iterating in this process for ``seconds``."""
    n = tokens = slots = 0
    start = time.perf_counter()
    for batch in ds:
        n += 1
        tokens += real_tokens(batch)
        slots += batch["input_ids"].numel()
        if time.perf_counter() - start >= seconds:
            break
    elapsed = time.perf_counter() - start
    return tokens / elapsed, slots / elapsed, n


class _Blank(IterableDataset):
    """Batches of the packed layout's shapes that cost nothing to build: what is left of the
    DataLoader's time per batch is its own worker-to-trainer transfer."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity

    def __iter__(self):  # type: ignore[no-untyped-def]
        while True:
            arrays = torch.zeros(len(PACKED_KEYS), self.capacity, dtype=torch.int32)
            batch = dict(zip(PACKED_KEYS, arrays.unbind(), strict=True))
            batch.update(
                zip(
                    SCALAR_KEYS,
                    torch.zeros(len(SCALAR_KEYS), dtype=torch.int64).unbind(),
                    strict=True,
                )
            )
            batch["total_seqlen"] = torch.tensor(self.capacity)
            yield batch


def loader_rate(loader: DataLoader, seconds: float) -> tuple[float, float]:
    """(real tokens/s, ms per batch) through ``loader``, timed from its first batch on."""
    it = iter(loader)
    next(it)  # workers started
    n = tokens = 0
    start = time.perf_counter()
    for batch in it:
        n += 1
        tokens += real_tokens(batch)
        if time.perf_counter() - start >= seconds:
            break
    elapsed = time.perf_counter() - start
    return tokens / elapsed, elapsed / n * 1e3


def first_batch(path: Path, **kwargs: object) -> tuple[float, float]:
    start = time.perf_counter()
    ds = SampledDataset(path, **kwargs)
    built = time.perf_counter()
    next(iter(ds))
    return built - start, time.perf_counter() - built


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pool-rows", type=int, default=1_000_000)
    parser.add_argument("--epoch-rows", type=int, default=10_000_000)
    parser.add_argument("--seconds", type=float, default=3.0, help="per throughput figure")
    parser.add_argument("--quick", action="store_true", help="100k pool rows, 1M-row epoch, 1 s")
    parser.add_argument(
        "--workdir", type=Path, help="build the corpus here (kept) instead of a temp dir"
    )
    args = parser.parse_args()
    if args.quick:
        args.pool_rows, args.epoch_rows, args.seconds = 100_000, 1_000_000, 1.0
    # A DataLoader worker runs torch with one thread; measure this process the same way.
    torch.set_num_threads(1)

    with tempfile.TemporaryDirectory(prefix="loader-bench-", dir=args.workdir) as tmp:
        folder = Path(tmp)
        t = time.perf_counter()
        info = build_corpus(folder, args.pool_rows, args.epoch_rows)
        print(
            f"corpus: {args.pool_rows:,} pool rows, {info['pool_tokens']:,} tokens (uint16), "
            f"mean row {info['mean_row']:.0f} tokens; epoch 1 has {args.epoch_rows:,} rows "
            f"(built in {time.perf_counter() - t:.1f} s)\n",
        )

        print(f"## First batch, {args.epoch_rows:,}-row epoch\n")
        print("| layout | construct (s) | first batch after construct (s) | total (s) |")
        print("|---|---|---|---|")
        cases = [
            ("prefixlm_packed, bml 4096, world 1", {"batch_max_length": 4096}),
            (
                "prefixlm_packed, bml 4096, rank 0 of 8",
                {"batch_max_length": 4096, "rank": 0, "world_size": 8},
            ),
            ("causal_padded, batch 8", {"layout": "causal_padded", "batch_size": 8}),
        ]
        for name, kwargs in cases:
            built, first = first_batch(folder, epoch=1, **kwargs)
            print(f"| {name} | {built:.3f} | {first:.3f} | {built + first:.3f} |")

        print(
            f"\n## Tokens/s per worker process, epoch 0 ({args.pool_rows:,} rows), {args.seconds:g} s each\n"
        )
        print("| layout | batch | world | real tokens/s | batch slots/s | batches |")
        print("|---|---|---|---|---|---|")
        for k in (1, 2, 4):
            for world in (1, 8):
                ds = SampledDataset(folder, batch_max_length=4096 * k, rank=0, world_size=world)
                tok, slots, n = throughput(ds, args.seconds)
                print(
                    f"| prefixlm_packed | {4096 * k} tokens | {world} | {tok / 1e6:.2f} M | {slots / 1e6:.2f} M | {n} |"
                )
            ds = SampledDataset(folder, layout="causal_padded", batch_size=8 * k)
            tok, slots, n = throughput(ds, args.seconds)
            print(
                f"| causal_padded | {8 * k} rows | 1 | {tok / 1e6:.2f} M | {slots / 1e6:.2f} M | {n} |"
            )

        print(
            "\n## DataLoader, 2 worker processes, prefixlm_packed, world 1 (after the first batch)\n"
        )
        print("| batch | real tokens/s in all | per worker | ms/batch | empty-dataset ms/batch |")
        print("|---|---|---|---|---|")
        for k in (1, 4):
            ds = SampledDataset(folder, batch_max_length=4096 * k)
            tok, ms = loader_rate(
                ResumableDataLoader(ds, num_workers=2, prefetch_factor=8), args.seconds
            )
            _, idle = loader_rate(
                DataLoader(_Blank(4096 * k), batch_size=None, num_workers=2, prefetch_factor=8),
                args.seconds,
            )
            print(
                f"| {4096 * k} tokens | {tok / 1e6:.2f} M | {tok / 2e6:.2f} M | {ms:.2f} | {idle:.2f} |"
            )

        print("\n## Whole-epoch plan and resume (prefixlm_packed, bml 4096)\n")
        print(
            "| world | plan whole epoch (s) | steps | packing efficiency | rows dropped | resume at half epoch: first batch (s) |"
        )
        print("|---|---|---|---|---|---|")
        for world in (1, 8):
            ds = SampledDataset(folder, batch_max_length=4096, rank=0, world_size=world)
            start = time.perf_counter()
            summary = ds.summary()
            planned = time.perf_counter() - start
            state = ds.global_state(summary["steps"] // 2)
            start = time.perf_counter()
            fresh = SampledDataset(folder, batch_max_length=4096, rank=0, world_size=world)
            fresh.load_state_dict(state)
            next(iter(fresh))
            resumed = time.perf_counter() - start
            dropped = sum(summary["rows_dropped"].values())
            print(
                f"| {world} | {planned:.2f} | {summary['steps']:,} | {summary['packing_efficiency']:.4f} | {dropped:,} | {resumed:.2f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
