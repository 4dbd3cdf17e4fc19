"""Principia Collection -> ``data/principia_collection.jsonl`` (cleaners.md §3.8).

Source: Hub ``facebook/principia-collection``, every split in the dataset's own order (today
``mathematical_object`` then ``numerical``), or its local copy (``--source`` /
``raw_data/hub/facebook/principia-collection``). Fields ``problem_statement`` and ``answer``;
``topic`` and ``answer_type`` are not used. One ``synth,direct`` row per item:
problem_statement -> answer, both as-is (nothing stripped).

Vectorised: each Arrow batch from ``datasets`` becomes one output table, no Python loop per row.

Quirks, decided:
- kept: every split is used (the dataset has no train/test division; both splits are training
  data by design), in the order the dataset lists them.
- kept: no filters and no stripping; the output is the original's, row for row.
- fixed: a null ``problem_statement`` or ``answer`` would have been written as JSON ``null``;
  such items are dropped and counted ("null problem_statement or answer").
"""

from collections.abc import Iterator

import pyarrow as pa

from data_io.cleaning import Cleaner, Drop, HubDataset, Record, jsonl_file
from data_io.cleaning.tables import as_is_rows

CONDITION = "synth,direct"
FIELDS = ("problem_statement", "answer")


def clean(record: Record) -> Iterator[pa.Table | Drop]:
    return as_is_rows(record.data, FIELDS, CONDITION, "null problem_statement or answer")


CLEANER = Cleaner(
    name="principia_collection",
    source=HubDataset("facebook/principia-collection", splits=None, batch_rows=8192),
    output=jsonl_file("data/principia_collection.jsonl"),
    clean=clean,
    description="Principia Collection, all splits: problem statement -> answer (synth,direct).",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
