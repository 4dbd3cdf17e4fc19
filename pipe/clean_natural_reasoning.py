"""NaturalReasoning -> ``data/natural_reasoning.jsonl`` (cleaners.md §3.4).

Source: Hub ``facebook/natural_reasoning``, split ``train`` (one large JSON Lines file), or its
local copy (``--source`` / ``raw_data/hub/facebook/natural_reasoning``). Fields ``question`` and
``reference_answer``; the model ``responses`` are not used.

One ``noisy,direct`` row per kept item: question as-is -> reference answer, stripped. An item is
dropped when its reference answer is empty after stripping ("no reference answer"; about 18% of
the dataset), or when the lower-cased question contains ``prove`` or ``show that`` ("proof
question": a proof has no short answer to check).

Vectorised: each Arrow batch from ``datasets`` is filtered and trimmed with ``pyarrow.compute``,
no Python loop per row. The results equal Python's ``str.strip``/``str.lower``: the trim uses
exactly the characters ``str.isspace`` accepts, and the only characters whose lower case
contains a letter of ``prove``/``show that`` are the ASCII capitals, which ``utf8_lower`` maps
the same way (a test compares both on awkward text).

Quirks, decided:
- kept: the proof filter is a plain substring test, so "improve", "approve", "showed that" do not
  matter but "improved" drops the item; it is the original's rule and defines this corpus (a
  word-level rule would be a new filter, not a fix). Drops are counted, so its reach is visible.
- kept: the question is written as-is while the answer is stripped (cleaners.md §7.2).
- fixed: a null ``reference_answer`` would have stopped the original (``None.strip()``); it is
  counted with the empty ones. A null ``question`` is dropped and counted ("null question").
"""

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from data_io.cleaning import Cleaner, Drop, HubDataset, Record, jsonl_file
from data_io.cleaning.tables import apply_rules, columns_of, rows_table
from data_io.cleaning.text import py_strip

CONDITION = "noisy,direct"
FIELDS = ("question", "reference_answer")
#: Substrings of the lower-cased question that mark a proof question.
PROOF_MARKERS = ("prove", "show that")


def clean(record: Record) -> Iterator[pa.Table | Drop]:
    question, reference = columns_of(record.data, FIELDS)
    answer = py_strip(reference)
    lowered = pc.utf8_lower(question)
    proof = pc.or_(*(pc.match_substring(lowered, marker) for marker in PROOF_MARKERS))
    # Each dropped item is counted under the first rule it fails, in this order.
    keep, drops = apply_rules(
        (
            ("null question", pc.is_valid(question)),
            ("no reference answer", pc.greater(pc.utf8_length(answer), 0)),
            ("proof question", pc.invert(proof)),
        )
    )
    yield from drops
    yield rows_table(CONDITION, pc.filter(question, keep), pc.filter(answer, keep))


CLEANER = Cleaner(
    name="natural_reasoning",
    source=HubDataset("facebook/natural_reasoning", splits=("train",), batch_rows=8192),
    output=jsonl_file("data/natural_reasoning.jsonl"),
    clean=clean,
    description="NaturalReasoning train: question -> stripped reference answer (noisy,direct); "
    "proof questions and empty answers dropped.",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
