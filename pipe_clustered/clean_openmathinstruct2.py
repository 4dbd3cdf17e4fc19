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
from data_io.cleaning.tables import apply_rules, columns_of, count_true, drop_nulls, rows_table

FIELDS = ("problem", "generated_solution", "expected_answer", "problem_source")

#: ``problem_source`` values of the original (not augmented) problems: no direct row.
ORIGINAL_SOURCES = pa.array(["math", "gsm8k"], pa.string())


def clean(record: Record) -> Iterator[pa.Table | Drop]:
    columns_of(record.data, FIELDS)  # every field present, or the run stops naming the missing
    batch, drops = drop_nulls(
        record.data, ("problem", "generated_solution"), "null problem or generated_solution"
    )
    yield from drops
    problem, solution, answer, source = columns_of(batch, FIELDS)
    yield rows_table("synth,cot", problem, solution, file="cot")

    direct, drops = apply_rules(
        (
            (
                "no direct row: problem_source is math or gsm8k",
                # A null source is not math or gsm8k (the original's ``not in`` test).
                pc.invert(pc.fill_null(pc.is_in(source, value_set=ORIGINAL_SOURCES), False)),
            ),
            ("no direct row: null expected_answer", pc.is_valid(answer)),
        )
    )
    yield from drops
    if count_true(direct):
        yield rows_table(
            "synth,direct", problem.filter(direct), answer.filter(direct), file="direct"
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
