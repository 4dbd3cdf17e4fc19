"""ReClor (Platypus) -> ``data/Platypus/reclor.jsonl`` (cleaners.md §3.12).

Source: Hub ``metaeval/reclor`` (now also served as ``tasksource/reclor``), splits ``train``
then ``validation`` (its ``val.json``); or its local copy (``--source`` /
``raw_data/hub/metaeval/reclor``). Fields ``context``, ``question``, ``answers`` (list),
``label`` (index of the correct answer).

One ``direct`` row per item. Instruction (exact, nothing stripped; the question comes before
the passage)::

    <question>

    <context>

    Options:
    A: <answer 0>
    B: <answer 1>
    ...

Response: the correct letter, ``A`` + ``label``.

Quirks, decided:
- kept: train and validation are used, test is not (intended corpus choice, §7.1); the
  question-before-passage order; nothing stripped. The original's keyword STEM filter was
  commented out, so no item is filtered here either.
- kept: tasksource's ``reclor`` task (clean_tasksource) overlaps with this file; nothing
  deduplicates across datasets (§1.7).
- fixed: a null field would have become the text ``None``; such an item is dropped and
  counted ("null field").
- checked (beyond §4): ``label`` must be an integer index of one of the answers, otherwise the
  letter would name no option shown; an item that breaks this stops the run, naming it.
"""

from collections.abc import Iterator

from data_io.cleaning import Cleaner, Drop, HubDataset, Record, Row, jsonl_file, require

FIELDS = ("context", "question", "answers", "label")


def clean(record: Record) -> Iterator[Row | Drop]:
    if any(record[name] is None for name in FIELDS):
        yield Drop("null field")
        return
    context, question, answers, label = (record[name] for name in FIELDS)
    for name, value in (("context", context), ("question", question)):
        require(isinstance(value, str), f"{name} is {type(value).__name__}, not a string")
    require(all(isinstance(answer, str) for answer in answers), "an answer is not a string")
    require(
        isinstance(label, int) and not isinstance(label, bool) and 0 <= label < len(answers),
        f"label {label!r} is not the index of one of the {len(answers)} answers",
    )
    options = "".join(f"\n{chr(ord('A') + i)}: {answer}" for i, answer in enumerate(answers))
    yield Row("direct", f"{question}\n\n{context}\n\nOptions:{options}", chr(ord("A") + label))


CLEANER = Cleaner(
    name="reclor",
    source=HubDataset("metaeval/reclor", splits=("train", "validation")),
    output=jsonl_file("data/Platypus/reclor.jsonl"),
    clean=clean,
    description="ReClor (Platypus): question, passage and options -> answer letter (direct).",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
