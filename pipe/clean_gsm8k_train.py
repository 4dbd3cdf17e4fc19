"""GSM8K train -> ``data/gsm8k_train.jsonl`` (cleaners.md §3.2). Exemplary Hub cleaner.

Source: Hub ``openai/gsm8k``, config ``main``, split ``train`` (streamed), or its local copy
(``--source`` / ``raw_data/hub/openai/gsm8k``). Fields ``question`` and ``answer``.

One ``direct`` row per problem: the stripped question -> the text after ``#### `` (the final
answer), stripped; the worked rationale is discarded, as in the original (no CoT row).
Assertion (§4): ``answer`` splits on ``#### `` into exactly 2 parts; otherwise the run fails
naming the row. No filters, so nothing is dropped.

Quirks: none to fix; the output is the original's, row for row.
"""

from collections.abc import Iterator

from data_io.cleaning import Cleaner, HubDataset, Record, Row, jsonl_file, require

DELIMITER = "#### "


def clean(record: Record) -> Iterator[Row]:
    pieces = record["answer"].split(DELIMITER)
    require(
        len(pieces) == 2, f"answer splits on {DELIMITER!r} into {len(pieces)} parts, expected 2"
    )
    yield Row("direct", record["question"].strip(), pieces[1].strip())


CLEANER = Cleaner(
    name="gsm8k_train",
    source=HubDataset("openai/gsm8k", config="main", splits=("train",)),
    output=jsonl_file("data/gsm8k_train.jsonl"),
    clean=clean,
    description="GSM8K train: question -> final answer (direct).",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
