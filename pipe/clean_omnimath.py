"""Omni-MATH -> ``data/omnimath.jsonl`` (cleaners.md §3.7).

Source: Hub ``KbsdJames/Omni-MATH``, split ``test`` (its only split; one JSON Lines file), or its
local copy (``--source`` / ``raw_data/hub/KbsdJames/Omni-MATH``). Fields ``problem``,
``solution`` and ``answer``; ``domain``, ``difficulty`` and ``source`` are not used.

Two rows per problem, always, in this order:
1. ``cot``: problem as-is -> solution, stripped.
2. ``direct``: problem as-is -> answer, stripped.

Quirks, decided:
- kept: a benchmark's test split is used as training data (cleaners.md §7.1). It is the
  original's deliberate choice of corpus (Omni-MATH has no other split); whoever evaluates on
  Omni-MATH must leave this file out.
- kept: the problem is written as-is while solution and answer are stripped (cleaners.md §7.2);
  no filters, so an empty answer still gives its direct row, as in the original.
- fixed: a null ``solution`` or ``answer`` would have stopped the original (it strips them) and
  a null ``problem`` would have been written as JSON ``null``; such items are dropped and
  counted ("null problem, solution or answer").
"""

from collections.abc import Iterator

from data_io.cleaning import Cleaner, Drop, HubDataset, Record, Row, jsonl_file


def clean(record: Record) -> Iterator[Row | Drop]:
    problem, solution, answer = record["problem"], record["solution"], record["answer"]
    if problem is None or solution is None or answer is None:
        yield Drop("null problem, solution or answer")
        return
    yield Row("cot", problem, solution.strip())
    yield Row("direct", problem, answer.strip())


CLEANER = Cleaner(
    name="omnimath",
    source=HubDataset("KbsdJames/Omni-MATH", splits=("test",)),
    output=jsonl_file("data/omnimath.jsonl"),
    clean=clean,
    description="Omni-MATH (test split): problem -> solution (cot) and -> answer (direct).",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
