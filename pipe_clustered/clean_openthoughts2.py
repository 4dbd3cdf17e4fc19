"""OpenThoughts2-1M -> ``data_clustered/openthoughts2/all.parquet`` (cleaners.md §3.22).

Source: Hub ``open-thoughts/OpenThoughts2-1M``, split ``train`` (streamed), or its local copy
(``--source`` / ``raw_data/hub/open-thoughts/OpenThoughts2-1M``). Fields ``source`` and
``conversations`` (a list of ``{"from", "value"}`` turns).

Filters, in order (each counted by reason):
1. ``source`` is a code dataset (``CODE_SOURCES``) -> "code source"; ``nvidia_math`` ->
   "nvidia_math source (covered by OpenMathInstruct-2)".
2. Assertions (§4) on the rows left: exactly 2 turns, from ``user`` then ``assistant``;
   otherwise the run fails naming the split and row.
3. ``python`` (any case) in the user or the assistant text, or a triple backtick in the
   assistant text -> "mentions python or has a code fence" (checked on the raw texts, before
   the thinking is removed).

One ``synth,cot`` row per item left: the user text as-is -> the assistant text with every
``<think>...</think>`` span removed, not stripped (the same rule and helpers as
``clean_acereason``). Vectorised with Arrow compute functions, 1,024 rows per batch.

Quirks, decided:
- kept: the unstripped response, as in the original (see clean_acereason).
- fixed: a null turn text is dropped and counted ("null field"); answers left empty by the
  ``<think>`` removal, or with an unclosed ``<think>``, are dropped and counted (see
  clean_acereason); the original kept them.
"""

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from data_io.cleaning import Cleaner, CleanerAssertion, Drop, HubDataset, Record, parquet_file
from data_io.cleaning.tables import apply_rules, columns_of, count_true, first_true
from pipe_clustered.clean_acereason import answer_rows

#: Sources of code data, which this corpus leaves out.
CODE_SOURCES = ("dolphin", "evolcodegolf", "glaive", "magicoder", "sharegpt", "codefeedback")
#: Already in the corpus through OpenMathInstruct-2.
MATH_SOURCE = "nvidia_math"
CODE = pa.array(CODE_SOURCES, pa.string())
ROLES = ("user", "assistant")


def _check_turns(record: Record, turns: pa.ChunkedArray, positions: pa.Array) -> None:
    """The §4 assertions; ``positions`` maps each row of ``turns`` to its row in the batch."""
    counts = pc.fill_null(pc.list_value_length(turns), 0)
    if count_true(wrong := pc.not_equal(counts, 2)):
        row = first_true(wrong)
        raise CleanerAssertion(
            f"{record.file} row {record.index + positions[row].as_py()}: "
            f"{counts[row].as_py()} conversation turns, expected 2 (user, assistant)"
        )
    speakers = [pc.struct_field(pc.list_element(turns, i), "from") for i in range(2)]
    right = pc.and_(pc.equal(speakers[0], ROLES[0]), pc.equal(speakers[1], ROLES[1]))
    if count_true(wrong := pc.invert(pc.fill_null(right, False))):
        row = first_true(wrong)
        found = tuple(speaker[row].as_py() for speaker in speakers)
        raise CleanerAssertion(
            f"{record.file} row {record.index + positions[row].as_py()}: turns are from "
            f"{found[0]!r} then {found[1]!r}, expected 'user' then 'assistant'"
        )


def clean(record: Record) -> Iterator[pa.Table | Drop]:
    source, conversations = columns_of(record.data, ("source", "conversations"))
    # A null source is neither a code source nor nvidia_math: the row is kept.
    kept, drops = apply_rules(
        (
            ("code source", pc.invert(pc.fill_null(pc.is_in(source, value_set=CODE), False))),
            (
                f"{MATH_SOURCE} source (covered by OpenMathInstruct-2)",
                pc.invert(pc.fill_null(pc.equal(source, MATH_SOURCE), False)),
            ),
        )
    )
    yield from drops
    turns = conversations.filter(kept)
    _check_turns(record, turns, pc.indices_nonzero(kept))
    user, assistant = (
        pc.struct_field(pc.list_element(turns, i), "value") for i in range(len(ROLES))
    )
    code_like = pc.or_(
        pc.or_(
            pc.match_substring(user, "python", ignore_case=True),
            pc.match_substring(assistant, "python", ignore_case=True),
        ),
        pc.match_substring(assistant, "```"),
    )
    keep, drops = apply_rules(
        (
            ("null field", pc.and_(pc.is_valid(user), pc.is_valid(assistant))),
            ("mentions python or has a code fence", pc.invert(code_like)),
        )
    )
    yield from drops
    yield from answer_rows(user.filter(keep), assistant.filter(keep))


CLEANER = Cleaner(
    name="openthoughts2",
    source=HubDataset("open-thoughts/OpenThoughts2-1M", splits=("train",), batch_rows=1024),
    output=parquet_file("data_clustered/openthoughts2/all.parquet"),
    clean=clean,
    description="OpenThoughts2-1M: non-code user/assistant pairs without <think> (synth,cot).",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
