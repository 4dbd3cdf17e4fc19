"""FLAN -> ``data_clustered/flan/<subset>__<task>.parquet`` (cleaners.md §3.20). Exemplary grouped cleaner.

Source: ``raw_data/FLAN/<subset>/*.parquet`` (``hf download Open-Orca/FLAN --repo-type dataset``);
the large top-level ``*_submix_data.json`` files are not read. Fields ``_task_name``, ``inputs``,
``targets``. Instruction = ``inputs``, response = ``targets``, both as-is; the condition is fixed
per subset (``cot`` for the two CoT subsets, ``direct`` for the twelve others). One output file per
(subset, task): ``<subset>__<safe(task)>.parquet``.

Vectorised: each Parquet batch becomes one Arrow table (no Python loop over rows); the writer
splits it by output file and never holds a whole task in memory (the original held a subset).

Quirks, decided:
- kept: every subset listed in cleaners.md and its condition; rows in source order, no dedup.
- fixed: a null ``_task_name``/``inputs``/``targets`` became the text ``None`` in the original;
  here the row is dropped and counted ("null field").
- fixed: subset folders and shard files are read in sorted order (the original used glob order).
- counted: rows of a subset folder not in the list are dropped as "subset not used".
"""

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from data_io.cleaning import (
    Cleaner,
    Drop,
    LocalFiles,
    Record,
    parquet_batches,
    parquet_files,
    safe_names,
)
from data_io.cleaning.tables import columns_of, drop_nulls, rows_table

_DIRECT = (
    "dialog_fsopt_data",
    "flan_fsopt_data",
    "flan_fsnoopt_data",
    "niv2_fsopt_data",
    "t0_fsopt_data",
    "t0_fsnoopt_data",
    "dialog_zsopt_data",
    "flan_zsopt_data",
    "flan_zsnoopt_data",
    "niv2_zsopt_data",
    "t0_zsopt_data",
    "t0_zsnoopt_data",
)
_COT = ("cot_fsopt_data", "cot_zsopt_data")

#: Subset folder -> condition of its rows.
SUBSETS: dict[str, str] = {**dict.fromkeys(_DIRECT, "direct"), **dict.fromkeys(_COT, "cot")}

FIELDS = ("_task_name", "inputs", "targets")


def clean(record: Record) -> Iterator[pa.Table | Drop]:
    subset = record.file.split("/", 1)[0]
    batch: pa.RecordBatch = record.data
    condition = SUBSETS.get(subset)
    if condition is None:
        yield Drop("subset not used", batch.num_rows)
        return
    batch, drops = drop_nulls(batch, FIELDS, "null field")
    yield from drops
    task, inputs, targets = columns_of(batch, FIELDS)
    file = pc.binary_join_element_wise(f"{subset}__", safe_names(task), "")
    yield rows_table(condition, inputs, targets, file=file)


CLEANER = Cleaner(
    name="flan",
    source=LocalFiles(
        "raw_data/FLAN",
        reader=parquet_batches(32_768),
        include=("*/*.parquet",),
        how_to_get="hf download Open-Orca/FLAN --repo-type dataset --local-dir raw_data/FLAN",
    ),
    output=parquet_files("data_clustered/flan"),
    clean=clean,
    description="FLAN: one Parquet file per (subset, task); condition by subset.",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
