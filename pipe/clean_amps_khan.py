"""AMPS Khan Academy -> ``data/amps_khan.jsonl`` (cleaners.md §3.1).

Source: every ``*.json`` file under ``raw_data/amps/khan``, at any depth (the ``amps/khan`` tree
of ``amps.tar.gz``, extracted into ``raw_data/``), or the folder given with ``--source``. Each
file holds one JSON object with ``problem`` (a string) and ``hints`` (a list of strings).

One ``noisy,cot`` row per file: problem as-is -> the hints joined with ``\\n``, then stripped.

Quirks, decided:
- fixed: files are read in sorted path order; the original used the recursive glob's
  filesystem order, so its output order differed between machines.
- kept: no filters. A file with no hints gives a row with an empty response, as in the
  original; the sampler drops such rows (a response needs 2 tokens with EOA), and keeping them
  keeps this file row for row equal to the original's.
- kept: the problem is written as-is while the response is stripped (cleaners.md §7.2).
- checked: ``hints`` must be a list of strings and ``problem`` a string; anything else stops the
  run naming the file (the original would have failed or written a non-string).
"""

from collections.abc import Iterator

from data_io.cleaning import Cleaner, LocalFiles, Record, Row, jsonl_file, read_json_object, require

CONDITION = "noisy,cot"


def clean(record: Record) -> Iterator[Row]:
    problem, hints = record["problem"], record["hints"]
    require(isinstance(problem, str), f"problem is {type(problem).__name__}, not a string")
    require(
        isinstance(hints, list) and all(isinstance(hint, str) for hint in hints),
        "hints is not a list of strings",
    )
    yield Row(CONDITION, problem, "\n".join(hints).strip())


CLEANER = Cleaner(
    name="amps_khan",
    source=LocalFiles(
        "raw_data/amps/khan",
        reader=read_json_object,
        include=("**/*.json",),
        how_to_get="download amps.tar.gz (AMPS, from the Hendrycks MATH/AMPS release: "
        "https://drive.google.com/file/d/1hQsua3TkpEmcJD_UWQx8dmNdEZPyxw23) to raw_data/ and "
        "extract it there (tar -xzf raw_data/amps.tar.gz -C raw_data) so that "
        "raw_data/amps/khan exists",
    ),
    output=jsonl_file("data/amps_khan.jsonl"),
    clean=clean,
    description="AMPS Khan Academy: problem -> joined hints (noisy,cot), one row per JSON file.",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
