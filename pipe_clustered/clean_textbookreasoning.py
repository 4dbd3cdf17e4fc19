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

FIELDS = ("question", "answer", "reference_answer")

#: A lower-cased question containing one of these asks for a proof: no direct row.
PROOF_MARKERS = ("prove", "show that")


def _rows(condition: str, file: str, instruction: pa.Array, response: pa.Array) -> pa.Table:
    count = len(instruction)
    return pa.table(
        {
            "condition": pa.repeat(pa.scalar(condition, pa.string()), count),
            "instruction": instruction,
            "response": response,
            "file": pa.repeat(pa.scalar(file, pa.string()), count),
        }
    )


def clean(record: Record) -> Iterator[pa.Table | Drop]:
    batch: pa.Table = record.data
    missing = [name for name in FIELDS if name not in batch.column_names]
    if missing:
        raise KeyError(f"column(s) {missing} missing (found {batch.column_names})")
    complete = pc.and_(pc.is_valid(batch.column("question")), pc.is_valid(batch.column("answer")))
    if not pc.all(complete).as_py():
        kept = batch.filter(complete)
        yield Drop("null question or answer", batch.num_rows - kept.num_rows)
        batch = kept
    question, answer, reference = (batch.column(name) for name in FIELDS)
    yield _rows("synth,cot", "cot", question, answer)

    lowered = pc.utf8_lower(question)
    proof = pc.or_(*(pc.match_substring(lowered, marker) for marker in PROOF_MARKERS))
    proofs = pc.sum(proof).as_py() or 0
    if proofs:
        yield Drop("no direct row: proof question", proofs)
    wanted = pc.invert(proof)
    with_reference = pc.and_(wanted, pc.is_valid(reference))
    null_references = batch.num_rows - proofs - (pc.sum(with_reference).as_py() or 0)
    if null_references:
        yield Drop("no direct row: null reference_answer", null_references)
    direct = batch.filter(with_reference)
    if direct.num_rows:
        yield _rows(
            "noisy,direct",
            "direct",
            direct.column("question"),
            direct.column("reference_answer"),
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
