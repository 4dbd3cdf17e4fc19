"""data_io.cleaning.writers: bytes, grouping, bounded buffers, atomic replacement."""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from data_io.cleaning import group_commit
from data_io.cleaning.writers import (
    OutputWriter,
    jsonl_file,
    jsonl_files,
    parquet_file,
    parquet_files,
)
from data_io.errors import InputError, OutputError
from data_io.tokenize import tokenize
from data_io.util.stale import host_tag, owner_token

from .upstream import REPO_ROOT, jsonl_bytes, read_jsonl

TRICKY = [
    'quote " backslash \\ slash /',
    "controls \x00\x01\x08\x0c\x1f\x7f tab\tnew\nline\r",
    "non-ASCII é 中 😀 \u2028\u2029 \ufeff",
    "",
]


def _table(
    conditions: list[str],
    instructions: list[str],
    responses: list[str],
    files: list[str] | None = None,
) -> pa.Table:
    columns = {"condition": conditions, "instruction": instructions, "response": responses}
    if files is not None:
        columns["file"] = files
    return pa.table(columns)


def _temporaries(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if ".tmp-" in p.name]


def test_jsonl_bytes_are_compact_utf8_json(tmp_path: Path) -> None:
    out = tmp_path / "x.jsonl"
    with OutputWriter(jsonl_file(str(out))) as writer:
        writer.write(_table(["cot"] * 4, TRICKY, list(reversed(TRICKY))))
        writer.write(_table(["direct"], ["second"], ["batch"]))
        writer.commit()
    expected = [
        {"condition": "cot", "instruction": i, "response": r}
        for i, r in zip(TRICKY, reversed(TRICKY), strict=True)
    ] + [{"condition": "direct", "instruction": "second", "response": "batch"}]
    assert out.read_bytes() == jsonl_bytes(expected)


def test_parquet_has_three_string_columns(tmp_path: Path) -> None:
    out = tmp_path / "x.parquet"
    table = pa.table(
        {
            name: pa.array(["cot"], pa.large_string())
            for name in ("response", "condition", "instruction")
        }
    )
    with OutputWriter(parquet_file(str(out))) as writer:
        writer.write(table)
        writer.commit()
    read = pq.read_table(out)
    assert read.schema.names == ["condition", "instruction", "response"]
    assert all(field.type == pa.string() for field in read.schema)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
@pytest.mark.parametrize("options", [{}, {"max_open": 1, "row_group_rows": 2, "buffer_bytes": 64}])
def test_keyed_output_matches_plain_grouping(tmp_path: Path, fmt: str, options: dict) -> None:
    rng = random.Random(11)
    keys = ["k0", "k1", "k2", "k3", "k4"]
    rows = [
        (rng.choice(["cot", "direct"]), f"q{i} {rng.random()}", f"a{i}", rng.choice(keys))
        for i in range(400)
    ]
    spec = (
        jsonl_files(str(tmp_path / "out"))
        if fmt == "jsonl"
        else parquet_files(str(tmp_path / "out"))
    )
    with OutputWriter(spec, **options) as writer:
        for start in range(0, len(rows), 37):
            chunk = rows[start : start + 37]
            writer.write(_table(*(list(column) for column in zip(*chunk, strict=True))))
        written = writer.commit()
    expected: dict[str, list[dict]] = {}
    for condition, instruction, response, key in rows:
        expected.setdefault(f"{key}.{fmt}", []).append(
            {"condition": condition, "instruction": instruction, "response": response}
        )
    if fmt == "jsonl":
        got = {path.name: read_jsonl(path) for path, _ in written}
    else:
        got = {path.name: pq.read_table(path).to_pylist() for path, _ in written}
    assert got == expected
    assert [n for _, n in written] == [len(expected[p.name]) for p, _ in written]
    assert _temporaries(tmp_path) == []
    if fmt == "parquet" and options:
        # Bounded row groups: never more than row_group_rows rows in one.
        parquet = pq.ParquetFile(tmp_path / "out" / "k0.parquet")
        assert (
            max(parquet.metadata.row_group(i).num_rows for i in range(parquet.num_row_groups)) <= 37
        )


