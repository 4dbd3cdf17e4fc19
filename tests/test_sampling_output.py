"""Crash safety, reuse, rebuild, free-space and target checks of the sampled output."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from data_io.errors import OutputError
from data_io.sampling import output, parse_overrides, pipeline, pool, sample
from data_io.sampling.synthetic import SyntheticTask, random_task, write_corpus

ROOT = Path(__file__).resolve().parent.parent


def _corpus(root: Path, rows: int = 40, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    tasks = {"a.jsonl": random_task(rng, rows), "b__x.parquet": random_task(rng, rows // 2 + 1)}
    return write_corpus(root, tasks, vocab_size=500)


def _config(tmp_path: Path, corpus: Path, *extra: str):
    rules = tmp_path / "rules.yaml"
    if not rules.exists():
        rules.write_text("- prefix: b__\n  max_per_file: 5\n")
    return parse_overrides(
        [
            f"tokenized_path={corpus}",
            f"output_path={tmp_path / 'out'}",
            f"prefix_config_path={rules}",
            "epochs=2",
            *extra,
        ]
    )


def _run(config, **kwargs):
    report = io.StringIO()
    result = sample(config, stdout=report, progress=False, **kwargs)
    return result, report.getvalue()


def _snapshot(out: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(out)): path.read_bytes()
        for path in sorted(out.rglob("*"))
        if path.is_file() and path.suffix == ".npy"
    }


def _leftovers(parent: Path) -> list[str]:
    return sorted(entry.name for entry in parent.iterdir() if entry.name.startswith(".out"))


def test_rerun_reuses_then_rebuilds_on_change(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "tok")
    first, report = _run(_config(tmp_path, corpus))
    assert not first.reused
    out = tmp_path / "out"
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["data_io"]["code"] == output.code_version()
    assert metadata["data_io"]["config"]["seed"] == 0
    assert metadata["epochs"] == 2 and metadata["token_dtype"] == "uint16"
    stamp = (out / "tokens.npy").stat().st_mtime_ns
    before = _snapshot(out)

    second, report2 = _run(_config(tmp_path, corpus))
    assert second.reused
    assert "**Reused:** the output at" in report2
    assert second.analytics is None and second.total_length == first.total_length
    assert (out / "tokens.npy").stat().st_mtime_ns == stamp  # not rewritten
    # The report of a reused output is the stored one.
    assert report2.split("### Global Summary")[0] == report.split("### Global Summary")[0]

    third, _ = _run(_config(tmp_path, corpus, "seed=1"))  # config change
    assert not third.reused
    assert _snapshot(out) != before

    time.sleep(0.01)
    write_corpus(corpus, {"c.jsonl": random_task(np.random.default_rng(5), 7)}, vocab_size=500)
    fourth, _ = _run(_config(tmp_path, corpus, "seed=1"))  # input change: a new task
    assert not fourth.reused
    assert "c.jsonl" in fourth.analytics.tasks

    fifth, _ = _run(_config(tmp_path, corpus, "seed=1", "reuse=false"))
    assert not fifth.reused
    assert _leftovers(tmp_path) == []


def test_damaged_output_is_rebuilt(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "tok")
    _run(_config(tmp_path, corpus))
    target = tmp_path / "out" / "epoch_1" / "resp_len.npy"
    target.write_bytes(target.read_bytes()[:-8])
    result, _ = _run(_config(tmp_path, corpus))
    assert not result.reused
    assert np.load(target).shape == (result.rows_per_epoch,)
    (tmp_path / "out" / "analytics.md").unlink()  # the stored report is part of the output
    assert not _run(_config(tmp_path, corpus))[0].reused


def test_failure_mid_write_leaves_old_output_untouched(tmp_path: Path, monkeypatch) -> None:
    corpus = _corpus(tmp_path / "tok")
    _run(_config(tmp_path, corpus))
    before = _snapshot(tmp_path / "out")

    real_copy = pool.copy_tokens

    def failing_copy(path, header_len, dtype, jobs, **kwargs):
        real_copy(path, header_len, dtype, jobs[:1], **kwargs)  # part of the pool is written
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pool, "copy_tokens", failing_copy)
    with pytest.raises(OutputError, match="No space left"):
        _run(_config(tmp_path, corpus, "seed=9"))
    assert _snapshot(tmp_path / "out") == before  # previous complete output still there
    assert _leftovers(tmp_path) == []  # staging folder removed


def test_failure_on_first_build_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    corpus = _corpus(tmp_path / "tok")

    def broken_plot(*_args, **_kwargs):
        raise RuntimeError("renderer crashed")

    monkeypatch.setattr(pipeline, "write_plot", broken_plot)
    with pytest.raises(RuntimeError):
        _run(_config(tmp_path, corpus))
    assert not (tmp_path / "out").exists()
    assert _leftovers(tmp_path) == []


_KILLED_CHILD = """
import sys, time
from pathlib import Path
from data_io.sampling import parse_overrides, pool, sample

