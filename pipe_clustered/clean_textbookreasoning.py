"""TextbookReasoning -> ``data_clustered/textbookreasoning/{cot,direct}.parquet`` (cleaners.md §3.25).

Source: Hub ``MegaScience/TextbookReasoning``, split ``train``, streamed, or its local copy
(``--source`` / ``raw_data/hub/MegaScience/TextbookReasoning``). Fields ``question``, ``answer``
(the refined long answer) and ``reference_answer``.

Rows: every record gives a ``synth,cot`` row (question -> answer, as-is) in ``cot.parquet``.
When the lower-cased question contains neither ``prove`` nor ``show that`` (the proof filter of
natural_reasoning: a proof has no short answer to check), it also gives a ``noisy,direct`` row
(question -> reference_answer, as-is) in ``direct.parquet``; proof questions are counted as
"no direct row: proof question".

Vectorised: each Arrow batch from ``datasets`` becomes two tables (no Python loop over rows).
Lower-casing uses Arrow's ``utf8_lower``; it differs from Python's ``str.lower`` only for
characters (such as ``İ``) whose lower case is none of the letters searched for.

Quirks, decided:
- kept: as-is text, the substring test (``improve`` or ``approve`` also count as ``prove``: it is
  the corpus the original produced), empty reference answers kept (unlike natural_reasoning).
- fixed: a null ``question`` or ``answer`` would have written a null field; such records are
  dropped and counted. A null ``reference_answer`` drops only the direct row, counted.
"""

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from data_io.cleaning import Cleaner, Drop, HubDataset, Record, parquet_files
from data_io.cleaning.tables import apply_rules, columns_of, count_true, drop_nulls, rows_table

FIELDS = ("question", "answer", "reference_answer")

#: A lower-cased question containing one of these asks for a proof: no direct row.
PROOF_MARKERS = ("prove", "show that")


def clean(record: Record) -> Iterator[pa.Table | Drop]:
    columns_of(record.data, FIELDS)  # every field present, or the run stops naming the missing
    batch, drops = drop_nulls(record.data, ("question", "answer"), "null question or answer")
    yield from drops
    question, answer, reference = columns_of(batch, FIELDS)
    yield rows_table("synth,cot", question, answer, file="cot")

    lowered = pc.utf8_lower(question)
    proof = pc.or_(*(pc.match_substring(lowered, marker) for marker in PROOF_MARKERS))
    direct, drops = apply_rules(
        (
            ("no direct row: proof question", pc.invert(proof)),
            ("no direct row: null reference_answer", pc.is_valid(reference)),
        )
    )
    yield from drops
    if count_true(direct):
        yield rows_table(
            "noisy,direct", question.filter(direct), reference.filter(direct), file="direct"
        )


CLEANER = Cleaner(
    name="textbookreasoning",
    source=HubDataset("MegaScience/TextbookReasoning", splits=("train",), batch_rows=16_384),
    output=parquet_files("data_clustered/textbookreasoning"),
    clean=clean,
    description="TextbookReasoning train: long answers (synth,cot) and reference answers of "
    "non-proof questions (noisy,direct).",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
