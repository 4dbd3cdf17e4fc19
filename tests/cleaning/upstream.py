"""Writers of small inputs in the upstream layouts: an `hf download` folder, raw Parquet, tar.gz.

Shared by the cleaner tests; each test spells out its own rows next to the expected output.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


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
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def read_parquet(path: Path) -> list[dict]:
    return pq.read_table(path).select(["condition", "instruction", "response"]).to_pylist()
