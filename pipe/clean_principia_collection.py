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
import pyarrow.compute as pc

from data_io.cleaning import Cleaner, Drop, HubDataset, Record, jsonl_file

CONDITION = "synth,direct"
FIELDS = ("problem_statement", "answer")


def clean(record: Record) -> Iterator[pa.Table | Drop]:
    table: pa.Table = record.data
    missing = [name for name in FIELDS if name not in table.column_names]
    if missing:
        raise KeyError(f"column(s) {missing} missing (found {table.column_names})")
    problem, answer = (table.column(name) for name in FIELDS)
    if problem.null_count or answer.null_count:
        kept = table.filter(pc.and_(pc.is_valid(problem), pc.is_valid(answer)))
        yield Drop("null problem_statement or answer", table.num_rows - kept.num_rows)
        problem, answer = (kept.column(name) for name in FIELDS)
    yield pa.table(
        {
            "condition": pa.repeat(pa.scalar(CONDITION, pa.string()), len(problem)),
            "instruction": problem,
            "response": answer,
        }
    )


CLEANER = Cleaner(
    name="principia_collection",
    source=HubDataset("facebook/principia-collection", splits=None, batch_rows=8192),
    output=jsonl_file("data/principia_collection.jsonl"),
    clean=clean,
    description="Principia Collection, all splits: problem statement -> answer (synth,direct).",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
