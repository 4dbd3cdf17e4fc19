"""data_io.prepare.pipeline: the same bytes and counters whatever the thread count, on input
that moves every cleaning counter."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.prepare.helpers import documents, write_jsonl, write_txt
from tests.prepare.test_api import run

# Documents that the cleaning changes or drops in every way it can (each counter moves).
_TRICKY = [
    "cafe\u0301 is not composed " * 3,
    "trailing spaces   \r\nand a CR line\rand controls\x00\x07 here\x85\n\n\n\nafter a run",
    "x\n. \nshort lines around a long enough line\n y",
    "tiny",
    "   \n\t\n",
]


def _corpus(folder: Path) -> None:
    docs = documents(1200, seed=9, duplicates=150)
    write_txt(folder / "a.txt", docs[:400] + _TRICKY)
    write_jsonl(folder / "b.jsonl", _TRICKY + docs[400:800])
    (folder / "c.txt").write_bytes(b"bad \xff byte line\n\n" + "\n\n".join(docs[800:]).encode())
    (folder / "d.txt").write_text("\r\n".join(_TRICKY * 4), encoding="utf-8")


def _tree(out: Path) -> dict[str, bytes]:
    """Every output file but the metadata (it records timings): shards and state."""
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name != "dataset_metadata.json"
    }


@pytest.mark.parametrize("threads", [2, 3])
def test_thread_count_changes_no_byte_and_no_counter(
    small_tokenizer: Path, tmp_path: Path, threads: int
):
    _corpus(tmp_path / "in")
    one = run([tmp_path / "in"], tmp_path / "one", small_tokenizer, tokens_per_shard=700, threads=1)
    many = run(
        [tmp_path / "in"], tmp_path / "many", small_tokenizer, tokens_per_shard=700, threads=threads
    )
    assert _tree(tmp_path / "one") == _tree(tmp_path / "many")
    assert len(_tree(tmp_path / "one")) > 4
    for name in ("documents_read", "bytes_read", "text_chars", "invalid_utf8", "cleaning"):
        assert getattr(one, name) == getattr(many, name), name
    assert one.invalid_utf8 == 1
    assert all(one.cleaning[key] for key in ("unicode_normalized", "whitespace_cleaned"))
    # The tricky documents' controls (NUL, BEL, NEL) in a.txt, b.jsonl and d.txt's copies.
    assert 0 < one.cleaning["controls_removed"] < one.cleaning["whitespace_cleaned"]


def test_the_summary_says_when_control_characters_were_removed(tmp_path: Path, capsys):
    from data_io.cli import main

    text = tmp_path / "a.txt"
    text.write_bytes(b"a document with a NUL\x00 byte inside it\n\nand one clean enough doc\n")
    assert main(["prepare", str(text), "-o", str(tmp_path / "out"), "--tokenizer", "char"]) == 0
    shown = capsys.readouterr().out
    assert "whitespace-cleaned documents           1" in shown
    assert "  of them, control characters removed  1" in shown
    text.write_bytes(b"one clean document of text\n\nand another clean one\n")
    assert main(["prepare", str(text), "-o", str(tmp_path / "out2"), "--tokenizer", "char"]) == 0
    assert "control characters" not in capsys.readouterr().out


def test_the_summary_notes_an_empty_val_split(tmp_path: Path, capsys):
    from data_io.cli import main

    # Two documents at --val-fraction 0.1: by their hashes neither goes to val (the split is
    # by content, so this is fixed for these texts), and the summary says so.
    text = tmp_path / "a.txt"
    text.write_text(
        "first document here with words enough.\n\nsecond document with more words tooo.\n"
    )
    out = tmp_path / "out"
    assert main(["prepare", str(text), "-o", str(out), "--tokenizer", "char"]) == 0
    shown = capsys.readouterr().out
    assert not list((out / "val").iterdir())
    assert (
        "note: val is empty: no document's hash fell in --val-fraction 0.1 (about 0.2 of " in shown
    )
    # Asked for no val: nothing to note.
    args = ["prepare", str(text), "-o", str(tmp_path / "none"), "--tokenizer", "char"]
    assert main([*args, "--val-fraction", "0"]) == 0
    assert "val is empty" not in capsys.readouterr().out


def _encode_threads() -> int:
    """Live threads of the Rust encoder's pool in this process (Linux names them)."""
    names = [(task / "comm").read_text() for task in Path("/proc/self/task").iterdir()]
    return sum(name.startswith("data_io-encode") for name in names)


def _eventually(check, seconds: float = 10.0) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc thread names")
def test_threads_apply_to_every_call_and_leave_the_environment_as_it_was(
    small_tokenizer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import os

    monkeypatch.delenv("RAYON_NUM_THREADS", raising=False)
    _corpus(tmp_path / "in")
    for step, count in enumerate((1, 2, 1)):
        # A new folder each time: a folder prepared before has nothing new to encode. (Named by
        # the pool's threads before, two steps met the same folder after a test that had left
        # a pool of two threads, and the last step ran nothing.)
        run([tmp_path / "in"], tmp_path / f"out{step}", small_tokenizer, threads=count)
        assert _eventually(lambda count=count: _encode_threads() == count), _encode_threads()
        assert "RAYON_NUM_THREADS" not in os.environ


@pytest.mark.parametrize("dedup", ["none", "doc", "near"])
def test_a_write_that_fails_on_the_writer_thread_fails_the_run_and_leaves_nothing(
    small_tokenizer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dedup: str
):
    """The shards (or the spool) are written by their own thread: its error (a full disk here)
    is the run's, raised once every batch before it is done, and the folder is rolled back."""
    import errno

    from data_io.formats import raw_reading
    from data_io.prepare import pipeline

    _corpus(tmp_path / "in")
    monkeypatch.setattr(raw_reading, "BATCH_BYTES", 4096)  # many batches, many writes
    calls = {"count": 0}
    appends = [(pipeline.ShardSink, "append"), (pipeline.ShardSink, "append_split")]
    for sink, name in [*appends, (pipeline.Spool, "append")]:
        append = getattr(sink, name)

        def failing(self, *args, append=append, **kwargs):
            calls["count"] += 1
            if calls["count"] == 3:
                raise OSError(errno.ENOSPC, "No space left on device")
            return append(self, *args, **kwargs)

        monkeypatch.setattr(sink, name, failing)
    out = tmp_path / "out"
    with pytest.raises(OSError, match="No space left"):
        run([tmp_path / "in"], out, small_tokenizer, dedup=dedup, threads=2)
    assert calls["count"] >= 3
    assert not list(out.glob("*/shard_*")) and not (out / "dataset_metadata.json").exists()
