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

from data_io.errors import ConfigError, OutputError
from data_io.sampling import output, pipeline, pool, sample
from data_io.sampling.synthetic import SyntheticTask, random_task, write_corpus
from data_io.util.stale import host_tag
from tests.conftest import mounted_tmpfs
from tests.conftest import sampler_config as _config

ROOT = Path(__file__).resolve().parents[2]


def _corpus(root: Path, rows: int = 40, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    tasks = {"a.jsonl": random_task(rng, rows), "b__x.parquet": random_task(rng, rows // 2 + 1)}
    return write_corpus(root, tasks, vocab_size=500)


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
    assert staged == [f".out.tmp-{child.pid}@{host_tag()}"]

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
        assert _leftovers(tmp_path) == [f".out.tmp-{child.pid}@{host_tag()}"]
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

    # 300 free + 1500 reclaimable covers 1700 needed: the previous output goes first.
    output.ensure_space(target, 1700, probe=probe, log=messages.append)
    assert not target.exists()
    assert "deleting the previous output" in messages[0]


def test_stale_output_is_kept_when_deleting_it_would_not_help(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    (target / "tokens.npy").write_bytes(b"x" * 1000)
    with pytest.raises(OutputError, match=r"not enough space"):
        output.ensure_space(target, 5000, probe=lambda _path: 300, log=lambda _m: None)
    assert (target / "tokens.npy").exists()


@pytest.fixture
def small_tmpfs(tmp_path: Path):
    """A real 1 MiB tmpfs; the fake-probe tests cover the logic where it cannot be mounted."""
    with mounted_tmpfs(tmp_path / "small", "1m") as mount_point:
        yield mount_point


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


# -- sizes in messages ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (0, "0 bytes"),
        (1, "1 byte"),
        (1023, "1,023 bytes"),
        (2**20, "1.0 MiB"),
        (10_800_000, "10.3 MiB"),
        (2**30 - 1, "1024.0 MiB"),
        (2**30, "1.00 GiB"),
        (7_100_000_000, "6.61 GiB"),
    ],
)
def test_sizes_are_shown_with_enough_precision(count: int, text: str) -> None:
    assert output.format_size(count) == text


def test_a_small_gap_is_visible_in_the_space_messages(tmp_path: Path) -> None:
    """10 MB free against 12 MB needed read "0.01 GiB free, needs 0.01 GiB"."""
    target = tmp_path / "out"
    target.mkdir()
    (target / "tokens.npy").write_bytes(b"x" * 1000)
    with pytest.raises(OutputError) as info:
        output.ensure_space(target, 12 << 20, probe=lambda _path: 10 << 20, log=lambda _m: None)
    assert "has 10.0 MiB free, 12.0 MiB needed" in str(info.value)
    messages: list[str] = []
    free = {"bytes": (12 << 20) - 500}
    output.ensure_space(
        target, 12 << 20, probe=lambda _path: free["bytes"], log=messages.append,
        before_delete=lambda: free.update(bytes=12 << 20),
    )  # fmt: skip
    assert "has 12.0 MiB free, the new output needs 12.0 MiB" in messages[0]
    assert "deleting the previous output" in messages[0] and "(1,000 bytes)" in messages[0]
    assert "stale" not in messages[0]


# -- a symbolic link as output_path ---------------------------------------------------------


def test_symlinked_output_path_is_followed_not_replaced(tmp_path: Path, capsys) -> None:
    """`ln -s /dev/shm/real link_out`: the output goes to the link's target (the RAM disk),
    and the link keeps pointing at it across rebuilds."""
    corpus = _corpus(tmp_path / "tok")
    ram = tmp_path / "ram"
    ram.mkdir()
    real, link = ram / "real", tmp_path / "link_out"
    link.symlink_to(real)  # dangling until the first run
    _run(_config(tmp_path, corpus, f"output_path={link}"))
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert (real / "tokens.npy").is_file() and (real / "epoch_1" / "resp_len.npy").is_file()
    assert f"output_path {link} is a symbolic link" in capsys.readouterr().err
    first = _snapshot(real)
    result, _ = _run(_config(tmp_path, corpus, f"output_path={link}", "seed=7"))
    assert result.output_path == real and not result.reused
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert _snapshot(real) != first
    # Nothing left beside the link or beside its target.
    assert sorted(entry.name for entry in tmp_path.iterdir()) == [
        "link_out", "ram", "rules.yaml", "tok",
    ]  # fmt: skip
    assert [entry.name for entry in ram.iterdir()] == ["real"]
    again, _ = _run(_config(tmp_path, corpus, f"output_path={link}", "seed=7"))
    assert again.reused


def test_symlink_to_a_mount_point_is_refused(tmp_path: Path, monkeypatch) -> None:
    corpus = _corpus(tmp_path / "tok")
    mount = tmp_path / "mnt"
    mount.mkdir()
    (tmp_path / "link_out").symlink_to(mount)
    monkeypatch.setattr(output, "is_mount_point", lambda path: path == mount)
    with pytest.raises(ConfigError, match=f"{str(mount)!r} is a mount point"):
        _run(_config(tmp_path, corpus, f"output_path={tmp_path / 'link_out'}"))
    assert list(mount.iterdir()) == []
    assert (tmp_path / "link_out").is_symlink()


def test_leftover_links_of_dead_runs_are_removed_not_followed(tmp_path: Path, capsys) -> None:
    """An earlier version renamed a linked output aside (``.out.old-<pid>``, a link): the
    cleanup must unlink it, and must not touch what it points to."""
    corpus = _corpus(tmp_path / "tok")
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "tokens.npy").write_bytes(b"someone's data")
    dead_pid = 2**30  # above any pid_max: no such process
    (tmp_path / f".out.old-{dead_pid}").symlink_to(kept)
    (tmp_path / f".out.tmp-{dead_pid + 1}").symlink_to(tmp_path / "nowhere")  # dangling
    stray_file = tmp_path / f".out.old-{dead_pid + 2}"
    stray_file.write_bytes(b"x")
    _run(_config(tmp_path, corpus))
    assert _leftovers(tmp_path) == []
    assert (kept / "tokens.npy").read_bytes() == b"someone's data"
    lines = [line for line in capsys.readouterr().err.splitlines() if "left by" in line]
    pids = f"{dead_pid}, {dead_pid + 1}, {dead_pid + 2}"
    assert lines == [
        f"sample: removed 3 temporary files left by killed runs (pids {pids}, 1 byte) in {tmp_path}"
    ]
    _run(_config(tmp_path, corpus, "seed=9"))
    assert "left by" not in capsys.readouterr().err  # announced once


def test_remove_entry_handles_every_kind(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "f").write_text("x")
    file = tmp_path / "file"
    file.write_text("x")
    link = tmp_path / "link"
    link.symlink_to(folder)
    for entry in (link, folder, file, tmp_path / "absent"):
        output.remove_entry(entry)
    assert list(tmp_path.iterdir()) == []