@pytest.mark.parametrize("spec", [jsonl_file, parquet_file])
def test_failure_leaves_previous_output_untouched(tmp_path: Path, spec) -> None:
    out = tmp_path / "x.out"
    out.write_bytes(b"previous")
    with pytest.raises(RuntimeError), OutputWriter(spec(str(out))) as writer:
        writer.write(_table(["cot"] * 3, ["a"] * 3, ["b"] * 3))
        raise RuntimeError("the cleaner failed")
    assert out.read_bytes() == b"previous"
    assert _temporaries(tmp_path) == []


def test_empty_single_outputs_are_valid_files(tmp_path: Path) -> None:
    for spec in (jsonl_file(str(tmp_path / "e.jsonl")), parquet_file(str(tmp_path / "e.parquet"))):
        with OutputWriter(spec) as writer:
            assert writer.commit()[0][1] == 0
    assert (tmp_path / "e.jsonl").read_bytes() == b""
    assert pq.read_table(tmp_path / "e.parquet").num_rows == 0


def test_keyed_output_without_rows_writes_nothing(tmp_path: Path) -> None:
    with OutputWriter(parquet_files(str(tmp_path / "none"))) as writer:
        assert writer.commit() == []
    assert not (tmp_path / "none").exists() or list((tmp_path / "none").iterdir()) == []


def test_out_of_the_wrong_kind(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="must be a folder"):
        OutputWriter(parquet_files(str(tmp_path / "file")))
    with pytest.raises(OutputError, match="is a folder"):
        OutputWriter(jsonl_file(str(tmp_path)))


def test_out_with_the_other_formats_extension_is_refused(tmp_path: Path) -> None:
    # The tokenizer picks the reader by extension: JSON Lines named .parquet would fail there.
    with pytest.raises(
        OutputError,
        match=r"g\.parquet: this cleaner writes JSON Lines, not \.parquet; name it .*g\.jsonl$",
    ):
        OutputWriter(jsonl_file(str(tmp_path / "g.parquet")))
    with pytest.raises(OutputError, match=r"writes Parquet, not \.jsonl; name it .*a\.parquet$"):
        OutputWriter(parquet_file(str(tmp_path / "a.jsonl")))
    assert not any(tmp_path.iterdir())
    # Another name is the user's choice (a file kept out of the tokenizer's way).
    for spec in (jsonl_file(str(tmp_path / "g")), parquet_file(str(tmp_path / "a.bak"))):
        with OutputWriter(spec) as writer:
            writer.commit()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bak", "g"]


# A child process that keeps writing until it is killed.
_WRITE_FOREVER = textwrap.dedent(
    """
    import sys
    import pyarrow as pa
    from data_io.cleaning.writers import OutputWriter, jsonl_file, parquet_files
    kind, target = sys.argv[1], sys.argv[2]
    spec = jsonl_file(target) if kind == "jsonl" else parquet_files(target)
    table = pa.table({"condition": ["cot"] * 1000, "instruction": ["x" * 100] * 1000,
                      "response": ["y"] * 1000, "file": ["part"] * 1000})
    if kind == "jsonl":
        table = table.drop_columns(["file"])
    with OutputWriter(spec, row_group_rows=1000) as writer:
        print("writing", flush=True)
        while True:
            writer.write(table)
    """
)


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_killed_mid_write_leaves_no_partial_output(tmp_path: Path, kind: str) -> None:
    target = tmp_path / ("out.jsonl" if kind == "jsonl" else "out")
    final = target if kind == "jsonl" else target / "part.parquet"
    if kind == "jsonl":
        target.write_text("previous\n")
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITE_FOREVER, kind, str(target)],
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "writing\n"
        deadline = time.monotonic() + 60
        while not any(p.stat().st_size > 1_000_000 for p in _temporaries(tmp_path)):
            assert time.monotonic() < deadline, "the child wrote nothing"
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    if kind == "jsonl":
        assert target.read_text() == "previous\n"
    else:
        assert not final.exists()
    leftovers = _temporaries(tmp_path)
    assert leftovers and all(not p.name.endswith((".jsonl", ".parquet")) for p in leftovers)
    # The next run removes what the killed one left (its process is gone) and succeeds.
    spec = jsonl_file(str(target)) if kind == "jsonl" else parquet_files(str(target))
    table = _table(["cot"], ["again"], ["done"], None if kind == "jsonl" else ["part"])
    with OutputWriter(spec) as writer:
        writer.write(table)
        writer.commit()
    assert _temporaries(tmp_path) == []
    assert final.exists()


