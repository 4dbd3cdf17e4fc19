"""SciBench (Platypus) -> ``data/Platypus/scibench.jsonl`` (cleaners.md §3.13).

Source: ``raw_data/Platypus/scibench`` (``git clone https://github.com/mandyyyyii/scibench``);
every ``*.json`` directly inside ``dataset/original/`` (the ``python/`` and ``wolfram/``
subfolders are not read), each a JSON array. Both the textbook files and their ``_sol`` files
are read. Fields ``problem_text``, ``solution``, ``answer_latex``, ``answer_number``; a missing
key counts as the empty string; all four are stripped.

Answer: the stripped ``answer_latex``, except that ``$<answer_number>$`` becomes the bare
``answer_number``. Rows per item, in this order: ``cot`` (problem -> solution) when the solution
is not empty, then ``direct`` (problem -> answer).

Quirks, decided:
- fixed: files are read in sorted order (the original used ``os.listdir`` order).
- fixed: the original wrote the ``direct`` row even when the answer was empty; such a row has
  nothing to learn (and the sampler drops responses shorter than 2 tokens anyway), so it is
  left out here and counted ("no direct row: empty answer"). Likewise an item whose problem
  text is empty gives no row ("empty problem").
- kept: problems present in both a base file and its ``_sol`` file appear twice; nothing
  deduplicates (cleaners.md §1.7).
- checked: a field that is present but not a string (the original would have crashed on
  ``.strip()``) stops the run, naming the file and item.
"""

from collections.abc import Iterator

from data_io.cleaning import (
    Cleaner,
    Drop,
    LocalFiles,
    Record,
    Row,
    jsonl_file,
    read_json_array,
    require,
)

FIELDS = ("problem_text", "solution", "answer_latex", "answer_number")


def _field(record: Record, name: str) -> str:
    value = record.get(name, "")
    require(isinstance(value, str), f"{name} is {type(value).__name__}, not a string")
    return value.strip()


def clean(record: Record) -> Iterator[Row | Drop]:
    problem, solution, latex, number = (_field(record, name) for name in FIELDS)
    if not problem:
        yield Drop("empty problem")
        return
    answer = number if latex == f"${number}$" else latex
    if solution:
        yield Row("cot", problem, solution)
    else:
        yield Drop("no cot row: empty solution")
    if answer:
        yield Row("direct", problem, answer)
    else:
        yield Drop("no direct row: empty answer")


CLEANER = Cleaner(
    name="scibench",
    source=LocalFiles(
        "raw_data/Platypus/scibench",
        reader=read_json_array,
        include=("dataset/original/*.json",),
        how_to_get="git clone https://github.com/mandyyyyii/scibench raw_data/Platypus/scibench",
    ),
    output=jsonl_file("data/Platypus/scibench.jsonl"),
    clean=clean,
    description="SciBench (Platypus): problem -> solution (cot) and -> final answer (direct).",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
