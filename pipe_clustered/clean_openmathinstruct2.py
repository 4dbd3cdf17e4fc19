"""OpenMathInstruct-2 -> ``data_clustered/openmathinstruct2/{cot,direct}.parquet`` (cleaners.md §3.21).

Source: Hub ``nvidia/OpenMathInstruct-2``, split ``train`` (the full train split; the
``train_1M``/``train_2M``/``train_5M`` subsets are not read), streamed, or its local copy
(``--source`` / ``raw_data/hub/nvidia/OpenMathInstruct-2``). Fields ``problem``,
``generated_solution``, ``expected_answer``, ``problem_source``.

Rows: every record gives a ``synth,cot`` row (problem -> generated_solution, as-is) in
``cot.parquet``; a record whose ``problem_source`` is neither ``math`` nor ``gsm8k`` (an
augmented, synthetic problem) also gives a ``synth,direct`` row (problem -> expected_answer, as-is)
in ``direct.parquet``. The direct answers of the original MATH/GSM8K problems come from the
math_train/gsm8k_train cleaners instead; those records are counted as
"no direct row: problem_source is math or gsm8k".

Vectorised: each Arrow batch from ``datasets`` becomes two tables (no Python loop over rows).

Quirks, decided:
- kept: the full train split, the math/gsm8k exclusion of direct rows, as-is text (the overlap of
  cot rows with MATH/GSM8K is intended, cleaners.md §7.8).
- kept: a null ``problem_source`` counts as "not math or gsm8k" (the original's ``not in`` test).
- fixed: a null ``problem`` or ``generated_solution`` would have written a null field; such
  records are dropped and counted. A null ``expected_answer`` drops only the direct row, counted.
"""

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from data_io.cleaning import Cleaner, Drop, HubDataset, Record, parquet_files

FIELDS = ("problem", "generated_solution", "expected_answer", "problem_source")

#: ``problem_source`` values of the original (not augmented) problems: no direct row.
ORIGINAL_SOURCES = pa.array(["math", "gsm8k"], pa.string())


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
    problem, solution = batch.column("problem"), batch.column("generated_solution")
    complete = pc.and_(pc.is_valid(problem), pc.is_valid(solution))
    if not pc.all(complete).as_py():
        kept = batch.filter(complete)
        yield Drop("null problem or generated_solution", batch.num_rows - kept.num_rows)
        batch = kept
    problem, solution, answer, source = (batch.column(name) for name in FIELDS)
    yield _rows("synth,cot", "cot", problem, solution)

    augmented = pc.invert(pc.fill_null(pc.is_in(source, value_set=ORIGINAL_SOURCES), False))
    original = batch.num_rows - (pc.sum(augmented).as_py() or 0)
    if original:
        yield Drop("no direct row: problem_source is math or gsm8k", original)
    with_answer = pc.and_(augmented, pc.is_valid(answer))
    null_answers = (pc.sum(augmented).as_py() or 0) - (pc.sum(with_answer).as_py() or 0)
    if null_answers:
        yield Drop("no direct row: null expected_answer", null_answers)
    direct = batch.filter(with_answer)
    if direct.num_rows:
        yield _rows(
            "synth,direct", "direct", direct.column("problem"), direct.column("expected_answer")
        )


CLEANER = Cleaner(
    name="openmathinstruct2",
    source=HubDataset("nvidia/OpenMathInstruct-2", splits=("train",), batch_rows=16_384),
    output=parquet_files("data_clustered/openmathinstruct2"),
    clean=clean,
    description="OpenMathInstruct-2 train: every solution (synth,cot) and the answers of "
    "augmented problems (synth,direct).",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
