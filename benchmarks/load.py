"""Benchmark of the flat-shard loaders (issue 10) against the seeds' plain numpy memmap loop.

The corpus is synthetic: one real shard of random token ids (EOS at a 1/500 rate) hard-linked
under many names, so a directory holds 10B tokens (or 1T for the start-up figure) while the disk
and the page cache hold one shard. That measures the loader's own cost per token, not the disk.

Figures, each side by side with the same workload through a plain loop (``np.memmap`` slices of
a window, ``.astype(int64)``, input/label split, torch's ``DistributedSampler`` and
``DataLoader``: what the seeds' datasets do):
* tokens/s in one process (= one DataLoader worker), windows of 4,096 (+1), batch 8: plain,
  packed (doc_ids, position_ids, cu_seqlens), and a 5-source mixture; uint16 .npy and uint32 .bin;
* tokens/s through the DataLoader with 2 workers;
* time from nothing to the first batch for a 1T-token directory (10,000 files);
* resume: build the loader, load a mid-epoch state, first batch.

    .venv/bin/python -m benchmarks.load            # 10B-token folders
    .venv/bin/python -m benchmarks.load --quick    # smaller, for a smoke run

Targets: >= 20M tokens/s per worker; first batch <= 1 s at any size; resume <= 1 s anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from data_io.load import MemoryMappedDataset, MixtureDataset, StatefulLoader
from data_io.load.order.mixing import resolve_phases
from data_io.load.order.samplers import MixtureOrder, ShuffledOrder

WINDOW = 4097
BATCH = 8
EOS = 0


def make_folder(root: Path, name: str, dtype: str, shard_tokens: int, copies: int) -> Path:
    """A shard folder: one real shard and ``copies - 1`` hard links to it."""
    folder = root / name
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, 50_000, shard_tokens, dtype=np.int64)
    tokens[rng.random(shard_tokens) < 1 / 500] = EOS
    first = folder / ("shard_00000.npy" if dtype == "uint16" else "shard_00000.bin")
    if dtype == "uint16":
        np.save(first, tokens.astype(np.uint16))
    else:
        tokens.astype(np.uint32).tofile(first)
        (folder / "dataset_metadata.json").write_text(json.dumps({"dtype": "uint32"}))
    for i in range(1, copies):
        os.link(first, folder / f"shard_{i:05d}{first.suffix}")
    return folder


def rate(batches, seconds: float) -> float:
    """Input tokens per second over ``seconds`` (after one warm-up batch)."""
    it = iter(batches)
    next(it)
    tokens, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        try:
            batch = next(it)
        except StopIteration:  # the end of an epoch: go on with the next, as training does
            it = iter(batches)
            continue
        tokens += batch["input_ids"].numel()
    return tokens / (time.perf_counter() - start)


class MemmapWindows(torch.utils.data.Dataset):
    """The seeds' dataset: a memmap per file, an item = a window sliced, cast and split."""

    def __init__(self, folder: Path, dtype: str) -> None:
        self.files = sorted(p for p in folder.iterdir() if p.suffix in (".npy", ".bin"))
        self.dtype = dtype
        sizes = [self._open(p).shape[0] // WINDOW for p in self.files]
        self.starts = np.cumsum([0, *sizes])
        self.maps: dict[int, np.ndarray] = {}

    def _open(self, path: Path) -> np.ndarray:
        if self.dtype == "uint16":
            return np.load(path, mmap_mode="r")
        return np.memmap(path, dtype=np.uint32, mode="r")

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        f = int(np.searchsorted(self.starts, index, side="right")) - 1
        if f not in self.maps:
            self.maps[f] = self._open(self.files[f])
        at = (index - int(self.starts[f])) * WINDOW
        window = torch.from_numpy(self.maps[f][at : at + WINDOW].astype(np.int64))
        return {"input_ids": window[:-1], "labels": window[1:]}

    def __getstate__(self) -> dict:
        return dict(self.__dict__, maps={})


def memmap_loop(folder: Path, dtype: str, workers: int = 0):
    """The seeds' loop: that dataset, torch's DistributedSampler, a plain DataLoader."""
    dataset = MemmapWindows(folder, dtype)
    sampler = torch.utils.data.DistributedSampler(dataset, num_replicas=1, rank=0, seed=1)
    return torch.utils.data.DataLoader(
        dataset, batch_size=BATCH, sampler=sampler, num_workers=workers, drop_last=True
    )


def shard_loader(folder: Path, workers: int = 0, **options) -> StatefulLoader:
    pattern = "*.npy" if any(folder.glob("*.npy")) else "*.bin"
    dataset = MemoryMappedDataset(folder, WINDOW, file_pattern=pattern, **options)
    order = ShuffledOrder(len(dataset), seed=1)
    return StatefulLoader(dataset, order, batch_size=BATCH, num_workers=workers)


def mixture_loader(folders: list[Path], workers: int = 0) -> StatefulLoader:
    parts = [MemoryMappedDataset(f, WINDOW) for f in folders]
    names = [f.name for f in folders]
    phases = resolve_phases(names, [5, 4, 3, 2, 1], 1.0)
    order = MixtureOrder([len(p) for p in parts], phases, seed=1)
    return StatefulLoader(
        MixtureDataset(parts, names), order, batch_size=BATCH, num_workers=workers, names=names
    )


def first_batch_seconds(make) -> float:
    start = time.perf_counter()
    next(iter(make()))
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small folders, short timings")
    parser.add_argument("--seconds", type=float, default=3.0, help="timing per figure")
    args = parser.parse_args()
    shard = 10_000_000 if args.quick else 100_000_000
    copies = 10 if args.quick else 100  # 100M x 100 = 10B tokens per folder
    huge = 100 if args.quick else 10_000  # x 100M = 1T tokens
    seconds = 1.0 if args.quick else args.seconds
    results: dict[str, object] = {"window": WINDOW, "batch": BATCH}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        root = Path(tmp)
        print("building folders (hard links of one shard)...", file=sys.stderr)
        u16 = make_folder(root, "u16", "uint16", shard, copies)
        u32 = make_folder(root, "u32", "uint32", shard, copies)
        mix = [make_folder(root, f"mix{i}", "uint16", shard // 5, copies) for i in range(5)]
        results["tokens_per_folder"] = shard * copies
        table = []
        cases = [
            ("plain .npy uint16", lambda: shard_loader(u16), lambda: memmap_loop(u16, "uint16")),
            ("plain .bin uint32", lambda: shard_loader(u32), lambda: memmap_loop(u32, "uint32")),
            (
                "packed (doc_ids, position_ids, cu_seqlens)",
                lambda: shard_loader(
                    u16, pack_sequences=True, eos_token_id=EOS, position_ids=True, cu_seqlens=True
                ),
                None,
            ),
            ("5-source mixture", lambda: mixture_loader(mix), None),
            (
                "plain, DataLoader 2 workers",
                lambda: shard_loader(u16, workers=2),
                lambda: memmap_loop(u16, "uint16", workers=2),
            ),
            ("5-source mixture, 2 workers", lambda: mixture_loader(mix, workers=2), None),
        ]
        for name, ours, theirs in cases:
            ours_rate = rate(ours(), seconds)
            theirs_rate = rate(theirs(), seconds) if theirs is not None else None
            table.append(
                {"case": name, "data_io_tok_s": ours_rate, "memmap_loop_tok_s": theirs_rate}
            )
            print(f"{name}: {ours_rate / 1e6:.1f}M tok/s", file=sys.stderr)
        results["throughput"] = table

        print(
            f"building a {shard * huge / 1e12:g}T-token folder ({huge} files)...", file=sys.stderr
        )
        big = make_folder(root, "big", "uint16", shard, huge)
        results["big_folder_tokens"] = shard * huge
        results["big_first_batch_s"] = first_batch_seconds(lambda: shard_loader(big))
        results["big_memmap_loop_first_batch_s"] = first_batch_seconds(
            lambda: memmap_loop(big, "uint16")
        )
        loader = shard_loader(big)
        middle = len(loader) // 2
        state = loader.state_dict()
        state["state"] = dict(state["state"], position=middle * BATCH, step=middle)

        def resumed() -> StatefulLoader:
            fresh = shard_loader(big)
            fresh.load_state_dict(state)
            return fresh

        results["big_resume_mid_epoch_s"] = first_batch_seconds(resumed)
        mixed = mixture_loader(mix)
        for _ in zip(range(50), mixed, strict=False):
            pass
        mix_state = mixed.state_dict()

        def resumed_mix() -> StatefulLoader:
            fresh = mixture_loader(mix)
            fresh.load_state_dict(mix_state)
            return fresh

        results["mixture_resume_s"] = first_batch_seconds(resumed_mix)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
