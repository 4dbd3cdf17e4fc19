"""Memory of the encoder in DataLoader workers: piece tables per process against one copy per
node (``TextEncoder(tables="process" | "node")``), with the fork and spawn start methods.

Each worker reads the same documents, notes its memory, builds the encoder, encodes the
documents (one thread per worker, as a DataLoader worker runs), and notes its memory again.
The encoder's memory in a worker is the growth of its private memory (USS: pages no other
process maps) when it loads, then while it encodes (its caches, and the buffers a batch leaves
with the allocator; the output arrays are not counted); with ``node`` tables the ``/dev/shm``
file is counted once for the node. The figure that matters is what each extra worker adds:
``(total(8) - total(1)) / 7``.

    python -m benchmarks.encoder_memory [--tokenizer PATH] [--docs DIR] [--mb 20] [--workers 1 8]
        [--methods fork spawn] [--tables process node]

Also prints each worker's encoding speed (MB/s of UTF-8): node tables sit on the page size
``/dev/shm`` gives (4 KiB unless ``shmem_enabled`` allows huge pages), process tables on 2 MiB
pages, and the workers share what each merged.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import pyarrow as pa
import torch
from torch.utils.data import DataLoader, Dataset

from data_io.tokenizer.encoder import TextEncoder

_DOCS = Path("work/race/corpus150/main/docs")


def _memory() -> dict[str, int]:
    """This process's RSS and USS (private pages), in bytes, without the node tables' file: a
    page of it that only this process has touched counts as private in ``smaps``, and the file
    is counted once for the node instead."""
    rss = uss = 0
    in_node_file = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        first = line.split(maxsplit=1)[0]
        if not first.endswith(":"):  # a mapping's header line: address range, ..., path
            in_node_file = "data_io-pieces-" in line
            continue
        if in_node_file:
            continue
        if first == "Rss:":
            rss += int(line.split()[1]) * 1024
        elif first in ("Private_Clean:", "Private_Dirty:"):
            uss += int(line.split()[1]) * 1024
    return {"rss": rss, "uss": uss}


def _read_texts(docs: Path, mb: float) -> list[str]:
    """The first ``mb`` MB of text of the JSONL files in ``docs``: each line's ``text``, or a
    race row's instruction and response."""
    texts: list[str] = []
    size = 0
    for path in sorted(docs.glob("*.jsonl")):
        with path.open(encoding="utf-8") as file:
            for line in file:
                row = json.loads(line)
                for text in (
                    [row["text"]] if "text" in row else [row["instruction"], row["response"]]
                ):
                    texts.append(text)
                    size += len(text.encode())
                if size >= mb * 1e6:
                    return texts
    return texts


class _Encode(Dataset):
    """Item ``i``: worker ``i`` builds the encoder and encodes the documents."""

    def __init__(self, tokenizer: str, tables: str, workers: int, docs: Path, mb: float) -> None:
        self.tokenizer, self.tables, self.workers = tokenizer, tables, workers
        self.docs, self.mb = docs, mb

    def __len__(self) -> int:
        return self.workers

    def __getitem__(self, index: int) -> dict[str, object]:
        # An Arrow array, made before the first note: its buffers are the input's memory, read
        # in place (a list of str would add each text's UTF-8, made on first use).
        texts = pa.array(_read_texts(self.docs, self.mb), pa.large_string())
        size = texts.buffers()[2].size
        before = _memory()
        encoder = TextEncoder(self.tokenizer, tables=self.tables)
        loaded = _memory()
        start = time.perf_counter()
        batch = encoder.encode_batch(texts)
        seconds = time.perf_counter() - start
        encoded = _memory()
        return {
            "load": loaded["uss"] - before["uss"],
            "encode": encoded["uss"] - loaded["uss"] - batch.ids.nbytes - batch.offsets.nbytes,
            "mb_s": size / 1e6 / seconds,
            "where": encoder.tables,
        }


def _shared_file_bytes(where: str) -> int:
    if not where.startswith("node ("):
        return 0
    path = Path(where[len("node (") : -1])
    return path.stat().st_blocks * 512 if path.exists() else 0


def run(
    tokenizer: str, tables: str, workers: int, method: str, docs: Path, mb: float
) -> dict[str, float]:
    loader = DataLoader(
        _Encode(tokenizer, tables, workers, docs, mb),
        batch_size=None,
        num_workers=workers,
        multiprocessing_context=method,
        persistent_workers=False,
    )
    shared = 0
    stats = []
    iterator = iter(loader)
    for item in iterator:
        stats.append(item)
        # Read while the workers still hold the file (the last one out removes it).
        shared = max(shared, _shared_file_bytes(str(item["where"])))
    return {
        "load": sum(s["load"] for s in stats) + shared,
        "encode": sum(s["encode"] for s in stats),
        "shared": shared,
        "mb_s": sum(s["mb_s"] for s in stats) / len(stats),
        "where": str(stats[0]["where"]).split(" (")[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tokenizer", default=str(Path.home() / ".cache/data_io/vocab/qwen/tokenizer.json")
    )
    parser.add_argument("--docs", type=Path, default=_DOCS, help="a folder of JSONL files")
    parser.add_argument("--mb", type=float, default=20)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--methods", nargs="+", default=["fork", "spawn"])
    parser.add_argument("--tables", nargs="+", default=["process", "node"])
    args = parser.parse_args()
    os.environ["RAYON_NUM_THREADS"] = "1"  # one encoding thread per worker, as in a DataLoader
    torch.set_num_threads(1)
    print(f"{args.mb} MB of documents per worker, {os.cpu_count()} cores, one thread per worker")
    print(
        "| start | tables | workers | loaded, all workers | + while encoding | "
        "of it in /dev/shm | MB/s per worker |"
    )
    print("|---|---|---|---|---|---|---|")
    for method in args.methods:
        for tables in args.tables:
            totals = {}
            for workers in args.workers:
                r = run(args.tokenizer, tables, workers, method, args.docs, args.mb)
                totals[workers] = (r["load"], r["load"] + r["encode"])
                print(
                    f"| {method} | {r['where']} | {workers} | {r['load'] / 2**20:.0f} MiB | "
                    f"{r['encode'] / 2**20:.0f} MiB | {r['shared'] / 2**20:.0f} MiB "
                    f"| {r['mb_s']:.0f} |",
                    flush=True,
                )
            low, high = min(totals), max(totals)
            if high > low:
                load, total = (
                    (totals[high][i] - totals[low][i]) / (high - low) / 2**20 for i in (0, 1)
                )
                print(
                    f"|  | {tables}: each extra worker adds | | {load:.1f} MiB loaded | "
                    f"{total:.1f} MiB after encoding | | |"
                )


if __name__ == "__main__":
    main()
