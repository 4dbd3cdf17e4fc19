"""DeepMind Mathematics -> ``data_clustered/dmmath/<split>__<module>.parquet`` (cleaners.md §3.19).

Source: ``raw_data/mathematics_dataset-v1.0`` (``mathematics_dataset-v1.0.tar.gz`` from the
public Cloud Storage bucket ``mathematics-dataset``, extracted). Only the ``train-easy``,
``train-medium`` and ``train-hard`` folders are read, every ``*.txt`` in each (sorted); the
``interpolate``/``extrapolate`` test folders are not. Each module file alternates question and
answer lines: every line is stripped, even-indexed lines are questions, odd-indexed ones their
answers. One ``direct`` row per pair (question -> answer); no filters. Output: one file per
(split, module), ``safe("<split>__<module>")`` + ``.parquet``, e.g.
``train-easy__algebra__linear_1d.parquet``.

Assertion (§4): a module file has an even number of lines; otherwise the run fails naming the
file and its last line.

Vectorised: lines are read in chunks of about 4 MiB and each chunk of pairs becomes one Arrow
table, so neither a file (tens of MB) nor a module is held in memory.

Quirks, decided:
- kept: only the three train splits; lines stripped; the sanitised file name.
- fixed: module files are read in sorted order (the original used the directory order); the
  rows of each output file are the same either way.
- fixed: a missing split folder is an error (the original's glob found nothing, silently).
- kept: blank lines count as lines (a stray blank line shifts the pairing and is caught by the
  even-lines assertion only if the count becomes odd), as in the original.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pyarrow as pa

from data_io.cleaning import Cleaner, LocalFiles, Record, parquet_files, require, safe_name
from data_io.cleaning.tables import rows_table
from data_io.errors import InputError

SPLITS = ("train-easy", "train-medium", "train-hard")

# Bytes of lines read at a time: enough pairs to amortise building a table, small in memory.
_CHUNK_BYTES = 4 << 20


def read_line_pairs(path: Path, rel: str) -> Iterator[Record]:
    """A module file as records of many (question, answer) pairs, each a list of stripped lines.

    ``Record.index`` is the first pair's 0-based index and ``rows`` the number of pairs; an odd
    line at the end of the file comes as a last record of one unpaired line (``data`` of length 1)
    for the cleaner's assertion.
    """
    first_pair = 0
    carry: list[str] = []
    # Text mode with universal newlines, as the original's readlines().
    with path.open(encoding="utf-8") as handle:
        while True:
            try:
                chunk = handle.readlines(_CHUNK_BYTES)
            except UnicodeDecodeError as exc:
                raise InputError(
                    f"{path}: not valid UTF-8 after pair {first_pair} ({exc}); re-extract the "
                    "archive"
                ) from exc
            if not chunk:
                break
            lines = carry + [line.strip() for line in chunk]
            paired = len(lines) - len(lines) % 2
            carry = lines[paired:]
            if paired:
                pairs = paired // 2
                yield Record(lines[:paired], rel, first_pair, str(path), rows=pairs, unit="pair")
                first_pair += pairs
    if carry:
        yield Record(carry, rel, first_pair, str(path), unit="pair")


@dataclass(frozen=True)
class TrainSplits(LocalFiles):
    """The module files of the three train splits; a split folder that is missing is an error
    (a partly extracted archive would otherwise lose a third of the rows without a word)."""

    def files(self, override: Path | None = None) -> list[tuple[Path, str]]:
        root = override or Path(self.default)
        if root.is_dir():
            missing = [split for split in SPLITS if not (root / split).is_dir()]
            if missing:
                raise InputError(
                    f"{root}: split folder(s) {missing} missing; extract the whole "
                    "mathematics_dataset-v1.0.tar.gz there (or pass --source)"
                )
        return super().files(override)


def clean(record: Record) -> Iterator[pa.Table]:
    lines: list[str] = record.data
    require(
        len(lines) % 2 == 0,
        f"the file has an odd number of lines ({2 * record.index + 1}): line "
        f"{2 * record.index + 1} is a question without an answer line",
    )
    split = PurePosixPath(record.file).parent.name
    module = PurePosixPath(record.file).stem
    yield rows_table(
        "direct",
        pa.array(lines[0::2], pa.string()),
        pa.array(lines[1::2], pa.string()),
        file=safe_name(f"{split}__{module}"),
    )


CLEANER = Cleaner(
    name="dmmath",
    source=TrainSplits(
        "raw_data/mathematics_dataset-v1.0",
        reader=read_line_pairs,
        include=tuple(f"{split}/*.txt" for split in SPLITS),
        how_to_get="download mathematics_dataset-v1.0.tar.gz from the public Cloud Storage bucket "
        "`mathematics-dataset` (https://storage.googleapis.com/mathematics-dataset/"
        "mathematics_dataset-v1.0.tar.gz) and extract it in raw_data/",
    ),
    output=parquet_files("data_clustered/dmmath"),
    clean=clean,
    description="DeepMind Mathematics (train splits): one Parquet file per (split, module).",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
