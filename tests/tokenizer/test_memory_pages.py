"""The extension's heap stays on ordinary pages (``heap_on_small_pages`` in ``rust/bindings/allocator.rs``):
mimalloc would advise transparent huge pages for the arenas it maps, where a batch's texts and
ids gain nothing from them and each fault zeroes 2 MiB. Checked in a fresh process, after an
encoder load and a batch, on the arenas' mappings (1 GiB each) in ``/proc/self/smaps``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")

CHILD = """
import json, sys
from data_io.tokenizer.encoder import TextEncoder

encoder = TextEncoder(sys.argv[1])
texts = [f"document {i} of a batch, with words enough to fill pages " * 40 for i in range(20000)]
ids = encoder.encode_batch(texts, encoder.eos_id_for("<|endoftext|>")).ids
arenas = []
size = None
for line in open("/proc/self/smaps"):
    fields = line.split()
    if "-" in fields[0] and not fields[0].endswith(":"):
        start, end = (int(x, 16) for x in fields[0].split("-"))
        size = end - start
    elif fields[0] == "AnonHugePages:" and size == 1 << 30:
        arenas.append(int(fields[1]))
print(json.dumps({"tokens": len(ids), "arenas_huge_kb": arenas}))
"""


@pytest.mark.skipif(
    sys.platform != "linux" or not THP.exists() or "[never]" in THP.read_text(),
    reason="transparent huge pages are a Linux kernel's, and on here",
)
def test_the_allocators_arenas_hold_no_huge_pages(small_tokenizer: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(small_tokenizer)],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(done.stdout)
    assert report["tokens"] > 1_000_000  # tens of MiB went through the heap
    assert report["arenas_huge_kb"], "no 1 GiB arena mapping found"
    assert report["arenas_huge_kb"] == [0] * len(report["arenas_huge_kb"])
