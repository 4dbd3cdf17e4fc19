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
import pyarrow.compute as pc

from data_io.cleaning import Cleaner, Drop, HubDataset, Record, jsonl_file

CONDITION = "direct"
FIELDS = ("question", "answer")


def clean(record: Record) -> Iterator[pa.Table | Drop]:
    table: pa.Table = record.data
    missing = [name for name in FIELDS if name not in table.column_names]
    if missing:
        raise KeyError(f"column(s) {missing} missing (found {table.column_names})")
    question, answer = (table.column(name) for name in FIELDS)
    if question.null_count or answer.null_count:
        kept = table.filter(pc.and_(pc.is_valid(question), pc.is_valid(answer)))
        yield Drop("null question or answer", table.num_rows - kept.num_rows)
        question, answer = (kept.column(name) for name in FIELDS)
    yield pa.table(
        {
            "condition": pa.repeat(pa.scalar(CONDITION, pa.string()), len(question)),
            "instruction": question,
            "response": answer,
        }
    )


CLEANER = Cleaner(
    name="webinstruct_verified",
    source=HubDataset("TIGER-Lab/WebInstruct-verified", splits=("train",), batch_rows=8192),
    output=jsonl_file("data/webinstruct_verified.jsonl"),
    clean=clean,
    description="WebInstruct-verified train: question -> answer (direct), as-is.",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
