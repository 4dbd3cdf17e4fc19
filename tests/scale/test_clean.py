"""``data_io clean --all --executor local``: one unit per dataset, the same files as cleaning
them one after another in one process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from data_io.example import EXAMPLE_CLEANERS
from data_io.scale.manifest import Manifest
from data_io.scale.status import status

from .inputs import ROOT

RAW = ROOT / "data_io" / "example_data" / "raw"


def _workdir(path: Path) -> Path:
    """A project folder holding the example's raw inputs where the cleaners look for them."""
    for _name, raw, _out in EXAMPLE_CLEANERS:
        target = path / "raw_data" / raw
        target.parent.mkdir(parents=True, exist_ok=True)
        if (RAW / raw).is_dir():
            shutil.copytree(RAW / raw, target)
        else:
            shutil.copy2(RAW / raw, target)
    return path


def _outputs(workdir: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(workdir)): p.read_bytes()
        for folder in ("data", "data_clustered")
        for p in sorted((workdir / folder).rglob("*"))
        if p.is_file()
    }


def _clean(workdir: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "data_io", "clean", "--all", "--quiet", *extra],
        cwd=workdir,
        env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        check=False,
    )


def test_clean_all_on_workers_writes_what_one_process_writes(tmp_path: Path) -> None:
    one = _workdir(tmp_path / "one")
    scaled = _workdir(tmp_path / "scaled")
    done = _clean(one)
    assert done.returncode == 0, done.stderr
    done = _clean(scaled, "--executor", "local", "--workers", "2")
    assert done.returncode == 0, done.stderr
    expected = _outputs(one)
    assert len(expected) >= len(EXAMPLE_CLEANERS)
    assert _outputs(scaled) == expected
    manifest = Manifest.load(scaled)
    assert sorted(u.task for u in manifest.units) == sorted(n for n, _, _ in EXAMPLE_CLEANERS)
    report = status(manifest)
    assert report.complete and report.finalized
    done_records = [manifest.read_record(u.id, "done") for u in manifest.units]
    assert all(record and record["outputs"] for record in done_records)
