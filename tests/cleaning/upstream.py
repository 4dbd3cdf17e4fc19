"""Shared scaffolding of the cleaner tests.

- Writers of small inputs in the upstream layouts: an `hf download` folder, raw Parquet, JSON,
  tar.gz. Each test spells out its own rows next to the expected output.
- Readers of what a cleaner wrote (:func:`read_jsonl`, :func:`read_parquet`, :func:`read_outputs`).
- Runners: a cleaner on a bad input (:func:`run_expecting_error`), with other batch sizes
  (:func:`with_batch_rows`), and a cleaner module as a separate offline process
  (:func:`run_module_offline`).
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from data_io.cleaning import Cleaner, CleanReport
from data_io.errors import InputError

#: The checkout's root, put on ``PYTHONPATH`` of the processes the tests start.
REPO_ROOT = Path(__file__).resolve().parents[2]

ROW_COLUMNS = ["condition", "instruction", "response"]


def row(condition: str, instruction: str, response: str) -> dict:
    """An expected output row, as :func:`read_jsonl` and :func:`read_parquet` return it."""
    return {"condition": condition, "instruction": instruction, "response": response}


def write_hub_copy(root: Path, splits: dict[tuple[str, str], list[dict]]) -> Path:
    """The folder `hf download REPO --repo-type dataset --local-dir root` produces for a Parquet
    dataset: README.md whose YAML maps each config/split to ``<config>/<split>-*.parquet``."""
    configs: dict[str, list[str]] = {}
    for (config, split), rows in splits.items():
        configs.setdefault(config, []).append(split)
        path = root / config / f"{split}-00000-of-00001.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), path)
    lines = ["---", "configs:"]
    for config, names in configs.items():
        lines += [f"- config_name: {config}", "  data_files:"]
        for split in names:
            lines += [f"  - split: {split}", f"    path: {config}/{split}-*"]
    lines += ["---", "", "A small stand-in written by the tests.", ""]
    (root / "README.md").write_text("\n".join(lines), encoding="utf-8")
    return root


def write_parquet(path: Path, columns: dict[str, list]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)
    return path


def write_json(path: Path, value: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def write_tar_gz(path: Path, members: list[tuple[str, bytes]]) -> Path:
    """A gzip-compressed tar holding ``members`` (name, bytes) in this order, plus their folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # mtime=0 in the gzip header: the same members give the same bytes.
    with (
        gzip.GzipFile(path, "wb", mtime=0) as packed,
        tarfile.open(fileobj=packed, mode="w") as archive,
    ):
        folders: set[str] = set()
        for name, data in members:
            parts = name.split("/")[:-1]
            for depth in range(1, len(parts) + 1):
                folder = "/".join(parts[:depth])
                if folder not in folders:
                    folders.add(folder)
                    info = tarfile.TarInfo(folder)
                    info.type = tarfile.DIRTYPE
                    archive.addfile(info)
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def read_jsonl(path: Path) -> list[dict]:
    """The rows of a JSON Lines output, checking that every line ends with ``\n``.

    Lines end at ``b"\n"`` only: ``str.splitlines`` also splits at ``\x1c``-``\x1e``, ``\x85``,
    U+2028 and U+2029, which our writer leaves unescaped inside JSON strings.
    """
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n"), f"{path}: the last line has no newline"
    return [json.loads(line) for line in data.split(b"\n")[:-1]]


def jsonl_bytes(rows: list[dict]) -> bytes:
    """The bytes formats.md §1 prescribes for ``rows`` (compact JSON, non-ASCII kept, ``\n`` after
    every line), derived with the standard library, independently of the writer."""
    lines = (json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n" for row in rows)
    return "".join(lines).encode("utf-8")


def read_parquet(path: Path) -> list[dict]:
    """The rows of a Parquet output, checking that it has our writers' schema: the three row
    columns, in this order, as plain ``string`` (which every reader accepts)."""
    table = pq.read_table(path)
    schema = [(field.name, str(field.type)) for field in table.schema]
    assert schema == [(name, "string") for name in ROW_COLUMNS], f"{path}: schema {schema}"
    return table.to_pylist()


def read_outputs(report: CleanReport) -> dict[str, list[dict]]:
    """The rows of every file a run wrote, by file name, read by extension."""
    readers = {".jsonl": read_jsonl, ".parquet": read_parquet}
    return {path.name: readers[path.suffix](path) for path, _ in report.files}


def with_batch_rows(cleaner: Cleaner, batch_rows: int) -> Cleaner:
    """``cleaner`` reading its Hub dataset ``batch_rows`` rows at a time (batch edges vary)."""
    return dataclasses.replace(
        cleaner, source=dataclasses.replace(cleaner.source, batch_rows=batch_rows)
    )


def run_expecting_error(
    cleaner: Cleaner, source: Path | None, out: Path | None, *fragments: str
) -> str:
    """Run ``cleaner``, which must fail with an :class:`InputError` whose message holds every
    one of ``fragments``, and commit nothing at ``out``; the message, for further checks."""
    with pytest.raises(InputError) as caught:
        cleaner.run(source, out, progress=False)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in the error: {message}"
    if out is not None:
        if out.is_dir():
            assert not any(out.iterdir()), f"{out} holds {sorted(out.iterdir())}"
        else:
            assert not out.exists()
        assert not list(out.parent.glob(f"{out.name}.tmp-*")), "temporary files left behind"
    return message


def run_module_offline(module: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m <module> <args>`` in ``cwd`` with the Hub unreachable (``HF_HUB_OFFLINE``),
    as a user without network access would run it; stdout and stderr captured as text."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )


def assert_says_what_to_download(done: subprocess.CompletedProcess[str], *hints: str) -> None:
    """A cleaner process that found no input: exit code 1 and every hint on stderr."""
    assert done.returncode == 1, done.stderr
    for hint in hints:
        assert hint in done.stderr, f"{hint!r} not in stderr: {done.stderr}"


def assert_offline_run_names_hub_download(module: str, cwd: Path, repo_id: str) -> None:
    """``python -m <module>`` of a Hub dataset cleaner, run offline in ``cwd`` where there is no
    local copy: it fails, prints the `hf download` command that makes the copy where the cleaner
    looks for it (docs/stages/clean.md), and creates no output folder."""
    done = run_module_offline(module, cwd, "--quiet")
    assert_says_what_to_download(
        done, f"hf download {repo_id} --repo-type dataset --local-dir raw_data/hub/{repo_id}"
    )
    assert not (cwd / "data").exists()
    assert not (cwd / "data_clustered").exists()
