"""WebInstruct-verified -> ``data/webinstruct_verified.jsonl`` (cleaners.md §3.9).

Source: Hub ``TIGER-Lab/WebInstruct-verified``, split ``train`` (the ``test`` split is not read),
or its local copy (``--source`` / ``raw_data/hub/TIGER-Lab/WebInstruct-verified``). Fields
``question`` and ``answer``; the others (``answer_type``, ``category``, ``difficulty``, ...) are
not used. One ``direct`` row per item: question -> answer, both as-is (nothing stripped).

Vectorised: each Arrow batch from ``datasets`` becomes one output table, no Python loop per row.

Quirks, decided:
- kept: the condition is plain ``direct`` (neither ``noisy`` nor ``synth``), as in the original;
  that is how the corpus weighs this verified set, not a defect.
- kept: no filters and no stripping; the output is the original's, row for row.
- fixed: a null ``question`` or ``answer`` would have been written as JSON ``null`` (a row the
  tokenizer cannot read); such items are dropped and counted ("null question or answer").
"""

from collections.abc import Iterator

import pyarrow as pa

from data_io.cleaning import Cleaner, Drop, HubDataset, Record, jsonl_file
from data_io.cleaning.tables import as_is_rows

CONDITION = "direct"
FIELDS = ("question", "answer")


def clean(record: Record) -> Iterator[pa.Table | Drop]:
    return as_is_rows(record.data, FIELDS, CONDITION, "null question or answer")


CLEANER = Cleaner(
    name="webinstruct_verified",
    source=HubDataset("TIGER-Lab/WebInstruct-verified", splits=("train",), batch_rows=8192),
    output=jsonl_file("data/webinstruct_verified.jsonl"),
    clean=clean,
    description="WebInstruct-verified train: question -> answer (direct), as-is.",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