def test_temporaries_of_live_processes_are_kept(tmp_path: Path) -> None:
    alive = tmp_path / "x.parquet.tmp-1.part0"  # pid 1 (init) is always alive
    alive.write_bytes(b"another run's file")
    with OutputWriter(parquet_files(str(tmp_path))) as writer:
        writer.write(_table(["cot"], ["q"], ["a"], ["y"]))
        writer.commit()
    assert alive.exists() and (tmp_path / "y.parquet").exists()


def test_an_id_reused_since_the_temporary_or_note_was_written_is_not_its_owner(
    tmp_path: Path,
) -> None:
    # Pid 1 lives, but started (at boot) after these were last written (2000): their run is
    # gone and the id was given again, as in every container, so they are a dead run's.
    long_ago = (946684800, 946684800)
    _write_group(tmp_path, {"a": "old"})
    os.replace(tmp_path / "a.jsonl", tmp_path / "a.jsonl.tmp-1.old")
    for key in ("a", "b"):  # the dead run's new files, one replacing a, one added
        row = {"condition": "direct", "instruction": key, "response": "new"}
        (tmp_path / f"{key}.jsonl").write_text(json.dumps(row) + "\n")
    note = tmp_path / ".data_io-clean-commit-1-0123456789ab"
    note.write_text(json.dumps({"a.jsonl": True, "b.jsonl": False}))
    stale = tmp_path / "c.parquet.tmp-1.part0"
    stale.write_bytes(b"a dead run's part")
    for path in (note, stale, tmp_path / "a.jsonl.tmp-1.old"):
        os.utime(path, long_ago)
    with pytest.raises(RuntimeError), OutputWriter(jsonl_files(str(tmp_path))) as writer:
        writer.write(_table(["direct"], ["x"], ["y"], ["z"]))
        raise RuntimeError("the cleaner failed")
    assert _group_state(tmp_path) == {"a.jsonl": "old"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]


def _another_host() -> str:
    """A host tag that is not this machine's."""
    return "00000000" if host_tag() != "00000000" else "11111111"