real = pool.copy_tokens
def slow_copy(*args, **kwargs):
    real(*args, **kwargs)
    Path(sys.argv[2]).write_text("copying")  # tell the parent we are mid-write
    time.sleep(60)
pool.copy_tokens = slow_copy
sample(parse_overrides(sys.argv[1].split()), progress=False)
"""


def test_killed_mid_write_then_rerun(tmp_path: Path) -> None:
    """SIGKILL during the copy: no output appears; the next run cleans up and succeeds."""
    corpus = _corpus(tmp_path / "tok")
    config = _config(tmp_path, corpus)
    args = " ".join(
        f"{key}={getattr(config, key)}"
        for key in ("tokenized_path", "output_path", "prefix_config_path", "epochs")
    )
    flag = tmp_path / "flag"
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_CHILD, args, str(flag)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not flag.exists():
            assert child.poll() is None, "the child ended before the copy"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert not (tmp_path / "out").exists()
    staged = _leftovers(tmp_path)
    assert staged == [f".out.tmp-{child.pid}"]

    result, _ = _run(config)
    assert not result.reused
    assert (tmp_path / "out" / "metadata.json").exists()
    assert _leftovers(tmp_path) == []  # the dead run's staging folder was removed


_TERMINATED_CHILD = """
import sys, time
from pathlib import Path
from data_io.sampling import main, pool

real = pool.copy_tokens
def slow_copy(*args, **kwargs):
    real(*args, **kwargs)
    Path(sys.argv[2]).write_text("copying")
    time.sleep(4)  # long enough for the parent to signal; short for the test
pool.copy_tokens = slow_copy
sys.exit(main([*sys.argv[1].split(), "--quiet"]))
"""


def test_sigterm_removes_the_staging_folder(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "tok")
    config = _config(tmp_path, corpus)
    args = " ".join(
        f"{key}={getattr(config, key)}"
        for key in ("tokenized_path", "output_path", "prefix_config_path", "epochs")
    )
    flag = tmp_path / "flag"
    child = subprocess.Popen(
        [sys.executable, "-c", _TERMINATED_CHILD, args, str(flag)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not flag.exists():
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        assert _leftovers(tmp_path) == [f".out.tmp-{child.pid}"]
        os.kill(child.pid, signal.SIGTERM)
        # The copy thread finishes its sleep before the run unwinds: allow for it.
        code = child.wait(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert code == 128 + signal.SIGTERM
    assert _leftovers(tmp_path) == []
    assert not (tmp_path / "out").exists()


def test_not_enough_space_fails_before_writing(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "tok")
    with pytest.raises(OutputError, match=r"not enough space.*output_path"):
        _run(_config(tmp_path, corpus), free_space=lambda _path: 1000)
    assert not (tmp_path / "out").exists()
    assert _leftovers(tmp_path) == []


def test_stale_output_is_deleted_first_when_only_it_is_in_the_way(tmp_path: Path) -> None:
    target = tmp_path / "out"
    (target / "epoch_0").mkdir(parents=True)
    (target / "tokens.npy").write_bytes(b"x" * 1000)
    (target / "epoch_0" / "inst_len.npy").write_bytes(b"x" * 500)
    messages: list[str] = []

    def probe(_path: Path) -> int:
        return 300 if target.exists() else 10**9

    # 300 free + 1500 reclaimable covers 1700 needed: the stale output goes first.
    output.ensure_space(target, 1700, probe=probe, log=messages.append)
    assert not target.exists()
    assert "deleting the stale output" in messages[0]


def test_stale_output_is_kept_when_deleting_it_would_not_help(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    (target / "tokens.npy").write_bytes(b"x" * 1000)
    with pytest.raises(OutputError, match=r"not enough space"):
        output.ensure_space(target, 5000, probe=lambda _path: 300, log=lambda _m: None)
    assert (target / "tokens.npy").exists()


@pytest.fixture
def small_tmpfs(tmp_path: Path):
    """A real 1 MiB tmpfs (needs root and mount permission, as in CI containers)."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root; the fake-probe tests cover the logic")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=False)


