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
from data_io.cleaning.tables import apply_rules, columns_of, rows_table
from data_io.cleaning.text import py_strip

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
    synthetic, problem_valid, solution_valid, problem, solution, answer, question_type = columns_of(
        record.data, FIELDS
    )
    stripped_problem, stripped_solution = py_strip(problem), py_strip(solution)

    # The keep rules, in the order their drops are counted under (a null never holds).
    kept, drops = apply_rules(
        (
            ("synthetic", pc.equal(synthetic, False)),
            ("problem not valid", pc.equal(problem_valid, VALID)),
            ("solution not valid", pc.equal(solution_valid, VALID)),
            (
                "null problem, solution or answer",
                pc.and_(pc.and_(pc.is_valid(problem), pc.is_valid(solution)), pc.is_valid(answer)),
            ),
            (
                "contains http",
                pc.invert(
                    _true(
                        pc.or_(
                            pc.match_substring(problem, "http"),
                            pc.match_substring(solution, "http"),
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
                pc.and_(
                    pc.greater(pc.utf8_length(stripped_problem), 0),
                    pc.greater(pc.utf8_length(stripped_solution), 0),
                ),
            ),
        )
    )
    yield from drops

    problem = pc.filter(stripped_problem, kept)
    solution = pc.filter(stripped_solution, kept)
    answer = pc.filter(answer, kept)
    proof = pc.or_(_true(pc.equal(pc.filter(question_type, kept), PROOF)), pc.equal(answer, PROOF))
    answer = py_strip(answer)
    # The cot row of an item is written either way; these rules only decide its direct row.
    direct, drops = apply_rules(
        (
            ("no direct row: proof", pc.invert(proof)),
            ("no direct row: empty answer", pc.greater(pc.utf8_length(answer), 0)),
        )
    )
    yield from drops

    # Item i gives its cot row (key 2i) and, when it has one, its direct row (key 2i + 1).
    items = len(problem)
    keys = np.concatenate(
        [2 * np.arange(items), 2 * np.flatnonzero(direct.to_numpy(zero_copy_only=False)) + 1]
    )
    directs = int(len(keys) - items)
    rows = rows_table(
        pa.concat_arrays(
            [
                pa.repeat(pa.scalar("noisy,cot", pa.string()), items),
                pa.repeat(pa.scalar("noisy,direct", pa.string()), directs),
            ]
        ),
        pa.chunked_array([*problem.chunks, *pc.filter(problem, direct).chunks], type=problem.type),
        pa.chunked_array([*solution.chunks, *pc.filter(answer, direct).chunks], type=solution.type),
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