def _a_dead_pid() -> int:
    """The id of a process that has ended (a child reaped here)."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    return int(child.stdout)


def test_another_machines_temporaries_are_kept_in_a_shared_folder(tmp_path: Path) -> None:
    # Data/Platypus is shared by cleaners; on a cluster's file system one may run on another
    # node, whose pids say nothing here: its temporary is kept, this machine's dead one goes.
    dead = _a_dead_pid()
    theirs = tmp_path / f"x.parquet.tmp-{dead}@{_another_host()}.part0"
    ours = tmp_path / f"z.parquet.tmp-{dead}@{host_tag()}.part0"
    for path in (theirs, ours):
        path.write_bytes(b"a run's part")
    with OutputWriter(parquet_files(str(tmp_path))) as writer:
        writer.write(_table(["cot"], ["q"], ["a"], ["y"]))
        writer.commit()
    assert theirs.exists() and not ours.exists()
    assert (tmp_path / "y.parquet").exists()


def _a_killed_group_of(folder: Path, owner: str) -> Path:
    """``folder`` as a run of ``owner`` killed among its renames left it: a's new file in, its
    previous one set aside, the note naming a; the note."""
    _write_group(folder, {"a": "old"})
    os.replace(folder / "a.jsonl", folder / f"a.jsonl.tmp-{owner}.old")
    row = {"condition": "direct", "instruction": "a", "response": "new"}
    (folder / "a.jsonl").write_text(json.dumps(row) + "\n")
    note = folder / f".data_io-clean-commit-{owner}-0123456789ab"
    note.write_text(json.dumps({"a.jsonl": True}))
    return note


def test_another_machines_group_note_is_undone_only_once_it_is_older_than_any_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(group_commit, "_WAIT_FOR_A_LIVE_GROUP", 0.2)  # it cannot end here
    note = _a_killed_group_of(tmp_path, f"{_a_dead_pid()}@{_another_host()}")
    # Just written: that machine's run may be among its renames now; left to it.
    _write_group(tmp_path, {"b": "new"})
    assert note.exists() and _group_state(tmp_path) == {"a.jsonl": "new", "b.jsonl": "new"}
    # A group (or one file) over a name the note lists is refused, not committed: the note's
    # later undo would put its previous file back over ours.
    for group in ({"a": "mine", "c": "mine"}, {"a": "mine"}):
        with pytest.raises(
            OutputError, match=r"says another clean run is replacing a\.jsonl"
        ) as no:
            _write_group(tmp_path, group)
        assert str(no.value).startswith(f"{note} says") and "pass --out" not in str(no.value)
        assert _group_state(tmp_path) == {"a.jsonl": "new", "b.jsonl": "new"}
        assert _temporaries(tmp_path) == [tmp_path / f"a.jsonl.tmp-{_owner_of(note)}.old"]
    # An hour old: its run was killed there; undone as this machine's would be.
    an_hour_ago = time.time() - 3600
    os.utime(note, (an_hour_ago, an_hour_ago))
    _write_group(tmp_path, {"b": "newer"})
    assert not note.exists()
    assert _group_state(tmp_path) == {"a.jsonl": "old", "b.jsonl": "newer"}


def test_a_note_that_cannot_be_read_of_a_run_not_ended_stops_a_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Which files it lists is unknown: ours may be among them.
    monkeypatch.setattr(group_commit, "_WAIT_FOR_A_LIVE_GROUP", 0.2)
    _write_group(tmp_path, {"a": "old"})
    note = tmp_path / f".data_io-clean-commit-{_a_dead_pid()}@{_another_host()}-0123456789ab"
    note.write_text('{"a.jsonl": tru')
    with pytest.raises(OutputError, match=r"says another clean run is replacing a\.jsonl"):
        _write_group(tmp_path, {"a": "mine"})
    assert _group_state(tmp_path) == {"a.jsonl": "old"} and _temporaries(tmp_path) == []


def test_a_note_of_this_process_whose_undo_fails_again_is_named_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its run has ended (this process is not committing it): not "still running".
    _write_group(tmp_path, {"b": "old"})
    (tmp_path / "a.jsonl").mkdir()  # the group added a.jsonl: its undo cannot unlink a folder
    note = tmp_path / f".data_io-clean-commit-{owner_token()}-0123456789ab"
    note.write_text(json.dumps({"a.jsonl": False}))
    with pytest.raises(OutputError, match=r"could not be put back now either") as no:
        OutputWriter(jsonl_files(str(tmp_path)))._prepare()
    assert str(no.value).startswith(str(note))


def test_a_note_without_a_host_tag_is_judged_as_this_machines(tmp_path: Path) -> None:
    # Written before names carried the host: its pid is checked here, as it always was.
    note = _a_killed_group_of(tmp_path, str(_a_dead_pid()))
    _write_group(tmp_path, {"b": "new"})
    assert not note.exists()
    assert _group_state(tmp_path) == {"a.jsonl": "old", "b.jsonl": "new"}


# An output that cannot be written: one line saying what, where and how to fix it, before any
# input is read, whoever runs it (root included: a file in the way stops root too).


@pytest.mark.parametrize(
    ("spec", "below"),
    [
        (jsonl_file, "out.jsonl"),
        (jsonl_file, "deeper/out.jsonl"),
        (parquet_file, "out.parquet"),
        (parquet_files, "folder"),
        (jsonl_files, "a/b"),
    ],
)
def test_output_under_a_regular_file(tmp_path: Path, spec, below: str) -> None:
    blocker = tmp_path / "plain-file"
    blocker.write_text("not a folder")
    target = blocker / below
    with pytest.raises(OutputError) as caught:
        OutputWriter(spec(str(target)))
    message = str(caught.value)
    assert message == (
        f"cannot write the output {target} (Not a directory): {blocker} is a file, not a folder: "
        "pass --out with another location, or move it"
    )
    assert blocker.read_text() == "not a folder"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain-file"]


@pytest.mark.parametrize(
    ("code", "fix"),
    [
        (errno.EACCES, "no permission to write there"),
        (errno.EPERM, "writing there is not permitted"),
        (errno.EROFS, "the file system is read-only"),
        (errno.ENOSPC, "the disk is full"),
        (errno.EDQUOT, "the disk quota is used up"),
        (errno.ENOENT, "files cannot be created there"),
        (errno.EIO, "pass --out with a location where files can be created"),
    ],
)
def test_unwritable_output_folder_is_reported_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, fix: str
) -> None:
    """The probe file meets the error a read-only mount or missing permission gives (simulated:
    permission bits do not stop root, and a test cannot mount a read-only file system)."""
    real_open = os.open

    def refusing_open(path, flags, *args):
        if ".probe.tmp-" in os.fspath(path):
            raise OSError(code, os.strerror(code), os.fspath(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", refusing_open)
    for spec, target in ((jsonl_file, tmp_path / "x.jsonl"), (parquet_files, tmp_path / "new")):
        with pytest.raises(OutputError) as caught:
            OutputWriter(spec(str(target)))
        message = str(caught.value)
        assert message.startswith(f"cannot write the output {target} ({os.strerror(code)}): ")
        assert fix in message and "\n" not in message
    assert list(tmp_path.iterdir()) == []


def test_failure_while_writing_is_one_line_and_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk that fills up in the middle: the same one-line error; the temporary file goes."""
    import polars as pl

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pl.DataFrame, "write_ndjson", full)
    target = tmp_path / "x.jsonl"
    with pytest.raises(OutputError) as caught, OutputWriter(jsonl_file(str(target))) as writer:
        writer.write(_table(["direct"], ["i"], ["r"]))
    assert str(caught.value).startswith(f"cannot write the output {target} (No space left")
    assert "the disk is full" in str(caught.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("out", ["plain-file/x.jsonl", "/proc/data_io-test/x.jsonl"])
def test_cleaner_with_an_unwritable_out_ends_with_one_line(tmp_path: Path, out: str) -> None:
    """The whole command: exit code 1, one line on stderr, no traceback, nothing written."""
    from .upstream import write_hub_copy

    (tmp_path / "plain-file").write_text("x")
    write_hub_copy(
        tmp_path / "raw_data" / "hub" / "openai" / "gsm8k",
        {("main", "train"): [{"question": "q", "answer": "a #### 1"}]},
    )
    done = subprocess.run(
        [sys.executable, "-m", "pipe.clean_gsm8k_train", "--out", out],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"clean gsm8k_train: error: cannot write the output {out} (")
    assert "pass --out with" in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain-file", "raw_data"]


# A group of files (one per key) replaces the previous group as a whole: a run that dies among
# the renames must not leave some new files beside some old ones, looking like one output.


def _write_group(folder: Path, rows: dict[str, str]) -> list[tuple[Path, int]]:
    keys = list(rows)
    with OutputWriter(jsonl_files(str(folder))) as writer:
        writer.write(_table(["direct"] * len(keys), keys, [rows[k] for k in keys], keys))
        return writer.commit()


def _group_state(folder: Path) -> dict[str, str]:
    return {p.name: read_jsonl(p)[0]["response"] for p in sorted(folder.glob("*.jsonl"))}


def _failing_on_second_output(real, *, then_always: bool = False):
    """os.replace that fails on the second rename onto an output name (after one new file
    stands), and with ``then_always`` on every one after it too (the undo cannot run)."""
    calls = []

    def replace(src, dst):
        if os.fspath(dst).endswith(".jsonl"):
            calls.append(dst)
            if len(calls) == 2 or (then_always and len(calls) > 2):
                raise OSError(errno.EIO, os.strerror(errno.EIO), os.fspath(dst))
        return real(src, dst)

    return replace


def test_a_group_failing_among_its_renames_leaves_the_previous_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "out"
    _write_group(folder, {"a": "old", "b": "old", "c": "old"})
    monkeypatch.setattr(os, "replace", _failing_on_second_output(os.replace))
    with pytest.raises(OutputError, match=r"cannot write the output .*out \(Input/output error\)"):
        _write_group(folder, {"a": "new", "b": "new", "c": "new", "d": "new"})
    # Every file is the previous run's again: none new (d neither), no leftovers, no note.
    assert _group_state(folder) == {"a.jsonl": "old", "b.jsonl": "old", "c.jsonl": "old"}
    assert sorted(p.name for p in folder.iterdir()) == ["a.jsonl", "b.jsonl", "c.jsonl"]
    monkeypatch.undo()
    _write_group(folder, {"a": "new", "b": "new", "c": "new", "d": "new"})
    assert _group_state(folder) == dict.fromkeys(
        ["a.jsonl", "b.jsonl", "c.jsonl", "d.jsonl"], "new"
    )
    assert sorted(p.name for p in folder.iterdir()) == ["a.jsonl", "b.jsonl", "c.jsonl", "d.jsonl"]


# A child that dies (SIGKILL) among a group's renames: nothing of it can undo them.
_KILLED_AMONG_RENAMES = textwrap.dedent(
    """
    import os, signal, sys
    import pyarrow as pa
    from data_io.cleaning.writers import OutputWriter, jsonl_files
    real, calls = os.replace, []
    def replace(src, dst):
        if os.fspath(dst).endswith(".jsonl"):
            calls.append(dst)
            if len(calls) == 2:
                os.kill(os.getpid(), signal.SIGKILL)
        return real(src, dst)
    os.replace = replace
    keys = ["a", "b", "c", "d"]
    with OutputWriter(jsonl_files(sys.argv[1])) as writer:
        writer.write(pa.table({"condition": ["direct"] * 4, "instruction": keys,
                               "response": ["new"] * 4, "file": keys}))
        writer.commit()
    """
)


def _owner_of(note: Path) -> str:
    """The ``<pid>@<host tag>`` of a group note's name."""
    return note.name.removeprefix(".data_io-clean-commit-").split("-")[0]


def test_a_group_killed_among_its_renames_is_undone_by_the_next_run(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    _write_group(folder, {"a": "old", "b": "old", "c": "old"})
    child = subprocess.run(
        [sys.executable, "-c", _KILLED_AMONG_RENAMES, str(folder)],
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL
    # Killed after a's new file went in and b's previous one was set aside: a mix, which the
    # note marks as unfinished, naming the files the group replaces.
    notes = list(folder.glob(".data_io-clean-commit-*"))
    assert len(notes) == 1 and json.loads(notes[0].read_text()) == {
        "a.jsonl": True,
        "b.jsonl": True,
        "c.jsonl": True,
        "d.jsonl": False,
    }
    assert _group_state(folder) == {"a.jsonl": "new", "c.jsonl": "old"}
    assert (folder / f"b.jsonl.tmp-{_owner_of(notes[0])}.old").is_file()
    # Until then the readers downstream refuse the mix, naming the note and the way out.
    with pytest.raises(InputError, match=r"holds \.data_io-clean-commit-.*Run that cleaner again"):
        tokenize([folder], tmp_path / "tokenized", progress=False)
    assert not (tmp_path / "tokenized").exists()
    # The next run undoes it before anything else, even when it fails itself: the previous group.
    with pytest.raises(RuntimeError), OutputWriter(jsonl_files(str(folder))) as writer:
        writer.write(_table(["direct"], ["x"], ["y"], ["a"]))
        raise RuntimeError("the cleaner failed")
    assert _group_state(folder) == {"a.jsonl": "old", "b.jsonl": "old", "c.jsonl": "old"}
    assert sorted(p.name for p in folder.iterdir()) == ["a.jsonl", "b.jsonl", "c.jsonl"]
    _write_group(folder, {"a": "new", "b": "new"})
    assert _group_state(folder) == {"a.jsonl": "new", "b.jsonl": "new", "c.jsonl": "old"}
    assert not any(".tmp-" in p.name or p.name.startswith(".") for p in folder.iterdir())


def _a_group_whose_undo_failed(folder: Path, monkeypatch: pytest.MonkeyPatch, new: str) -> None:
    """A group of ``new`` over a previous one ("old") whose renames fail, and its undo too
    (``os.replace`` is left failing: the caller undoes the patch when it wants)."""
    _write_group(folder, {"a": "old", "b": "old"})
    monkeypatch.setattr(os, "replace", _failing_on_second_output(os.replace, then_always=True))
    with pytest.raises(OutputError):
        _write_group(folder, {"a": new, "b": new})


def test_a_group_whose_undo_fails_keeps_its_note_for_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "out"
    _a_group_whose_undo_failed(folder, monkeypatch, "new")
    monkeypatch.undo()
    # a's and b's previous files could not be put back: the note stays, for the next run.
    assert _group_state(folder) == {"a.jsonl": "new"}
    assert len(list(folder.glob(".data_io-clean-commit-*"))) == 1
    assert sorted(p.name for p in folder.glob("*.old")) == [
        f"a.jsonl.tmp-{owner_token()}.old",
        f"b.jsonl.tmp-{owner_token()}.old",
    ]


def test_a_note_that_cannot_be_undone_stops_the_next_run_before_its_set_aside_files_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "out"
    _a_group_whose_undo_failed(folder, monkeypatch, "mid")
    # The next run's undo fails too: it stops, and the previous files set aside stay.
    with pytest.raises(OutputError, match=r"could not be put back now either; nothing was written"):
        _write_group(folder, {"a": "new", "b": "new"})
    monkeypatch.undo()
    aside = sorted(p.name for p in folder.glob("*.old"))
    assert aside == [f"a.jsonl.tmp-{owner_token()}.old", f"b.jsonl.tmp-{owner_token()}.old"]
    assert {read_jsonl(p)[0]["response"] for p in folder.glob("*.old")} == {"old"}
    # A note that is not JSON cannot be undone either: named, not passed over.
    for path in folder.glob(".data_io-clean-commit-*"):
        path.write_text("{cut")
    with pytest.raises(OutputError, match=r"\.data_io-clean-commit-.* was left by a clean run"):
        _write_group(folder, {"a": "new"})


def test_a_note_of_this_process_left_by_a_failed_undo_is_undone_by_its_next_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same process id is not a run still committing: the process that failed to undo the
    # group cleans again, or a later run got the dead one's id (PID 1 in every container run).
    folder = tmp_path / "out"
    _a_group_whose_undo_failed(folder, monkeypatch, "mid")
    monkeypatch.undo()
    _write_group(folder, {"a": "new", "b": "new", "c": "new"})
    assert _group_state(folder) == dict.fromkeys(["a.jsonl", "b.jsonl", "c.jsonl"], "new")
    # No note or set-aside file is left for a later run (another process) to "undo" over them.
    assert sorted(p.name for p in folder.iterdir()) == ["a.jsonl", "b.jsonl", "c.jsonl"]
