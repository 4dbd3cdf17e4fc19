"""ARB (Platypus) -> ``data/Platypus/arb_<file>.jsonl`` (cleaners.md §3.10). Exemplary raw-files cleaner.

Source: ``raw_data/Platypus/ARB`` (``hf download imone/ARB --repo-type dataset``), five files,
each a JSON array of objects with ``instruction`` and ``response``. Each file gets a fixed task
description and condition; the instruction is ``<description>\\n\\n<instruction>``, the response
is kept as-is. Output: one file per source file, ``arb_`` + its name with ``.json`` -> ``.jsonl``.

Quirks: the original writes the keys in the order instruction, response, condition; ours use the
common order condition, instruction, response (JSON readers go by name, so nothing changes
downstream). No filters; a missing one of the five files is an error, not a silent skip.
"""

from collections.abc import Iterator
from pathlib import PurePosixPath

from data_io.cleaning import (
    Cleaner,
    LocalFiles,
    Record,
    Row,
    jsonl_files,
    read_json_array,
    require,
)

#: File -> (task description prepended to every instruction, condition), exact strings.
TASKS: dict[str, tuple[str, str]] = {
    "math.json": ("Solve the math problem.", "cot"),
    "reading.json": ("Solve the reading comprehension problem.", "cot"),
    "law.json": ("Choose the correct option letter.", "direct"),
    "science.json": ("Solve the science problem.", "cot"),
    "physics.json": ("Solve the physics problem.", "cot"),
}


def clean(record: Record) -> Iterator[Row]:
    description, condition = TASKS[record.file]
    # An f-string would turn a null or a number into text silently; the original's data has none.
    require(isinstance(record["instruction"], str), "instruction is not a string")
    instruction = f"{description}\n\n{record['instruction']}"
    yield Row(
        condition, instruction, record["response"], file=f"arb_{PurePosixPath(record.file).stem}"
    )


CLEANER = Cleaner(
    name="arb",
    source=LocalFiles(
        "raw_data/Platypus/ARB",
        reader=read_json_array,
        include=tuple(TASKS),
        how_to_get="hf download imone/ARB --repo-type dataset --local-dir raw_data/Platypus/ARB",
    ),
    output=jsonl_files("data/Platypus"),
    clean=clean,
    description="ARB (Platypus): five task files with a fixed task description each.",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
