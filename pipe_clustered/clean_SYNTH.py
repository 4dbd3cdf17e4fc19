"""SYNTH -> ``data_clustered/SYNTH/<shard>.parquet`` (cleaners.md §3.16).

Source: every ``*.parquet`` directly in ``raw_data/SYNTH``
(``hf download PleIAs/SYNTH --repo-type dataset``), shards in sorted order. Only the six columns
used are read (``language``, ``query_seed_url``, ``exercise``, ``query``, ``constraints``,
``synthetic_answer``); the large reasoning-trace column is never decoded.

Filters (each dropped row is counted under its first failing rule): ``language`` is ``en``;
``query_seed_url`` does not contain ``Pleias self-knowledge``; ``exercise`` is not ``cooking``.
Instruction: ``query``, or for ``exercise == "rag"`` ``query`` immediately followed by
``constraints`` (no separator). Response: ``synthetic_answer``. Condition by exercise:
``synth,cot`` (creative writing, rag, memorization, constrained writing, editing),
``synth,direct`` (math mcq, mcq), ``synth,noisy,cot`` (math exercise). Output: one file per input
shard, with the shard's file name.

Vectorised: each Parquet batch becomes one Arrow table, no Python loop over rows.

Quirks, decided:
- kept: the three filters, the condition table, the separator-less ``rag`` join (it is the corpus
  the model was trained on; cleaners.md §7.4), one output per shard under the same name.
- kept: a null ``language``, ``query_seed_url`` or ``exercise`` fails the filter, as under polars;
  here the row is counted ("null language, query_seed_url or exercise").
- fixed: an exercise outside the table got the empty condition ``""``, which the tokenizer cannot
  map (cleaners.md §1.5, §7.3); here such rows are dropped and counted per exercise value, so a new
  value shows in the summary instead of crashing tokenization.
- fixed: a null ``query``/``synthetic_answer`` (or ``constraints`` of a rag row) gave a null
  instruction or response; here the row is dropped and counted.
- fixed: shards are read in sorted order (the original used the directory order).
- differs: columns are written as condition, instruction, response (the original wrote
  instruction, condition, response; readers go by name); a shard left with no rows writes no file.
"""

from collections.abc import Iterator
from pathlib import PurePosixPath

import pyarrow as pa
import pyarrow.compute as pc

from data_io.cleaning import Cleaner, Drop, LocalFiles, Record, parquet_batches, parquet_files
from data_io.cleaning.tables import apply_rules, rows_table

#: ``exercise`` value -> condition, exact strings (cleaners.md §3.16).
CONDITIONS: dict[str, str] = {
    "creative writing": "synth,cot",
    "rag": "synth,cot",
    "memorization": "synth,cot",
    "constrained writing": "synth,cot",
    "editing": "synth,cot",
    "math mcq": "synth,direct",
    "mcq": "synth,direct",
    "math exercise": "synth,noisy,cot",
}

SELF_KNOWLEDGE = "Pleias self-knowledge"
COLUMNS = ("language", "query_seed_url", "exercise", "query", "constraints", "synthetic_answer")

_EXERCISES = pa.array(list(CONDITIONS), pa.string())
_CONDITION_VALUES = pa.array(list(CONDITIONS.values()), pa.string())


def clean(record: Record) -> Iterator[pa.Table | Drop]:
    batch: pa.RecordBatch = record.data
    language, url, exercise, query, constraints, answer = (batch.column(c) for c in COLUMNS)

    keep, dropped = apply_rules(
        (
            (
                "null language, query_seed_url or exercise",
                pc.and_(pc.and_(pc.is_valid(language), pc.is_valid(url)), pc.is_valid(exercise)),
            ),
            ("language is not en", pc.equal(language, "en")),
            ("Pleias self-knowledge seed", pc.invert(pc.match_substring(url, SELF_KNOWLEDGE))),
            ("cooking exercise", pc.not_equal(exercise, "cooking")),
        )
    )

    # Exercises without a condition: counted per value (a short, bounded list of reasons).
    mapped = pc.is_in(exercise, value_set=_EXERCISES)
    unmapped = pc.and_(keep, pc.invert(pc.fill_null(mapped, False)))
    if pc.any(unmapped).as_py():
        for item in pc.value_counts(pc.filter(exercise, unmapped)).to_pylist():
            dropped.append(Drop(f"exercise {item['values']!r} has no condition", item["counts"]))
        keep = pc.and_(keep, mapped)

    is_rag = pc.equal(exercise, "rag")
    text_ok = pc.and_(
        pc.and_(pc.is_valid(query), pc.is_valid(answer)),
        pc.or_(pc.invert(is_rag), pc.is_valid(constraints)),
    )
    keep, more = apply_rules((("null query, constraints or synthetic_answer", text_ok),), keep)
    yield from dropped
    yield from more
    kept = batch.filter(keep)
    if not kept.num_rows:
        return
    exercise, query, constraints = (kept.column(c) for c in ("exercise", "query", "constraints"))
    rag = pc.equal(exercise, "rag")
    # The rag join uses constraints only where it is read, so a null elsewhere is harmless.
    joined = pc.binary_join_element_wise(query, pc.fill_null(constraints, ""), "")
    yield rows_table(
        pc.take(_CONDITION_VALUES, pc.index_in(exercise, value_set=_EXERCISES)),
        pc.if_else(rag, joined, query),
        kept.column("synthetic_answer"),
        file=PurePosixPath(record.file).stem,
    )


CLEANER = Cleaner(
    name="SYNTH",
    source=LocalFiles(
        "raw_data/SYNTH",
        reader=parquet_batches(32_768, columns=COLUMNS),
        include=("*.parquet",),
        how_to_get="hf download PleIAs/SYNTH --repo-type dataset --local-dir raw_data/SYNTH",
    ),
    output=parquet_files("data_clustered/SYNTH"),
    clean=clean,
    description="SYNTH (PleIAs): English, non-cooking, non-self-knowledge rows; one file per shard.",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
