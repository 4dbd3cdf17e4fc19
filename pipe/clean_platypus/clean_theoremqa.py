"""TheoremQA (Platypus) -> ``data/Platypus/theoremqa.jsonl`` (cleaners.md §3.15).

Source: Hub ``TIGER-Lab/TheoremQA``, split ``test`` (the only split); or its local copy
(``--source`` / ``raw_data/hub/TIGER-Lab/TheoremQA``). Fields ``Question``, ``Answer``,
``Picture`` (an image, null for text-only questions).

One ``direct`` row per text-only question: ``Question`` -> ``Answer``, both as-is (no
conversion, no stripping). Questions with a picture are dropped, counted ("has a picture").

Quirks, decided:
- kept: the benchmark's test split is used as training data, as in the original (intended
  corpus choice; cleaners.md §7.1 flags it for anyone evaluating on TheoremQA).
- fixed: a null ``Question``/``Answer`` would have been written as JSON ``null``, which no
  row may hold; such an item is dropped and counted ("null field"). An answer that is not a
  string stops the run with the row named (the published answers are strings).
"""

from collections.abc import Iterator

from data_io.cleaning import Cleaner, Drop, HubDataset, Record, Row, jsonl_file


def clean(record: Record) -> Iterator[Row | Drop]:
    if record["Picture"] is not None:
        yield Drop("has a picture")
    elif record["Question"] is None or record["Answer"] is None:
        yield Drop("null field")
    else:
        # Types are checked by the runner: a non-string answer fails naming the row.
        yield Row("direct", record["Question"], record["Answer"])


CLEANER = Cleaner(
    name="theoremqa",
    source=HubDataset("TIGER-Lab/TheoremQA", splits=("test",)),
    output=jsonl_file("data/Platypus/theoremqa.jsonl"),
    clean=clean,
    description="TheoremQA (Platypus): text-only questions -> answer (direct).",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
