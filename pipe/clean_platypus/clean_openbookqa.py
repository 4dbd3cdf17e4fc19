"""OpenBookQA (Platypus) -> ``data/Platypus/openbookqa.jsonl`` (cleaners.md §3.11).

Source: Hub ``allenai/openbookqa`` (the original's legacy id ``openbookqa`` now redirects
there), config ``additional`` (the one that carries ``fact1``), splits ``train`` then
``validation``; or its local copy (``--source`` / ``raw_data/hub/allenai/openbookqa``).
Fields ``question_stem``, ``choices`` (``{"text": [...], "label": [...]}``), ``answerKey``,
``fact1``.

One ``direct`` row per question. Instruction (exact, nothing stripped)::

    Based on the given fact, which of the following option is the correct answer to the question?

    <question_stem>␣
    A: <choice 0>
    B: <choice 1>
    ...

    Fact: <fact1>

(``␣``: one space after the stem, before the newline that opens the options; letters by position).
Response: the ``answerKey`` letter only.

Quirks, decided:
- kept: the test split is left out and validation is used, as in the original (intended
  corpus choice, cleaners.md §7.1); the space before the option list; nothing is stripped.
- kept: the answer text is not used (the original looked it up and discarded it).
- fixed: a null field would have become the text ``None`` in the prompt; such a row is dropped
  and counted ("null field").
- checked (beyond §4): the options must be labelled A, B, C, ... in order and ``answerKey``
  must be one of them, otherwise the response letter would not point at the option shown; a
  row that breaks this stops the run, naming the row. The published data never does.
"""

from collections.abc import Iterator

from data_io.cleaning import Cleaner, Drop, HubDataset, Record, Row, jsonl_file, require

PREAMBLE = (
    "Based on the given fact, which of the following option is the correct answer to the question?"
)
FIELDS = ("question_stem", "choices", "answerKey", "fact1")


def _letter(position: int) -> str:
    return chr(ord("A") + position)


def clean(record: Record) -> Iterator[Row | Drop]:
    if any(record[name] is None for name in FIELDS):
        yield Drop("null field")
        return
    stem, fact, key = record["question_stem"], record["fact1"], record["answerKey"]
    texts, labels = record["choices"]["text"], record["choices"]["label"]
    for name, value in (("question_stem", stem), ("fact1", fact), ("answerKey", key)):
        require(isinstance(value, str), f"{name} is {type(value).__name__}, not a string")
    require(all(isinstance(text, str) for text in texts), "a choices.text entry is not a string")
    letters = [_letter(position) for position in range(len(texts))]
    require(
        list(labels) == letters,
        f"choices are labelled {list(labels)}, expected {letters} (the response letter "
        "must name the option shown at that position)",
    )
    require(key in letters, f"answerKey {key!r} is not one of the options {letters}")
    options = "\n".join(f"{letter}: {text}" for letter, text in zip(letters, texts, strict=True))
    yield Row("direct", f"{PREAMBLE}\n\n{stem} \n{options}\n\nFact: {fact}", key)


CLEANER = Cleaner(
    name="openbookqa",
    source=HubDataset("allenai/openbookqa", config="additional", splits=("train", "validation")),
    output=jsonl_file("data/Platypus/openbookqa.jsonl"),
    clean=clean,
    description="OpenBookQA (Platypus): question, options and fact -> answer letter (direct).",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
