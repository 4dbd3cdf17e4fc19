"""ScienceQA text-only (Platypus) -> ``data/Platypus/scienceqa.jsonl`` (cleaners.md §3.14).

Source: Hub ``metaeval/ScienceQA_text_only`` (now also served as
``tasksource/ScienceQA_text_only``), splits ``train``, ``validation`` then ``test``; or its
local copy (``--source`` / ``raw_data/hub/metaeval/ScienceQA_text_only``). Fields
``question``, ``choices`` (list), ``answer`` (index), ``lecture``, ``solution``; the text
fields and each choice are stripped. Options block: ``A: <choice 0>\\nB: <choice 1>...``.

Rows per item, in this order (exact strings in the constants below):
- ``cot`` when the solution is not empty: instruction ``COT_PREAMBLE\\n\\n<question>\\nOptions:
  \\n<options>\\n\\nLecture: <lecture>`` when there is a lecture, else ``<question>\\nOptions:
  \\n<options>``; response ``<solution>\\n\\nAnswer: <letter>``.
- ``direct`` always: the same with ``DIRECT_PREAMBLE``; response ``<letter>``.

Quirks, decided:
- kept: the benchmark's test split is used as training data, as in the original (intended
  corpus choice; cleaners.md §7.1 flags it for anyone evaluating on ScienceQA).
- kept: the ``hint`` field (context some questions rely on) is not used, as in the original.
- counted: items without a solution give no ``cot`` row ("no cot row: empty solution").
- fixed: a null field (the original would have crashed on ``.strip()``) drops the item,
  counted ("null field").
- checked (beyond §4): ``answer`` must index one of the choices, otherwise the letter would
  name no option shown; an item that breaks this stops the run, naming it.
"""

from collections.abc import Iterator

from data_io.cleaning import (
    Cleaner,
    CleanerAssertion,
    Drop,
    HubDataset,
    Record,
    Row,
    jsonl_file,
    require,
)

COT_PREAMBLE = "Solve the following question using the information provided in the lecture."
DIRECT_PREAMBLE = (
    "Choose the correct option letter for the following question based on the information "
    "from the lecture."
)
FIELDS = ("question", "choices", "answer", "lecture", "solution")


def _text(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise CleanerAssertion(f"{name} is {type(value).__name__}, not a string")
    return value.strip()


def _instruction(preamble: str, question: str, options: str, lecture: str) -> str:
    body = f"{question}\nOptions:\n{options}"
    return f"{preamble}\n\n{body}\n\nLecture: {lecture}" if lecture else body


def clean(record: Record) -> Iterator[Row | Drop]:
    if any(record[name] is None for name in FIELDS):
        yield Drop("null field")
        return
    question = _text("question", record["question"])
    lecture = _text("lecture", record["lecture"])
    solution = _text("solution", record["solution"])
    choices = [_text("a choice", choice) for choice in record["choices"]]
    answer = record["answer"]
    require(
        isinstance(answer, int) and not isinstance(answer, bool) and 0 <= answer < len(choices),
        f"answer {answer!r} is not the index of one of the {len(choices)} choices",
    )
    letter = chr(ord("A") + answer)
    options = "\n".join(f"{chr(ord('A') + i)}: {choice}" for i, choice in enumerate(choices))
    if solution:
        yield Row(
            "cot",
            _instruction(COT_PREAMBLE, question, options, lecture),
            f"{solution}\n\nAnswer: {letter}",
        )
    else:
        yield Drop("no cot row: empty solution")
    yield Row("direct", _instruction(DIRECT_PREAMBLE, question, options, lecture), letter)


CLEANER = Cleaner(
    name="scienceqa",
    source=HubDataset("metaeval/ScienceQA_text_only", splits=("train", "validation", "test")),
    output=jsonl_file("data/Platypus/scienceqa.jsonl"),
    clean=clean,
    description="ScienceQA text-only (Platypus): solution + letter (cot) and letter (direct).",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
