"""NuminaMath-1.5 -> ``data/numinamath.jsonl`` (cleaners.md §3.6).

Source: Hub ``AI-MO/NuminaMath-1.5``, split ``train``, or its local copy (``--source`` /
``raw_data/hub/AI-MO/NuminaMath-1.5``). Fields ``synthetic``, ``problem_is_valid``,
``solution_is_valid``, ``problem``, ``solution``, ``answer`` and ``question_type``.

An item is kept only when all of these hold; otherwise it is dropped and counted under the first
rule it fails, in this order: not ``synthetic`` ("synthetic"); ``problem_is_valid == "Yes"``
("problem not valid"); ``solution_is_valid == "Yes"`` ("solution not valid"); ``problem``,
``solution`` and ``answer`` not null ("null problem, solution or answer"); no ``http`` in the
problem or the solution ("contains http"); the solution does not contain ``Translate the text
above into English`` ("translation artefact"); the stripped problem and stripped solution are
not empty ("empty problem or solution").

Rows of a kept item, in this order:
1. ``noisy,cot``: stripped problem -> stripped solution.
2. ``noisy,direct``: stripped problem -> stripped answer, unless ``question_type`` is
   ``proof`` or the answer is ``proof`` ("no direct row: proof"), or the stripped answer is empty
   ("no direct row: empty answer"). The cot row is written either way.

Vectorised: each Arrow batch from ``datasets`` is filtered and stripped with
``pyarrow.compute`` (``str.strip`` semantics, see :mod:`data_io.cleaning.text`); the cot and
direct rows are then interleaved by item, so the output order is the per-item one above.

Quirks, decided:
- kept: placeholder answers other than ``proof`` (such as ``notfound``) still give a direct row,
  as in the original; which placeholders exist is not documented upstream, so filtering more
  would be guesswork that changes the corpus. They are tagged ``noisy``.
- kept: ``answer == "proof"`` compares the unstripped answer, as cleaners.md describes the
  original (so `` proof `` gives a direct row ``proof``).
- decided: the rule keeps items whose ``synthetic`` flag is false, so a null flag counts as
  "synthetic" (the item is not shown to be human-written). NuminaMath-1.5 declares the column
  as a bool, so this only matters if nulls ever appear.
"""

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from data_io.cleaning import Cleaner, Drop, HubDataset, Record, jsonl_file
from data_io.cleaning.text import count_true, py_strip

VALID = "Yes"
PROOF = "proof"
TRANSLATION_ARTEFACT = "Translate the text above into English"
FIELDS = (
    "synthetic",
    "problem_is_valid",
    "solution_is_valid",
    "problem",
    "solution",
    "answer",
    "question_type",
)


def _true(mask: pa.ChunkedArray) -> pa.ChunkedArray:
    """``mask`` with nulls read as false (a rule on a null value does not hold)."""
    return pc.fill_null(mask, False)


def clean(record: Record) -> Iterator[pa.Table | Drop]:
    table: pa.Table = record.data
    missing = [name for name in FIELDS if name not in table.column_names]
    if missing:
        raise KeyError(f"column(s) {missing} missing (found {table.column_names})")
    column = table.column
    problem, solution, answer = column("problem"), column("solution"), column("answer")
    stripped_problem, stripped_solution = py_strip(problem), py_strip(solution)

    # The keep rules, in the order their drops are counted under.
    rules = (
        ("synthetic", _true(pc.equal(column("synthetic"), False))),
        ("problem not valid", _true(pc.equal(column("problem_is_valid"), VALID))),
        ("solution not valid", _true(pc.equal(column("solution_is_valid"), VALID))),
        (
            "null problem, solution or answer",
            pc.and_(pc.and_(pc.is_valid(problem), pc.is_valid(solution)), pc.is_valid(answer)),
        ),
        (
            "contains http",
            pc.invert(
                _true(
                    pc.or_(
                        pc.match_substring(problem, "http"), pc.match_substring(solution, "http")
                    )
                )
            ),
        ),
        (
            "translation artefact",
            pc.invert(_true(pc.match_substring(solution, TRANSLATION_ARTEFACT))),
        ),
        (
            "empty problem or solution",
            _true(
                pc.and_(
                    pc.greater(pc.utf8_length(stripped_problem), 0),
                    pc.greater(pc.utf8_length(stripped_solution), 0),
                )
            ),
        ),
    )
    kept = pa.chunked_array([pa.array(np.ones(table.num_rows, dtype=bool))])
    for reason, holds in rules:
        failed = count_true(pc.and_(kept, pc.invert(holds)))
        if failed:
            yield Drop(reason, failed)
        kept = pc.and_(kept, holds)

    problem = pc.filter(stripped_problem, kept)
    solution = pc.filter(stripped_solution, kept)
    answer = pc.filter(answer, kept)
    proof = pc.or_(
        _true(pc.equal(pc.filter(column("question_type"), kept), PROOF)), pc.equal(answer, PROOF)
    )
    answer = py_strip(answer)
    has_answer = pc.greater(pc.utf8_length(answer), 0)
    direct = pc.and_(pc.invert(proof), has_answer)
    for reason, count in (
        ("no direct row: proof", count_true(proof)),
        (
            "no direct row: empty answer",
            count_true(pc.and_(pc.invert(proof), pc.invert(has_answer))),
        ),
    ):
        if count:
            yield Drop(reason, count)

    # Item i gives its cot row (key 2i) and, when it has one, its direct row (key 2i + 1).
    items = len(problem)
    keys = np.concatenate(
        [2 * np.arange(items), 2 * np.flatnonzero(direct.to_numpy(zero_copy_only=False)) + 1]
    )
    directs = int(len(keys) - items)
    rows = pa.table(
        {
            "condition": pa.concat_arrays(
                [
                    pa.repeat(pa.scalar("noisy,cot", pa.string()), items),
                    pa.repeat(pa.scalar("noisy,direct", pa.string()), directs),
                ]
            ),
            "instruction": pa.chunked_array(
                [*problem.chunks, *pc.filter(problem, direct).chunks], type=problem.type
            ),
            "response": pa.chunked_array(
                [*solution.chunks, *pc.filter(answer, direct).chunks], type=solution.type
            ),
        }
    )
    yield rows.take(pa.array(np.argsort(keys, kind="stable")))


CLEANER = Cleaner(
    name="numinamath",
    source=HubDataset("AI-MO/NuminaMath-1.5", splits=("train",), batch_rows=8192),
    output=jsonl_file("data/numinamath.jsonl"),
    clean=clean,
    description="NuminaMath-1.5 train, valid human-written items: problem -> solution "
    "(noisy,cot) and -> answer (noisy,direct).",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
