"""``data_io clean --all --executor local``: one unit per dataset, the same files as cleaning
them one after another in one process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from data_io.example import EXAMPLE_CLEANERS
from data_io.scale.manifest import SCALE_DIR, Manifest, default_clean_plan_dir
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


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Plans go under the user's cache folder by default: a private one per test (the
    subprocesses inherit it through the environment)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return cache


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
    # The plan is not written into the working folder: it is under the cache folder.
    assert not (scaled / SCALE_DIR).exists()
    assert manifest.root == default_clean_plan_dir(scaled)
    assert str(manifest.root).startswith(str(tmp_path / "cache" / "data_io" / "scale"))
    shown = subprocess.run(
        [sys.executable, "-m", "data_io", "status", "."], cwd=scaled,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert shown.returncode == 0 and "finalized: the output is complete" in shown.stdout


def test_clean_plan_dir_is_where_asked(tmp_path: Path) -> None:
    scaled = _workdir(tmp_path / "scaled")
    plans = tmp_path / "plans"
    done = _clean(scaled, "--executor", "local", "--workers", "1", "--plan-dir", str(plans))
    assert done.returncode == 0, done.stderr
    manifest = Manifest.load(plans)
    assert manifest.root == plans.resolve() and status(manifest).finalized
    assert Path(manifest.output) == scaled.resolve()
    assert not (scaled / SCALE_DIR).exists()
    assert not (tmp_path / "cache" / "data_io" / "scale").exists(), "no default plan folder"


def test_plan_dir_without_an_executor_is_refused(tmp_path: Path) -> None:
    scaled = _workdir(tmp_path / "scaled")
    done = _clean(scaled, "--plan-dir", str(tmp_path / "plans"))
    assert done.returncode == 1
    assert "--plan-dir applies to --executor runs" in done.stderr
    assert not (tmp_path / "plans").exists() and not (scaled / "data").exists()


def test_a_damaged_source_fails_its_cleaner_by_name_and_resume_finishes(tmp_path: Path) -> None:
    """A damaged raw file fails its dataset's unit, named with the file and what is wrong;
    the other cleaners' outputs are written, status says to fix and resume (no word of parts
    of files: a cleaner reads its source whole), and resume after the fix writes what one
    process writes."""
    one = _workdir(tmp_path / "one")
    assert _clean(one).returncode == 0
    scaled = _workdir(tmp_path / "scaled")
    amps = scaled / "raw_data" / "amps.tar.gz"
    amps.write_bytes(amps.read_bytes()[:400])
    done = _clean(scaled, "--executor", "local", "--workers", "2")
    assert done.returncode == 1, done.stderr
    manifest = Manifest.load(scaled)
    report = status(manifest)
    assert report.counts["failed"] == 1 and report.counts["done"] == len(EXAMPLE_CLEANERS) - 1
    (failure,) = report.failed
    assert failure["task"] == "ampsmathematica"
    assert failure["error"].startswith("raw_data/amps.tar.gz: not a readable tar archive")
    shown = subprocess.run(
        [sys.executable, "-m", "data_io", "status", "."], cwd=scaled,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert "failed u" in shown.stdout and "(ampsmathematica, whole file" in shown.stdout
    assert shown.stdout.splitlines()[-1] == (
        f"fix what the failed units name, then run what is left with `data_io resume "
        f"{manifest.path}`"
    )
    shutil.copy2(RAW / "amps.tar.gz", amps)
    resumed = subprocess.run(
        [sys.executable, "-m", "data_io", "resume", ".", "--quiet"], cwd=scaled,
        env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert _outputs(scaled) == _outputs(one)


def test_scale_unit_runs_a_cleaner_unit_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``data_io scale unit`` (what each Slurm array task runs) printed the record's tokens,
    which a cleaner's unit does not count: the unit ran, then the command failed (KeyError)."""
    from data_io.cli import main
    from data_io.scale.plan import plan_clean

    scaled = _workdir(tmp_path / "scaled")
    manifest = plan_clean(["ampsmathematica"], str(scaled), str(tmp_path / "plans"))
    manifest.executor = {"kind": "slurm"}
    manifest.save()
    (unit,) = manifest.units
    assert main(["scale", "unit", str(manifest.path), "--unit", unit.id]) == 0
    rows = Manifest.load(manifest.path).read_record(unit.id, "done")["rows"]
    assert capsys.readouterr().out.splitlines()[-1] == f"unit {unit.id}: {rows:,} rows"
