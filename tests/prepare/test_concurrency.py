"""One prepare run per output folder; empty files found in folders are skipped, not fatal."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

import pytest

from data_io.errors import InputError, OutputError
from data_io.prepare.state import _is_open_folder, exclusive
from tests.prepare.helpers import documents, read_split, write_txt
from tests.prepare.test_api import run


def test_a_second_run_into_a_busy_folder_is_refused(small_tokenizer: Path, tmp_path: Path):
    write_txt(tmp_path / "in" / "a.txt", documents(50, seed=1))
    out = tmp_path / "out"
    out.mkdir()
    # Another process holding the folder (as a live run does): simulated with our own flock
    # on a second descriptor, which conflicts like a second process would.
    fd = os.open(out, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with pytest.raises(OutputError, match="another data_io prepare is writing"):
            run([tmp_path / "in"], out, small_tokenizer)
    finally:
        os.close(fd)
    run([tmp_path / "in"], out, small_tokenizer)  # free again: the run goes ahead
    assert read_split(out, "train").size > 0


def test_a_folder_on_a_file_system_without_flock_is_prepared_unguarded(
    small_tokenizer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Lustre without -o flock (ENOSYS), NFS (ENOLCK): the run goes on, as before the lock.
    def no_flock(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_flock)
    write_txt(tmp_path / "in" / "a.txt", documents(50, seed=1))
    run([tmp_path / "in"], tmp_path / "out", small_tokenizer)
    assert read_split(tmp_path / "out", "train").size > 0


def test_exclusive_releases_and_refuses_a_file(tmp_path: Path):
    with exclusive(tmp_path / "new"):
        assert (tmp_path / "new").is_dir()
    with exclusive(tmp_path / "new"):  # released at the end of the block
        pass
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="is a file"), exclusive(tmp_path / "file"):
        pass


def test_a_failed_run_leaves_no_empty_folder_of_its_own(small_tokenizer: Path, tmp_path: Path):
    with pytest.raises(InputError, match="does not exist"):
        run([tmp_path / "missing.txt"], tmp_path / "new", small_tokenizer)
    assert not (tmp_path / "new").exists()
    # A folder that was there before stays, and so does one the run wrote into.
    (tmp_path / "mine").mkdir()
    with pytest.raises(InputError, match="does not exist"):
        run([tmp_path / "missing.txt"], tmp_path / "mine", small_tokenizer)
    assert (tmp_path / "mine").is_dir()
    # Every folder it made, not only the last.
    with pytest.raises(InputError, match="does not exist"):
        run([tmp_path / "missing.txt"], tmp_path / "a" / "b" / "c", small_tokenizer)
    assert not (tmp_path / "a").exists()
    with pytest.raises(RuntimeError), exclusive(tmp_path / "written"):
        (tmp_path / "written" / ".prepare").mkdir()
        raise RuntimeError("a run that failed after writing its journal")
    assert (tmp_path / "written" / ".prepare").is_dir()


def test_a_folder_removed_or_made_again_under_the_lock_is_not_held(tmp_path: Path):
    """Two runs into one new folder: if one fails and removes it between the other's mkdir and
    its lock, the other refuses (its lock would be on a folder no longer at the path)."""
    out = tmp_path / "out"
    out.mkdir()
    fd = os.open(out, os.O_RDONLY)
    try:
        assert _is_open_folder(out, fd)
        out.rmdir()
        assert not _is_open_folder(out, fd)
        out.mkdir()
        assert not _is_open_folder(out, fd)
    finally:
        os.close(fd)


def test_empty_files_in_a_folder_are_skipped(small_tokenizer: Path, tmp_path: Path):
    folder = tmp_path / "in"
    write_txt(folder / "a.txt", documents(40, seed=2))
    (folder / "zz_empty.txt").write_text("")
    (folder / "blank.txt").write_text("\n\n   \n")
    result = run([folder], tmp_path / "out", small_tokenizer)
    assert sorted(s for s in result.skipped_files if "no documents" in s) == sorted(
        f"{(folder / n).resolve()} (no documents)" for n in ("blank.txt", "zz_empty.txt")
    )
    # A file named on the command line must hold text.
    with pytest.raises(InputError, match="empty input"):
        run([folder / "zz_empty.txt"], tmp_path / "out2", small_tokenizer)


def test_a_byte_order_mark_is_not_text(small_tokenizer: Path, tmp_path: Path):
    import json

    docs = documents(20, seed=5)
    (tmp_path / "a.txt").write_bytes(b"\xef\xbb\xbf" + "\n\n".join(docs).encode())
    (tmp_path / "b.jsonl").write_bytes(
        b"\xef\xbb\xbf" + "".join(json.dumps({"text": d}) + "\n" for d in docs).encode()
    )
    (tmp_path / "c.txt").write_text("\n\n".join(docs))
    with_bom = run([tmp_path / "a.txt"], tmp_path / "o1", small_tokenizer, dedup=False)
    jsonl = run([tmp_path / "b.jsonl"], tmp_path / "o2", small_tokenizer, dedup=False)
    plain = run([tmp_path / "c.txt"], tmp_path / "o3", small_tokenizer, dedup=False)
    assert with_bom.documents_read == jsonl.documents_read == plain.documents_read == 20
    for split in ("train", "val"):
        expected = read_split(tmp_path / "o3", split).tolist()
        assert read_split(tmp_path / "o1", split).tolist() == expected
        assert read_split(tmp_path / "o2", split).tolist() == expected
