"""Disk full and read-only file systems: one line saying what, where and how, never a traceback,
and the dataset already in the folder left as it was."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import data_io.prepare.run as prepare_run
from data_io.cli import main
from data_io.errors import os_error_message
from tests.prepare.helpers import documents, tree_bytes, write_txt

REPO = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def small_tmpfs(folder: Path, size: str, *, read_only: bool = False) -> Iterator[Path]:
    """A real tmpfs of ``size`` at ``folder`` (root only): the kernel's own ENOSPC / EROFS."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.decode().strip()}); the "
                    "simulated-errno tests below cover the same path")  # fmt: skip
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def prepare_cli(inputs: list[Path], out: Path) -> subprocess.CompletedProcess[str]:
    argv = ["prepare", *map(str, inputs), "-o", str(out), "--tokenizer", "char", "--quiet"]
    return subprocess.run(
        [sys.executable, "-m", "data_io", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )


def assert_one_line(stderr: str, *needles: str) -> None:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if "error:" in line]
    assert len(lines) == 1, stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_disk_full_is_one_line_and_keeps_the_dataset(tmp_path: Path) -> None:
    text = write_txt(tmp_path / "in" / "a.txt", documents(200, seed=1))
    big = write_txt(tmp_path / "in" / "b.txt", documents(20_000, seed=2))
    with small_tmpfs(tmp_path / "disk", "256k") as disk:
        out = disk / "out"
        assert prepare_cli([text], out).returncode == 0
        before = tree_bytes(out)
        failed = prepare_cli([text, big], out)
        assert failed.returncode == 1
        # The file that could not be written is named (a write's error carries no name).
        assert_one_line(failed.stderr, f"{out}/", "No space left on device", "[ENOSPC]")
        assert tree_bytes(out) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
@pytest.mark.parametrize("free_kb", [8, 40, 200, 12000])
def test_a_first_run_on_a_full_disk_leaves_nothing_in_the_way_of_the_next(
    tmp_path: Path, free_kb: int
) -> None:
    big = write_txt(tmp_path / "in" / "b.txt", documents(20_000, seed=2))
    with small_tmpfs(tmp_path / "disk", "32m") as disk:
        filler = disk / "filler"
        filler.write_bytes(b"\0" * (32768 - free_kb) * 1024)  # the disk full but free_kb
        out = disk / "out"
        failed = prepare_cli([big], out)
        assert failed.returncode == 1
        assert_one_line(failed.stderr, f"{out}/", "[ENOSPC]")
        # A failed first run is rolled back whole: no shard under a temporary name, no journal.
        left = sorted(p.name for p in out.rglob("*")) if out.exists() else []
        assert not [name for name in left if name.endswith(".tmp") or name == ".prepare"], left
        filler.unlink()  # space freed: the same command now runs to its end
        again = prepare_cli([big], out)
        assert again.returncode == 0, again.stderr
        assert (out / "dataset_metadata.json").is_file()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_read_only_file_system_is_one_line(tmp_path: Path) -> None:
    text = write_txt(tmp_path / "in" / "a.txt", documents(50, seed=1))
    with small_tmpfs(tmp_path / "ro", "1m") as disk:
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        failed = prepare_cli([text], disk / "out")
        assert failed.returncode == 1
        assert_one_line(failed.stderr, str(disk / "out"), "[EROFS]", "read-only")


@pytest.mark.parametrize(
    ("code", "advice"),
    [(errno.ENOSPC, "free space"), (errno.EROFS, "read-only"), (errno.EACCES, "permissions")],
)
def test_any_os_error_of_a_stage_is_one_line(tmp_path, monkeypatch, capsys, code, advice) -> None:
    """The same without root: the shard writer fails with the errno the kernel would give."""
    text = write_txt(tmp_path / "in" / "a.txt", documents(50, seed=1))
    out = tmp_path / "out"

    def fail(*_args, **_kwargs):
        raise OSError(code, os.strerror(code), str(out / "train" / ".shard_00000.bin.tmp"))

    monkeypatch.setattr(prepare_run, "write_shards", fail)
    assert main(["prepare", str(text), "-o", str(out), "--tokenizer", "char"]) == 1
    err = capsys.readouterr().err
    assert_one_line(err, "shard_00000.bin.tmp", f"[{errno.errorcode[code]}]", advice)
    assert not (out / "dataset_metadata.json").exists()


def test_message_names_both_paths_of_a_rename() -> None:
    error = OSError(errno.EXDEV, os.strerror(errno.EXDEV), "/a/x.tmp", None, "/b/x")
    assert os_error_message(error).startswith("/a/x.tmp -> /b/x: ")
