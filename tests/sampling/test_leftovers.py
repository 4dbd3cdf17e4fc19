"""The staging folders killed sampler runs leave (``.<out>.tmp-<pid>``, hundreds of MB in
/dev/shm) are removed by the next run, whether it rebuilds or reuses the output, and said in
one line; a live run's folder stays, even when its pid looks like a reused one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from data_io.sampling import output
from data_io.sampling.synthetic import random_task, write_corpus
from data_io.util.stale import host_tag
from tests.conftest import sampler_config

ROOT = Path(__file__).resolve().parents[2]


def _corpus(root: Path) -> Path:
    rng = np.random.default_rng(0)
    return write_corpus(root, {"a.jsonl": random_task(rng, 30)}, vocab_size=500)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _staging(parent: Path, pid: int | str, size: int) -> Path:
    folder = parent / f".out.tmp-{pid}"
    (folder / "epoch_0").mkdir(parents=True)
    (folder / "tokens.npy").write_bytes(b"\0" * size)
    return folder


def _sample(tmp_path: Path, corpus: Path) -> subprocess.CompletedProcess:
    """``sample_tokenized.py`` in a process of its own (its pid is not this test's)."""
    config = sampler_config(tmp_path, corpus)
    return subprocess.run(
        [sys.executable, "sample_tokenized.py", f"tokenized_path={config.tokenized_path}",
         f"output_path={config.output_path}", f"prefix_config_path={config.prefix_config_path}",
         "epochs=2", "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_dead_staging_goes_live_staging_stays(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "tok")
    dead = _dead_pid()
    gone = _staging(tmp_path, dead, 3 << 20)
    live = _staging(tmp_path, os.getpid(), 10)  # this test's process: alive
    done = _sample(tmp_path, corpus)
    assert done.returncode == 0, done.stderr
    assert not gone.exists()
    assert live.is_dir() and (live / "tokens.npy").stat().st_size == 10
    lines = [line for line in done.stderr.splitlines() if "left by" in line]
    assert lines == [
        f"sample: removed 1 temporary folder left by a killed run (pid {dead}, 3.0 MiB): {gone}"
    ]


def test_a_run_that_reuses_the_output_removes_them_too(tmp_path: Path) -> None:
    """The case that leaked: the output is current, so nothing is rebuilt."""
    corpus = _corpus(tmp_path / "tok")
    assert _sample(tmp_path, corpus).returncode == 0
    dead = _dead_pid()
    gone = _staging(tmp_path, dead, 100)
    retired = tmp_path / f".out.old-{dead}"
    retired.mkdir()
    done = _sample(tmp_path, corpus)
    assert done.returncode == 0, done.stderr
    assert "reusing it" in done.stderr
    assert not gone.exists() and not retired.exists()
    assert f"sample: removed 2 temporary folders left by a killed run (pid {dead}, " in done.stderr


def test_a_reused_pid_does_not_keep_a_dead_folder(tmp_path: Path) -> None:
    """The pid in the name now belongs to a process that started after the folder was last
    written: not its owner."""
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        folder = _staging(tmp_path, sleeper.pid, 10)
        os.utime(folder, (1e9, 1e9))  # last written in 2001
        messages: list[str] = []
        removed = output.remove_stale_staging(tmp_path / "out", messages.append)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert [item.path for item in removed] == [folder] and not folder.exists()
    assert messages == [
        f"sample: removed 1 temporary folder left by a killed run (pid {sleeper.pid}, 10 bytes)"
        f": {folder}"
    ]


def test_names_that_are_not_ours_stay(tmp_path: Path) -> None:
    """Only ``.<name>.tmp-<digits>`` and ``.<name>.old-<digits>`` are the sampler's."""
    kept = [tmp_path / ".out.tmp-abc", tmp_path / ".out.tmp-", tmp_path / ".outer.tmp-1"]
    for path in kept:
        path.mkdir()
    messages: list[str] = []
    assert output.remove_stale_staging(tmp_path / "out", messages.append) == []
    assert all(path.is_dir() for path in kept) and messages == []


def test_another_machines_staging_stays(tmp_path: Path) -> None:
    """An output folder on a cluster's shared file system: a run of another node may be
    writing its staging folder now; its pid says nothing on this machine."""
    dead = _dead_pid()
    other = "00000000" if host_tag() != "00000000" else "11111111"
    theirs = _staging(tmp_path, f"{dead}@{other}", 10)
    ours = _staging(tmp_path, f"{dead}@{host_tag()}", 10)
    messages: list[str] = []
    removed = output.remove_stale_staging(tmp_path / "out", messages.append)
    assert [item.path for item in removed] == [ours] and theirs.is_dir()
