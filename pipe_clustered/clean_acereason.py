"""AceReason-1.1-SFT -> ``data_clustered/acereason/all.parquet`` (cleaners.md §3.17).

Source: Hub ``nvidia/AceReason-1.1-SFT``, split ``train`` (streamed), or its local copy
(``--source`` / ``raw_data/hub/nvidia/AceReason-1.1-SFT``). Fields ``category``, ``input``,
``output``. Only ``category == "math"`` is kept (the rest counted, "category is not math").

One ``synth,cot`` row per kept item: ``input`` as-is -> ``output`` with every
``<think>...</think>`` span removed (shortest match, across lines), **not stripped**: the blank
line that follows ``</think>`` stays, as in the original.
Assertion (§4): each kept ``output`` contains ``<think>`` exactly once; otherwise the run fails
naming the split and row.

Vectorised: each batch of 1,024 rows is filtered and rewritten with Arrow compute functions
(RE2's lazy ``.*?`` with ``(?s)`` removes the same spans as Python's ``re.DOTALL``); no Python
loop over rows. OpenThoughts2 (``clean_openthoughts2``) reuses :func:`answer_rows`.

Quirks, decided:
- kept: the unstripped response (a deliberate copy of the original's bytes; stripping would
  change every row's tokens for no gain).
- fixed: a null ``input``/``output`` is dropped and counted ("null field") rather than failing
  later or being written as ``None``.
- fixed: an answer that is empty after the ``<think>`` span is removed, or whose ``<think>`` is
  never closed (the whole trace would become the answer), teaches nothing the ``synth,cot`` tag
  promises; such rows are dropped and counted ("empty answer after removing <think>",
  "unclosed <think>"). The original kept them.
"""

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from data_io.cleaning import Cleaner, CleanerAssertion, Drop, HubDataset, Record, parquet_file
from data_io.cleaning.tables import apply_rules, columns_of, count_true, first_true, rows_table

CONDITION = "synth,cot"
#: A ``<think>...</think>`` span: lazy, and ``.`` matches newlines (RE2 syntax, as Python's).
THINK_SPAN = r"(?s)<think>.*?</think>"
UNCLOSED = "unclosed <think>"
EMPTY_ANSWER = "empty answer after removing <think>"
FIELDS = ("category", "input", "output")


def remove_think(text: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """``text`` with every ``<think>...</think>`` span removed; not stripped."""
    return pc.replace_substring_regex(text, THINK_SPAN, "")


def answer_rows(instruction: pa.ChunkedArray, output: pa.ChunkedArray) -> Iterator[pa.Table | Drop]:
    """The ``synth,cot`` table of (instruction, output without its thinking), leaving out the
    rows whose answer is unusable (counted)."""
    response = remove_think(output)
    unclosed = pc.match_substring(response, "<think>")
    empty = pc.equal(pc.utf8_trim_whitespace(response), "")
    keep, drops = apply_rules(((UNCLOSED, pc.invert(unclosed)), (EMPTY_ANSWER, pc.invert(empty))))
    yield from drops
    if count_true(keep):
        yield rows_table(CONDITION, instruction.filter(keep), response.filter(keep))


def clean(record: Record) -> Iterator[pa.Table | Drop]:
    category, instruction, output = columns_of(record.data, FIELDS)
    complete, drops = apply_rules(
        (
            ("category is not math", pc.equal(category, "math")),
            ("null field", pc.and_(pc.is_valid(instruction), pc.is_valid(output))),
        )
    )
    yield from drops
    thinks = pc.count_substring(output, "<think>")
    wrong = pc.and_(complete, pc.not_equal(thinks, 1))
    if count_true(wrong):
        row = first_true(wrong)
        raise CleanerAssertion(
            f"{record.file} row {record.index + row}: output contains '<think>' "
            f"{thinks[row].as_py()} times, expected exactly 1"
        )
    yield from answer_rows(instruction.filter(complete), output.filter(complete))


CLEANER = Cleaner(
    name="acereason",
    source=HubDataset("nvidia/AceReason-1.1-SFT", splits=("train",), batch_rows=1024),
    output=parquet_file("data_clustered/acereason/all.parquet"),
    clean=clean,
    description="AceReason-1.1-SFT: math items, output without its <think> span (synth,cot).",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
