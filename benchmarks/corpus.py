"""A real prose corpus that this repository can rebuild offline: the reStructuredText sources of
the Python 3.11 documentation, from Debian's ``python3.11-doc`` package.

Rows are consecutive paragraph pairs of each page (instruction = a paragraph, response = the
next one), so the text is natural English prose with code blocks. Used by
``benchmarks/tokenize.py`` and by ``trained_tokenizers/build.py``.

    python -m benchmarks.corpus OUT_DIR   # writes OUT_DIR/{big.jsonl,big.parquet,many/*.jsonl}
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

PACKAGE = "python3.11-doc"
SOURCES = "usr/share/doc/python3.11/html/_sources"
CONDITIONS = ("direct", "cot", "noisy", "synth", "cot,noisy", "")
DEFAULT_CACHE = Path.home() / ".cache" / "data_io" / "python-docs"


def extract_deb(package: str, extracted: Path) -> Path:
    """Download a Debian package with apt-get and extract it into ``extracted``, once (whole or
    absent). A fresh machine's package lists can name a version the mirror no longer has (404):
    then, as root, the lists are updated and the download tried again."""
    if extracted.is_dir():
        return extracted
    extracted.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=extracted.parent) as tmp:

        def download() -> subprocess.CompletedProcess:
            return subprocess.run(["apt-get", "download", package], cwd=tmp, capture_output=True)

        try:
            done = download()
            if done.returncode != 0 and os.geteuid() == 0:
                subprocess.run(["apt-get", "update", "-q"], capture_output=True)
                done = download()
            if done.returncode != 0:
                raise RuntimeError(done.stderr.decode(errors="replace").strip())
            deb = next(Path(tmp).glob("*.deb"))
            subprocess.run(["dpkg-deb", "-x", str(deb), str(Path(tmp) / "x")], check=True)
        except (OSError, RuntimeError, subprocess.CalledProcessError, StopIteration) as err:
            raise SystemExit(
                f"cannot download {package} with apt-get ({err}); run `apt-get update` first, or "
                f"extract its .deb into {extracted}"
            ) from err
        (Path(tmp) / "x").rename(extracted)
    return extracted


def docs_sources(cache: Path = DEFAULT_CACHE) -> Path:
    """The extracted ``_sources`` folder, downloading the package with apt-get once."""
    return extract_deb(PACKAGE, cache / "x") / SOURCES


def docs_rows(sources: Path) -> list[dict[str, str]]:
    """Paragraph-pair rows of every page, in sorted page order (deterministic)."""
    rows = []
    for page in sorted(sources.rglob("*.rst.txt")):
        paragraphs = [p.strip() for p in page.read_text(encoding="utf-8").split("\n\n")]
        paragraphs = [p for p in paragraphs if len(p) > 40]
        for i in range(0, len(paragraphs) - 1, 2):
            rows.append(
                {
                    "condition": CONDITIONS[len(rows) % len(CONDITIONS)],
                    "instruction": paragraphs[i],
                    "response": paragraphs[i + 1],
                }
            )
    return rows


def write_jsonl(path: Path, rows: list[dict[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_parquet(path: Path, rows: list[dict[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=4096)


def build(out: Path, copies: int = 4, many_files: int = 64) -> dict[str, Path]:
    """Write the benchmark inputs: one big file (the corpus repeated ``copies`` times) as JSONL
    and Parquet, and the same rows split into ``many_files`` small JSONL files."""
    rows = docs_rows(docs_sources())
    big = rows * copies
    paths = {"big_jsonl": out / "big" / "big.jsonl", "big_parquet": out / "bigpq" / "big.parquet"}
    write_jsonl(paths["big_jsonl"], big)
    write_parquet(paths["big_parquet"], big)
    many = out / "many"
    per_file = -(-len(big) // many_files)
    for k in range(many_files):
        write_jsonl(many / f"part_{k:03d}.jsonl", big[k * per_file : (k + 1) * per_file])
    paths["many"] = many
    return paths


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Build the Python-docs benchmark corpus.")
    parser.add_argument("out", type=Path, nargs="?", default=Path("work/corpus"))
    parser.add_argument("--copies", type=int, default=4)
    args = parser.parse_args()
    for name, path in build(args.out, copies=args.copies).items():
        print(f"{name}: {path}")


if __name__ == "__main__":
    main()
