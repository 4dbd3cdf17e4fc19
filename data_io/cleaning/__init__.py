"""The cleaning stage: raw datasets -> rows of (condition, instruction, response).

A cleaner module (``pipe/clean_*.py``, ``pipe_clustered/clean_*.py``) defines one
:class:`Cleaner`: its :mod:`source <data_io.cleaning.sources>`, its
:mod:`output <data_io.cleaning.writers>` and a function turning one source :class:`Record` into
:class:`Row` / :class:`Drop` objects (or Arrow tables). :mod:`data_io.cleaning.runner` does the
streaming, validation, drop counting, atomic writing and the summary. Vectorised cleaners build
on :mod:`~data_io.cleaning.tables` (columns, null and rule filters with drop counts, the rows
table) and :mod:`~data_io.cleaning.text` (``str.strip`` on Arrow columns). Modules:

* ``rows``: ``Row``, ``Drop`` and the checks a row passes; ``naming``: safe output names;
* ``sources``: where a dataset is read from (local files, Hub datasets); ``hub``: Hub access;
* ``tables`` / ``text``: the vectorised helpers; ``writers``: JSONL and Parquet outputs;
* ``group_commit``: a cleaner's files put in place as one group, killed runs' leftovers undone;
* ``runner``: ``Cleaner`` and ``run_cleaner``; ``registry``: the 25 cleaners by name;
* ``cli``: ``data_io clean``; ``scaled``: one unit per cleaner on the scale executors.

How to write a cleaner: docs/stages/clean.md.
"""

from data_io.cleaning.naming import safe_name, safe_names
from data_io.cleaning.rows import CONDITION_TAGS, CleanerAssertion, Drop, Row, require
from data_io.cleaning.runner import Cleaner, CleanReport, run_cleaner
from data_io.cleaning.sources import (
    HubDataset,
    LocalFiles,
    Record,
    TarMember,
    parquet_batches,
    parquet_rows,
    read_csv_rows,
    read_json_array,
    read_json_object,
    read_jsonl,
    read_text_lines,
    tar_members,
)
from data_io.cleaning.tables import (
    apply_rules,
    as_is_rows,
    columns_of,
    count_true,
    drop_nulls,
    first_true,
    rows_table,
)
from data_io.cleaning.text import py_strip
from data_io.cleaning.writers import jsonl_file, jsonl_files, parquet_file, parquet_files

__all__ = [
    "CONDITION_TAGS",
    "CleanReport",
    "Cleaner",
    "CleanerAssertion",
    "Drop",
    "HubDataset",
    "LocalFiles",
    "Record",
    "Row",
    "TarMember",
    "apply_rules",
    "as_is_rows",
    "columns_of",
    "count_true",
    "drop_nulls",
    "first_true",
    "jsonl_file",
    "jsonl_files",
    "parquet_batches",
    "parquet_file",
    "parquet_files",
    "parquet_rows",
    "py_strip",
    "read_csv_rows",
    "read_json_array",
    "read_json_object",
    "read_jsonl",
    "read_text_lines",
    "require",
    "rows_table",
    "run_cleaner",
    "safe_name",
    "safe_names",
    "tar_members",
]