def _big_corpus(root: Path) -> Path:
    # ~2.4 MB of tokens: does not fit a 1 MiB file system.
    rows = SyntheticTask(inst_len=np.full(3000, 100), resp_len=np.full(3000, 100))
    return write_corpus(root, {"a.jsonl": rows}, vocab_size=70_000)


def test_small_tmpfs_is_refused_before_writing(tmp_path: Path, small_tmpfs: Path) -> None:
    corpus = _big_corpus(tmp_path / "tok")
    config = _config(tmp_path, corpus, f"output_path={small_tmpfs / 'out'}")
    with pytest.raises(OutputError, match=r"not enough space.*MiB|not enough space"):
        _run(config)
    assert list(small_tmpfs.iterdir()) == []


def test_write_hitting_enospc_is_an_output_error(tmp_path: Path, small_tmpfs: Path) -> None:
    """Even when the probe is wrong, a full file system fails cleanly, leaving nothing."""
    corpus = _big_corpus(tmp_path / "tok")
    config = _config(tmp_path, corpus, f"output_path={small_tmpfs / 'out'}")
    with pytest.raises(OutputError, match="No space left"):
        _run(config, free_space=lambda _path: 10**12)
    assert list(small_tmpfs.iterdir()) == []


def test_missing_dev_shm_is_explained(tmp_path: Path, monkeypatch) -> None:
    corpus = _corpus(tmp_path / "tok")
    real_is_dir = Path.is_dir

    def no_shm(path: Path) -> bool:
        return False if str(path) == "/dev/shm" else real_is_dir(path)

    monkeypatch.setattr(Path, "is_dir", no_shm)
    with pytest.raises(OutputError, match=r"/dev/shm does not exist.*output_path="):
        _run(_config(tmp_path, corpus, "output_path=/dev/shm/sampled_test"))


def test_refuses_to_replace_a_foreign_folder(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "tok")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "thesis.tex").write_text("precious")
    with pytest.raises(OutputError, match="holds files the sampler does not write"):
        _run(_config(tmp_path, corpus))
    assert (tmp_path / "out" / "thesis.tex").read_text() == "precious"


def test_replaces_an_output_of_the_original_sampler(tmp_path: Path) -> None:
    """An output without our marker (the original's, or partial) is rebuilt, not reused."""
    corpus = _corpus(tmp_path / "tok")
    out = tmp_path / "out"
    (out / "epoch_0").mkdir(parents=True)
    np.save(out / "tokens.npy", np.zeros(3, dtype=np.int32))
    (out / "metadata.json").write_text(json.dumps({"vocab_size": None, "total_length": 1}))
    result, _ = _run(_config(tmp_path, corpus))
    assert not result.reused
    assert "data_io" in json.loads((out / "metadata.json").read_text())


def test_publish_replaces_directory_atomically(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    (target / "tokens.npy").write_text("old")
    staging = tmp_path / ".out.tmp-1"
    staging.mkdir()
    (staging / "tokens.npy").write_text("new")
    output.publish(staging, target)
    assert (target / "tokens.npy").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
