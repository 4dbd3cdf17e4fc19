"""Ctrl-C during a long call into the core (tokenize, train-tokenizer): the call runs without
the GIL, so Python saw the signal only when the call returned (all the work done, then
"interrupted"). It now stops within a batch, leaves what a killed run leaves, and the next run
finishes the work."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from data_io.tokenize import tokenize

FILES = 8000  # tokenized one thread at about 3,000 files a second: seconds of work


# Python's own SIGINT handler, unblocked, whatever an earlier test left (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("python_sigint")


def _not_raised(started: float) -> str:
    """Why no KeyboardInterrupt came: the call's time (under the timer's: it ended first) and
    the signal's state (pending or blocked: it never reached Python)."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    return (
        f"not interrupted: the call took {time.monotonic() - started:.2f} s; SIGINT pending "
        f"{signal.SIGINT in signal.sigpending()}, blocked {signal.SIGINT in mask}, handler "
        f"{signal.getsignal(signal.SIGINT)}"
    )


def _ctrl_c_after(seconds: float) -> threading.Timer:
    """SIGINT to this process's main thread, as a terminal's Ctrl-C arrives."""
    main = threading.main_thread().ident
    assert main is not None
    timer = threading.Timer(seconds, signal.pthread_kill, (main, signal.SIGINT))
    timer.start()
    return timer


def _many_small_files(rows: Path) -> Path:
    """FILES row files of one row each: a run long enough to be stopped midway."""
    rows.mkdir()
    for k in range(FILES):
        row = {"condition": "direct", "instruction": f"question {k}", "response": f"answer {k}"}
        (rows / f"f{k:05d}.jsonl").write_text(json.dumps(row) + "\n")
    return rows


def test_ctrl_c_stops_tokenize_within_a_batch_and_the_next_run_finishes(
    small_tokenizer: Path, tmp_path: Path
) -> None:
    rows = _many_small_files(tmp_path / "rows")
    out = tmp_path / "out"
    timer, started = _ctrl_c_after(0.3), time.monotonic()
    try:
        tokenize([rows], out, tokenizer_path=small_tokenizer, threads=1, progress=False)
    except KeyboardInterrupt:
        pass
    else:
        timer.cancel()
        pytest.fail(_not_raised(started))
    timer.join()
    done = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(done) < FILES, "stopped before the end"
    result = tokenize([rows], out, tokenizer_path=small_tokenizer, threads=1, progress=False)
    statuses = [f.status for f in result.files]
    assert statuses.count("unchanged") == len(done)
    assert statuses.count("tokenized") == FILES - len(done)
    assert not [p for p in out.iterdir() if p.name.startswith(".data_io-tmp")]


def test_ctrl_c_stops_train_tokenizer_and_writes_nothing(tmp_path: Path) -> None:
    import random

    from data_io.tokenizer.train import train_tokenizer

    rng = random.Random(1)

    def words() -> str:
        letters = "abcdefghijklmnopqrstuvwxyz"
        return " ".join("".join(rng.choices(letters, k=rng.randint(2, 9))) for _ in range(30))

    rows = tmp_path / "rows"
    rows.mkdir()
    with open(rows / "r.jsonl", "w") as file:
        for _ in range(30_000):
            row = {"condition": "direct", "instruction": words(), "response": words()}
            file.write(json.dumps(row) + "\n")
    out = tmp_path / "tok" / "tokenizer.json"
    timer, started = _ctrl_c_after(0.5), time.monotonic()
    try:
        train_tokenizer([rows], out, vocab_size=8000, prefix_config=None, threads=1, progress=False)
    except KeyboardInterrupt:
        pass
    else:
        timer.cancel()
        pytest.fail(_not_raised(started))
    timer.join()
    assert not out.exists()  # nothing that looks finished


def test_ctrl_c_on_the_command_line_says_what_the_stop_kept(
    small_tokenizer: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It printed only "data_io tokenize: interrupted": nothing on the tasks finished and kept.
    from data_io.cli import main

    rows = _many_small_files(tmp_path / "rows")
    out = tmp_path / "out"
    argv = ["tokenize", str(rows), "-o", str(out), "--tokenizer-path", str(small_tokenizer)]
    timer, started = _ctrl_c_after(0.3), time.monotonic()
    code = main([*argv, "--threads", "1", "--quiet"])
    timer.join()
    if code != 130:
        pytest.fail(_not_raised(started))
    done = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")]
    said = capsys.readouterr().err
    assert f"stopped by Ctrl-C; {len(done):,} task folder" in said, said
    assert "complete and kept" in said and "Run the same command again" in said, said
    assert "data_io tokenize: interrupted" not in said, said


def test_the_stop_counts_by_the_file_systems_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The records' mtimes are stamped by the file system (a server's clock on NFS); the run's
    # start taken from this machine's clock, ten seconds ahead, counted no record as this run's.
    from data_io.tokenize.cli import file_system_now, interrupted_message

    out = tmp_path / "out"
    assert file_system_now(out) == 0  # no folder yet: every record in it is this run's
    out.mkdir()
    before = out / "before"
    before.mkdir()
    (before / "metadata.json").write_text("{}")
    old = before.stat().st_mtime_ns - 60 * 10**9
    os.utime(before / "metadata.json", ns=(old, old))
    real = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real() + 10 * 10**9)
    started = file_system_now(out)
    assert list(out.iterdir()) == [before]  # the probe is gone
    (out / "mine").mkdir()
    (out / "mine" / "metadata.json").write_text("{}")
    assert started <= (out / "mine" / "metadata.json").stat().st_mtime_ns
    said = interrupted_message(out, started)
    assert "stopped by Ctrl-C; 1 task folder written or brought up to date" in said, said
