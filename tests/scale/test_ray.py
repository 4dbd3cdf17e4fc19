"""The Ray executor on a real local Ray cluster (2 CPUs, started once for these tests): the
output is byte-identical to one local run, a worker killed with SIGKILL mid-unit is retried
without a trace, and a unit failing on a bad row is not retried, is reported with its file and
line, and completes after the input is fixed and the run resumed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
import ray

from data_io.errors import ConfigError
from data_io.scale import ExecutorSettings, Manifest, Unit, ray_executor, resume, scale_tokenize
from data_io.scale.plan import plan_tokenize
from data_io.scale.progress import UnitProgress
from data_io.scale.ray_executor import run_ray
from data_io.scale.run import run_stage
from data_io.scale.status import status
from data_io.tokenize import tokenize, tokenize_options
from data_io.tokenizer.train import train_tokenizer

from .inputs import TOKENIZER, rows, tree_bytes, write_inputs, write_jsonl

RAY_SETTINGS = ExecutorSettings(kind="ray", threads_per_unit=1, retries=2)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[None]:
    """A local Ray cluster of 2 CPUs for the session (it takes seconds to start). The executor
    finds Ray initialized and uses it, leaving it running for the next test."""
    saved = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_USAGE_STATS_ENABLED")}
    # No token auth (Ray >= 2.52 turns it on for new clusters) and no usage report.
    os.environ["RAY_AUTH_MODE"] = "disabled"
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    # Ray's socket paths live under its temp dir and must stay under 107 bytes: pytest's
    # tmp_path is too deep.
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=75 << 20,
        log_to_driver=False,
        _temp_dir=temp,
    )
    try:
        yield
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _options(inputs: Path, out: Path, **extra) -> dict:
    return tokenize_options([inputs], out, tokenizer_path=TOKENIZER, progress=False, **extra)


def _local(inputs: Path, out: Path) -> dict[str, bytes]:
    tokenize([inputs], out, tokenizer_path=TOKENIZER, progress=False)
    return tree_bytes(out)


def _no_temporary_folders(out: Path) -> bool:
    return not any((out / ".data_io_scale").rglob(".tmp-*"))


class _Recorded(UnitProgress):
    """The progress bar, recording the units the driver heard of."""

    heard: ClassVar[list[str]] = []

    def done(self, unit: Unit) -> None:
        self.heard.append(unit.id)
        super().done(unit)


def test_output_is_byte_identical_to_one_run(
    ray_cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = write_inputs(tmp_path / "in")
    out = tmp_path / "ray"
    monkeypatch.setattr(ray_executor, "UnitProgress", _Recorded)
    outcome = scale_tokenize(_options(inputs, out), RAY_SETTINGS, unit_mb=0.1, progress=False)
    assert outcome.unfinished == [] and outcome.result is not None
    units = outcome.manifest.units
    assert sorted(_Recorded.heard) == sorted(u.id for u in units), "progress of every unit"
    assert len(units) > 8 and {u.span["kind"] for u in units} == {"bytes", "row_groups", "whole"}
    assert tree_bytes(out) == _local(inputs, tmp_path / "local")
    # The units ran in Ray's worker processes, not here.
    pids = {outcome.manifest.read_record(u.id, "started")["pid"] for u in units}
    assert os.getpid() not in pids
    assert all(outcome.manifest.read_record(u.id, "done")["attempt"] == 1 for u in units)
    assert status(outcome.manifest).finalized and _no_temporary_folders(out)


def _kill_first_unit_seen(parts: Path, stop: threading.Event, killed: list) -> None:
    """Watch for a unit's temporary part folder (``.tmp-<index>-<pid>-<n>``, made by the unit's
    own process once its ``started`` record is written) and SIGKILL that process."""
    while not stop.is_set():
        for folder in parts.glob("*/.tmp-*"):
            pid = int(folder.name.split("-")[2])
            os.kill(pid, signal.SIGKILL)
            # Dead, it can no longer rename its folder: still there means killed mid-unit.
            killed.append((folder.parent.name, int(folder.name.split("-")[1]), pid))
            killed.append(folder.exists())
            return
        time.sleep(0.0005)


def test_worker_killed_mid_unit_is_retried(ray_cluster: None, tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    block = rows(2000, seed=7)
    write_jsonl(inputs / "big.jsonl", block * 20)  # ~10 MB: units of ~0.1 s each
    out = tmp_path / "ray"
    parts = out / ".data_io_scale" / "parts"
    stop, killed = threading.Event(), []
    watcher = threading.Thread(target=_kill_first_unit_seen, args=(parts, stop, killed))
    watcher.start()
    try:
        outcome = scale_tokenize(_options(inputs, out), RAY_SETTINGS, unit_mb=3, progress=False)
    finally:
        stop.set()
        watcher.join()
    (task, index, pid), mid_unit = killed
    assert mid_unit, "the worker was killed before its part was complete"
    assert outcome.unfinished == [] and outcome.result is not None
    manifest = outcome.manifest
    assert len(manifest.units) >= 3
    unit = next(u for u in manifest.units if (u.task, u.index) == (task, index))
    # Ray ran the unit again on another worker: its second attempt completed it.
    started = manifest.read_record(unit.id, "started")
    assert started["attempt"] == 2 and started["pid"] != pid
    assert manifest.read_record(unit.id, "done")["attempt"] == 2
    assert manifest.read_record(unit.id, "failed") is None
    assert tree_bytes(out) == _local(inputs, tmp_path / "local")
    assert _no_temporary_folders(out), "the killed attempt's folder was left behind"


def test_bad_row_fails_its_unit_once_and_resume_completes(
    ray_cluster: None, tmp_path: Path
) -> None:
    inputs = write_inputs(tmp_path / "in")
    small = inputs / "small.jsonl"
    good = small.read_bytes()
    lines = good.split(b"\n")
    lines[6] = b"7" * len(lines[6])  # same size: a JSON number, not an object
    small.write_bytes(b"\n".join(lines))
    manifest = plan_tokenize(_options(inputs, tmp_path / "ray", on_error="fail"), 100_000)
    manifest.executor = RAY_SETTINGS.recorded()
    manifest.save()
    [bad] = [u for u in manifest.units if u.task == "small.jsonl"]

    left = run_ray(manifest, manifest.units, address=None, max_retries=2, progress=False)

    assert [u.id for u in left] == [bad.id]
    # A data error would fail again: Ray did not retry it.
    assert manifest.read_record(bad.id, "started")["attempt"] == 1
    report = status(manifest)
    assert report.counts["failed"] == 1 and report.counts["done"] == len(manifest.units) - 1
    [failure] = report.failed
    assert failure["unit"] == bad.id and failure["kind"] == "InputError"
    assert f"{small}:line 7: expected a JSON object" in failure["error"]

    small.write_bytes(good)
    outcome = resume(Manifest.load(tmp_path / "ray"), RAY_SETTINGS, progress=False)
    assert outcome.unfinished == [] and outcome.result is not None
    assert manifest.read_record(bad.id, "done")["attempt"] == 2
    assert tree_bytes(tmp_path / "ray") == _local(inputs, tmp_path / "local")
    assert json.loads((tmp_path / "ray" / ".data_io_scale" / "finalized.json").read_text())


def test_cli_starts_and_stops_its_own_cluster_and_refuses_too_many_threads(
    tmp_path: Path,
) -> None:
    """No address and no Ray running in the process: the executor starts a local cluster (this
    machine's CPUs), where a unit of more threads than CPUs could never start."""
    inputs = write_jsonl(tmp_path / "in" / "small.jsonl", rows(20))
    threads = (os.cpu_count() or 1) + 1
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(
        [sys.executable, "-m", "data_io", "tokenize", str(inputs.parent), "-o",
         str(tmp_path / "ray"), "--tokenizer-path", str(TOKENIZER), "--executor", "ray",
         "--threads-per-unit", str(threads), "-q"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert f"--threads-per-unit {threads} is more than the" in done.stderr
    manifest = Manifest.load(tmp_path / "ray")
    assert manifest.not_done() == manifest.units


def test_missing_ray_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = write_jsonl(tmp_path / "in" / "small.jsonl", rows(20))
    manifest = plan_tokenize(_options(inputs.parent, tmp_path / "ray"))
    manifest.save()
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    with pytest.raises(ConfigError, match=r"pip install 'data_io\[scale\]'"):
        run_ray(manifest, manifest.units, address=None, progress=False)


def test_tokenizer_counting_on_ray_is_byte_identical_to_one_run(
    ray_cluster: None, tmp_path: Path
) -> None:
    inputs = write_inputs(tmp_path / "in")
    request = {
        "inputs": [str(inputs)],
        "output": str(tmp_path / "ray" / "tokenizer.json"),
        "train": {"vocab_size": 800, "prefix_config": None},
    }
    outcome = run_stage("train-tokenizer", request, RAY_SETTINGS, progress=False)
    assert outcome.unfinished == [] and outcome.result is not None
    # Every file's counts came from a unit run in Ray's workers, none was counted at finalize.
    assert sorted(outcome.result.counting.reused_files) == sorted(
        u.task for u in outcome.manifest.units
    )
    pids = {outcome.manifest.read_record(u.id, "started")["pid"] for u in outcome.manifest.units}
    assert os.getpid() not in pids
    one = tmp_path / "one" / "tokenizer.json"
    train_tokenizer([inputs], one, vocab_size=800, prefix_config=None, progress=False)
    assert tree_bytes(tmp_path / "ray") == tree_bytes(one.parent)
