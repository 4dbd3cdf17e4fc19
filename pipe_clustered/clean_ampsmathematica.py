"""AMPS Mathematica -> ``data_clustered/ampsmathematica/<topic>_<subtask>.parquet`` (cleaners.md §3.18).

Exemplary archive cleaner: it streams ``raw_data/amps.tar.gz`` member by member and never
extracts it. Members read: regular files ending in ``.txt``; of those, a path with at least four
components must have ``mathematica`` as its fourth component from the end (others are dropped,
counted). Output key ``<topic>_<subtask>`` = the two folders above the file, not sanitised
(as in the original); condition ``noisy,cot`` when the subtask folder ends with ``w_steps``,
else ``noisy,direct``.

Each file: UTF-8 text; a leading ``Problem:`` is removed; the text is split at the first
``Answer:``; instruction = the part before, stripped; response = the part after, stripped.

Quirks, decided:
- kept: the unsanitised key, the 3-component exception of the path rule, archive order.
- fixed: files that are not UTF-8, lack ``Answer:`` or have an empty side were printed or skipped
  silently; here each is dropped and counted by reason (the summary lists them).
"""

from collections.abc import Iterator

from data_io.cleaning import (
    Cleaner,
    Drop,
    LocalFiles,
    Record,
    Row,
    TarMember,
    parquet_files,
    tar_members,
)

PROBLEM = "Problem:"
ANSWER = "Answer:"


def clean(record: Record) -> Iterator[Row | Drop]:
    member: TarMember = record.data
    parts = member.name.strip("/").split("/")
    if len(parts) < 3 or (len(parts) >= 4 and parts[-4] != "mathematica"):
        yield Drop("not under mathematica/<topic>/<subtask>/")
        return
    topic, subtask = parts[-3], parts[-2]
    try:
        text = member.data.decode("utf-8")
    except UnicodeDecodeError:
        yield Drop("not UTF-8")
        return
    text = text.removeprefix(PROBLEM)
    problem, found, answer = text.partition(ANSWER)
    if not found:
        yield Drop("no 'Answer:'")
        return
    problem, answer = problem.strip(), answer.strip()
    if not problem or not answer:
        yield Drop("empty problem or answer")
        return
    condition = "noisy,cot" if subtask.endswith("w_steps") else "noisy,direct"
    yield Row(condition, problem, answer, file=f"{topic}_{subtask}")


CLEANER = Cleaner(
    name="ampsmathematica",
    source=LocalFiles(
        "raw_data/amps.tar.gz",
        reader=tar_members(keep=lambda name: name.endswith(".txt")),
        how_to_get="download amps.tar.gz (AMPS, from the Hendrycks MATH/AMPS release: "
        "https://drive.google.com/file/d/1hQsua3TkpEmcJD_UWQx8dmNdEZPyxw23) to "
        "raw_data/amps.tar.gz; this cleaner reads the archive without extracting it",
    ),
    output=parquet_files("data_clustered/ampsmathematica"),
    clean=clean,
    description="AMPS Mathematica (from the tar.gz): one Parquet file per topic/subtask folder.",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
