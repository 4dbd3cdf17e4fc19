"""The scale-out end to end on the local executor: the output is byte-identical to one run,
units are idempotent and survive being killed, failures are recorded with file and line, and
``resume`` / ``status`` / ``finalize`` behave as documented."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from data_io.errors import ConfigError, InputError
from data_io.scale import ExecutorSettings, Manifest, resume, scale_tokenize
from data_io.scale.finalize import finalize
from data_io.scale.plan import plan_tokenize
from data_io.scale.status import describe, status
from data_io.scale.units import run_unit
from data_io.tokenize import tokenize, tokenize_options
from tests.formats.parted import gzip_in_blocks, parted

from .inputs import ROOT, TOKENIZER, rows, tree_bytes, write_inputs, write_jsonl

UNIT_MB = 0.1


def _local(inputs: Path, out: Path, **options) -> dict[str, bytes]:
    tokenize([inputs], out, tokenizer_path=TOKENIZER, progress=False, check=False, **options)
    return tree_bytes(out)


def _scaled(inputs: Path, out: Path, workers: int = 2, unit_mb: float = UNIT_MB, **options):
    settings = ExecutorSettings(kind="local", workers=workers, threads_per_unit=1)
    opts = tokenize_options([inputs], out, tokenizer_path=TOKENIZER, progress=False, **options)
    return scale_tokenize(opts, settings, unit_mb=unit_mb, progress=False)


def _with_bad_rows(folder: Path) -> Path:
    """Inputs whose big JSONL file has bad rows spread over its ranges."""
    write_inputs(folder)
    items: list = rows(3000, seed=1)
    for at in (5, 700, 1500, 2999):
        items[at] = "not json" if at % 2 else {"condition": "nope", "instruction": "x",
                                                 "response": "y"}  # fmt: skip
    with open(folder / "big.jsonl", "w", encoding="utf-8") as f:
        for i, row in enumerate(items):
            f.write((row if isinstance(row, str) else json.dumps(row, ensure_ascii=False)) + "\n")
            if i % 97 == 96:
                f.write("\n")
    return folder


def test_output_is_byte_identical_to_one_run(tmp_path: Path) -> None:
    inputs = write_inputs(tmp_path / "in")
    outcome = _scaled(inputs, tmp_path / "scaled")
    assert outcome.unfinished == [] and outcome.result is not None
    assert len({u.task for u in outcome.manifest.units}) == 4
    assert len(outcome.manifest.units) > 8, "the big files were cut"
    assert tree_bytes(tmp_path / "scaled") == _local(inputs, tmp_path / "local")
    assert not (tmp_path / "scaled" / ".data_io_scale" / "parts").exists(), "parts cleared"
    # The summary says which files came from parts, and from how many.
    reasons = {f.task: f.reason for f in outcome.result.files}
    counts = {u.task: u.count for u in outcome.manifest.units}
    assert reasons == {
        task: f"new; assembled from {n} scale-out part{'' if n == 1 else 's'}"
        for task, n in counts.items()
    }
    report = status(outcome.manifest)
    assert report.complete and report.finalized and report.throughput


def test_bad_rows_skipped_are_numbered_as_in_one_run(tmp_path: Path) -> None:
    inputs = _with_bad_rows(tmp_path / "in")
    outcome = _scaled(inputs, tmp_path / "scaled", on_error="skip")
    assert outcome.unfinished == []
    local = _local(inputs, tmp_path / "local", on_error="skip")
    assert tree_bytes(tmp_path / "scaled") == local
    # Rows 5, 700, 1500 and 2999, after a blank line every 97 rows: the file's line numbers,
    # though three of them lie in ranges that start deep inside the file.
    record = json.loads(local["big.jsonl/metadata.json"])
    lines = [example.split(":line ")[1].split(":")[0] for example in record["bad_row_examples"]]
    assert lines == ["6", "708", "1516", "3030"] and record["bad_rows"] == 4
    assert {u.index for u in outcome.manifest.units if u.task == "big.jsonl"} != {0}


def test_a_bad_row_fails_its_unit_with_the_file_and_line(tmp_path: Path) -> None:
    inputs = _with_bad_rows(tmp_path / "in")
    outcome = _scaled(inputs, tmp_path / "scaled")  # on_error="fail"
    failed = {u.id for u in outcome.unfinished}
    assert failed and outcome.result is None
    manifest = outcome.manifest
    errors = [manifest.read_record(unit_id, "failed")["error"] for unit_id in sorted(failed)]
    # The line is the file's, not the range's: one run reports the same place.
    with pytest.raises(InputError) as one_run:
        tokenize([inputs / "big.jsonl"], tmp_path / "local", tokenizer_path=TOKENIZER,
                 progress=False)  # fmt: skip
    first_error = str(one_run.value).split("- ", 1)[1].splitlines()[0]
    assert first_error in errors
    text = describe(manifest, status(manifest))
    assert "failed" in text and "big.jsonl:line" in text and "data_io resume" in text
    # Nothing runs or waits: no time left is promised, and the fix comes before the resume.
    assert " left" not in text.split("throughput:")[-1].splitlines()[0]
    assert "fix what the failed units name, then run what is left" in text
    # Fixing a file changes it: the hint says what then happens, without contradicting itself
    # ("fix ..., then resume (a changed file: plan again instead)"); the unit's own words
    # ("changed since the plan was made ... run the command that made the plan again") match.
    hint = text.splitlines()[-1]
    assert hint == (
        f"fix what the failed units name, then run what is left with `data_io resume "
        f"{manifest.path}`; a unit of part of a file (bytes, row groups, compressed parts) "
        "whose file changed since the plan says so, and then the plan must be made again: "
        "run the command that made it (it keeps the units already done)"
    )
    assert "instead" not in hint
    assert "(big.jsonl, bytes " in text and "{'kind'" not in text  # the span in words
    with pytest.raises(ConfigError, match="not done"):
        finalize(manifest)


def test_resume_runs_only_what_is_missing(tmp_path: Path) -> None:
    inputs = write_inputs(tmp_path / "in")
    options = tokenize_options([inputs], tmp_path / "scaled", tokenizer_path=TOKENIZER,
                               progress=False)  # fmt: skip
    manifest = plan_tokenize(options, int(UNIT_MB * (1 << 20)))
    manifest.executor = ExecutorSettings(workers=1, threads_per_unit=1).recorded()
    manifest.save()
    first = manifest.units[:3]
    for unit in first:
        run_unit(manifest, unit.id, threads=1)
    done_before = {u.id: manifest.read_record(u.id, "done") for u in first}
    assert status(manifest).counts["done"] == 3
    outcome = resume(Manifest.load(manifest.path), progress=False)
    assert outcome.unfinished == [] and outcome.result is not None
    for unit in first:  # not run again: the attempt of its record is still the first
        assert (
            manifest.read_record(unit.id, "done")["attempt"] == done_before[unit.id]["attempt"] == 1
        )
    assert tree_bytes(tmp_path / "scaled") == _local(inputs, tmp_path / "local")


def test_a_unit_run_twice_or_raced_leaves_one_part(tmp_path: Path) -> None:
    inputs = write_inputs(tmp_path / "in")
    manifest = plan_tokenize(
        tokenize_options([inputs], tmp_path / "out", tokenizer_path=TOKENIZER), 100_000
    )
    manifest.save()
    unit = manifest.units[0]
    first = run_unit(manifest, unit.id, threads=1)
    again = run_unit(manifest, unit.id, threads=1)
    assert again == first  # the completion record is returned, nothing redone
    # Two processes on one unit whose record was lost: both finish, one part stays.
    manifest.record_path(unit.id, "done").unlink()
    command = [
        sys.executable,
        "-m",
        "data_io",
        "scale",
        "unit",
        str(manifest.path),
        "--unit",
        unit.id,
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    racers = [subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL) for _ in range(2)]
    assert [p.wait(timeout=120) for p in racers] == [0, 0]
    task_parts = manifest.parts_dir / unit.task
    assert sorted(p.name for p in task_parts.iterdir()) == [f"{unit.index:06d}"]


def test_a_unit_killed_midway_leaves_no_trace(tmp_path: Path) -> None:
    big = tmp_path / "in" / "huge.jsonl"
    write_jsonl(big, rows(60_000, seed=9))
    options = tokenize_options([big.parent], tmp_path / "out", tokenizer_path=TOKENIZER,
                               progress=False)  # fmt: skip
    manifest = plan_tokenize(options, 64 << 20)  # one unit: the whole file
    manifest.save()
    unit = manifest.units[0]
    command = [sys.executable, "-m", "data_io", "scale", "unit", str(manifest.path), "--unit",
               unit.id, "--threads", "1"]  # fmt: skip
    child = subprocess.Popen(command, env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 60
    tmp_parts = lambda: [p for p in manifest.parts_dir.rglob(".tmp-*")]  # noqa: E731
    while not (tmp_parts() and any(f.stat().st_size for f in tmp_parts()[0].glob("*.npy"))):
        assert child.poll() is None, "the unit ended before it could be killed"
        assert time.monotonic() < deadline, "the unit never started writing"
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert manifest.state(unit.id) == "failed"
    assert "killed" in describe(manifest, status(manifest))
    assert not (manifest.parts_dir / unit.task / f"{unit.index:06d}").exists()
    outcome = resume(manifest, ExecutorSettings(workers=1, threads_per_unit=1), progress=False)
    assert outcome.unfinished == []
    assert not list(manifest.root.rglob(".tmp-*")), "the killed unit's temporary folder is gone"
    assert tree_bytes(tmp_path / "out") == _local(big.parent, tmp_path / "local")


def _every_unit_run(tmp_path: Path) -> tuple[Path, Manifest]:
    """Inputs under tmp_path/in, planned into tmp_path/out, every unit run (not finalized)."""
    inputs = write_inputs(tmp_path / "in")
    options = tokenize_options([inputs], tmp_path / "out", tokenizer_path=TOKENIZER)
    manifest = plan_tokenize(options, int(UNIT_MB * (1 << 20)))
    manifest.save()
    for unit in manifest.units:
        run_unit(manifest, unit.id, threads=1)
    return inputs, manifest


def test_a_plain_run_uses_the_parts_left_by_unfinished_units(tmp_path: Path) -> None:
    inputs, manifest = _every_unit_run(tmp_path)
    shutil.rmtree(manifest.units_dir)  # the plan's records are gone; the parts are not
    result = tokenize([inputs], tmp_path / "out", tokenizer_path=TOKENIZER, progress=False)
    assert result.failed == []
    assert tree_bytes(tmp_path / "out") == _local(inputs, tmp_path / "local")


def test_a_file_changed_after_the_plan_is_encoded_again(tmp_path: Path) -> None:
    inputs, manifest = _every_unit_run(tmp_path)
    write_jsonl(inputs / "big.jsonl", rows(3000, seed=77))  # new content after the units ran
    finalize(Manifest.load(manifest.path), progress=False)
    assert tree_bytes(tmp_path / "out") == _local(inputs, tmp_path / "local")
    stale = next(u for u in manifest.units if u.task == "big.jsonl" and u.index > 0)
    with pytest.raises((ConfigError, InputError)):
        write_jsonl(inputs / "big.jsonl", rows(10, seed=5))  # now shorter than the range
        manifest.record_path(stale.id, "done").unlink(missing_ok=True)
        run_unit(manifest, stale.id, threads=1)


def test_an_edit_with_size_and_mtime_put_back_after_the_units_is_encoded_again(
    tmp_path: Path,
) -> None:
    """The parts keep the source's ctime, as the task record does: an edit of the same size
    whose mtime was put back (`touch -d`) after the units ran is not assembled from them."""
    inputs, manifest = _every_unit_run(tmp_path)
    for name in ("big.jsonl", *(p.name for p in inputs.glob("*.jsonl") if p.name != "big.jsonl")):
        source = inputs / name
        before = source.stat()
        data = source.read_bytes()
        assert b'"0: ' in data
        source.write_bytes(data.replace(b'"0: ', b'"X: ', 1))  # the same size
        os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))
    finalize(Manifest.load(manifest.path), progress=False)
    assert tree_bytes(tmp_path / "out") == _local(inputs, tmp_path / "local")


def test_a_chmod_after_the_units_keeps_whole_files_parts_by_their_hash(tmp_path: Path) -> None:
    """A `chmod` (or a copy with its times kept, a node's own copy of the inputs) moves only
    the ctime: a whole file's part, which holds the file's BLAKE3, is still assembled when the
    file hashes the same; a range's part holds no hash of the file, and its file is encoded
    again by finalize. The output is one run's either way."""
    inputs, manifest = _every_unit_run(tmp_path)
    counts = {u.task: u.count for u in manifest.units}
    assert 1 in counts.values() and any(n > 1 for n in counts.values())
    for source in inputs.iterdir():
        before = source.stat()
        source.chmod(0o600)
        assert source.stat().st_ctime_ns != before.st_ctime_ns
    result = finalize(Manifest.load(manifest.path), progress=False)
    reasons = {f.task: f.reason for f in result.files}
    for task, count in counts.items():
        assembled = f"assembled from {count} scale-out part"
        assert (assembled in reasons[task]) == (count == 1), (task, reasons[task])
    assert tree_bytes(tmp_path / "out") == _local(inputs, tmp_path / "local")


def test_a_second_command_on_a_plan_in_use_is_refused_and_leaves_it_alone(
    tmp_path: Path,
) -> None:
    """Two runs at once into one output: the second cleared the first one's unit records
    (a plan with other options) and one of them failed with "Directory not empty"."""
    import fcntl

    inputs = write_inputs(tmp_path / "in")
    options = tokenize_options([inputs], tmp_path / "out", tokenizer_path=TOKENIZER)
    manifest = plan_tokenize(options, int(UNIT_MB * (1 << 20)))
    manifest.save()
    run_unit(manifest, manifest.units[0].id, threads=1)
    saved = manifest.path.read_bytes()
    fd = os.open(manifest.root, os.O_RDONLY)  # what a running command holds
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        settings = ExecutorSettings(kind="local", workers=1)
        for attempt in (
            lambda: scale_tokenize({**options, "token_dtype": "auto"}, settings, progress=False),
            lambda: resume(Manifest.load(manifest.path), settings, progress=False),
        ):
            with pytest.raises(ConfigError, match=r"another data_io command is running this plan"):
                attempt()
            assert manifest.path.read_bytes() == saved
            assert manifest.state(manifest.units[0].id) == "done"
            assert not (tmp_path / "out" / "tokenizer_info.json").exists()
    finally:
        os.close(fd)
    outcome = resume(Manifest.load(manifest.path), settings, progress=False)  # free again
    assert outcome.result is not None and not outcome.unfinished


def test_a_range_unit_of_a_file_changed_after_the_plan_says_so_not_a_bad_line(
    tmp_path: Path,
) -> None:
    """Its rows, read at the planned byte offsets of the new content, were cut mid-line: the
    unit failed with "malformed JSON" at a line of the file that is fine."""
    inputs, manifest = _every_unit_run(tmp_path)
    stale = next(u for u in manifest.units if u.task == "big.jsonl" and u.index > 0)
    manifest.record_path(stale.id, "done").unlink()
    write_jsonl(inputs / "big.jsonl", [*rows(2999, seed=77), "x" * 500])  # other line ends
    with pytest.raises(ConfigError, match=r"big\.jsonl: changed since the plan was made \("):
        run_unit(manifest, stale.id, threads=1)
    failed = manifest.read_record(stale.id, "failed")
    assert failed is not None and "run the command that made the plan again" in failed["error"]
    assert "malformed" not in failed["error"]
    # A whole-file unit reads the file as it is (finalize checks the content it encoded).
    whole = next(u for u in manifest.units if u.span["kind"] == "whole")
    manifest.record_path(whole.id, "done").unlink()
    source = Path(whole.source)
    source.write_bytes(source.read_bytes())  # same content, a new time
    assert run_unit(manifest, whole.id, threads=1)["rows"] > 0
    # Gone since the plan: said so.
    (inputs / "big.jsonl").unlink()
    with pytest.raises(InputError, match=r"big\.jsonl: gone since the plan was made"):
        run_unit(manifest, stale.id, threads=1)


def test_status_of_a_finalize_that_left_a_file_out_says_so_and_exits_non_zero(
    tmp_path: Path, capsys
) -> None:
    from data_io.scale.cli import _status

    inputs, manifest = _every_unit_run(tmp_path)
    # A finished unit's file changes after its unit ran, now with a bad row: finalize encodes
    # it again (it changed), that fails, and the file is left out of the output.
    items: list = rows(50, seed=3)
    items[20] = "not json"
    write_jsonl(inputs / "big.jsonl", items)
    result = finalize(Manifest.load(manifest.path), progress=False)
    assert [f.task for f in result.failed] == ["big.jsonl"]
    report = status(Manifest.load(manifest.path))
    assert report.finalized and report.complete  # every unit done, and finalize ran
    assert report.failed_files == ["big.jsonl"] and not report.output_complete
    text = describe(manifest, report)
    assert "finalized: the output is complete" not in text
    assert "finalized without 1 file that failed there: big.jsonl" in text
    assert _status(argparse.Namespace(manifest=str(manifest.path))) == 3


def test_a_plan_in_a_copied_or_moved_folder_is_refused_naming_where_it_belongs(
    tmp_path: Path,
) -> None:
    _, manifest = _every_unit_run(tmp_path)
    shutil.copytree(tmp_path / "out", tmp_path / "copy")
    with pytest.raises(
        ConfigError, match=r"belongs to .*/out, not to .*/copy \(the folder was copied"
    ):
        Manifest.load(tmp_path / "copy")
    (tmp_path / "out").rename(tmp_path / "moved")
    with pytest.raises(ConfigError, match=r"\(the folder was moved after it was planned\)"):
        Manifest.load(tmp_path / "moved" / ".data_io_scale" / "manifest.json")
    (tmp_path / "moved").rename(tmp_path / "out")  # back where it was planned: it loads
    assert Manifest.load(tmp_path / "out").units == manifest.units


def test_a_part_cut_short_after_its_unit_ran_is_encoded_again_not_failed(
    tmp_path: Path,
) -> None:
    inputs, manifest = _every_unit_run(tmp_path)
    part = next((manifest.root / "parts").glob("*/000000/tokens.npy"))
    with open(part, "r+b") as f:  # a full disk or a copy cut off: shorter than its header
        f.truncate(part.stat().st_size - 40)
    result = finalize(Manifest.load(manifest.path), progress=False)
    assert result.failed == []
    task = part.parent.parent.name
    assert "assembled" not in {f.task: f.reason for f in result.files}[task]
    assert tree_bytes(tmp_path / "out") == _local(inputs, tmp_path / "local")


def test_cli_runs_plans_and_reports(tmp_path: Path) -> None:
    inputs = write_inputs(tmp_path / "in")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    base = [sys.executable, "-m", "data_io"]
    done = subprocess.run(
        [*base, "tokenize", str(inputs), "-o", str(tmp_path / "out"), "--tokenizer-path",
         str(TOKENIZER), "--executor", "local", "--workers", "2", "--unit-mb", "0.1"],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "units, all done; output finalized" in done.stdout
    shown = subprocess.run([*base, "status", str(tmp_path / "out")], env=env,
                           capture_output=True, text=True, check=False)  # fmt: skip
    assert shown.returncode == 0 and "finalized: the output is complete" in shown.stdout
    missing = subprocess.run([*base, "status", str(tmp_path / "nothing")], env=env,
                             capture_output=True, text=True, check=False)  # fmt: skip
    assert missing.returncode == 1 and "no plan here" in missing.stderr
    assert tree_bytes(tmp_path / "out") == _local(inputs, tmp_path / "local")


def _parted_jsonl(folder: Path, suffix: str, bad: tuple[int, ...] = ()) -> Path:
    """A large JSONL file compressed in parts (BGZF members, zstd frames) of 700 bytes of text
    (``points``: one gzip member whose deflate blocks end every 700 bytes of text): rows span
    parts and parts hold no line start; blank lines every 97 rows; the rows at ``bad``
    broken; no newline after the last row."""
    items: list = rows(3000, seed=5)
    for at in bad:
        items[at] = "not json"
    lines = []
    for i, row in enumerate(items):
        lines.append(row if isinstance(row, str) else json.dumps(row, ensure_ascii=False))
        if i % 97 == 96:
            lines.append("")
    body = "\n".join(lines).encode()
    folder.mkdir(parents=True, exist_ok=True)
    if suffix == "points":
        path = folder / "parted.jsonl.gz"
        path.write_bytes(gzip_in_blocks(body, 700))
    else:
        path = folder / f"parted.jsonl{suffix}"
        path.write_bytes(parted(body, suffix, 700))
    return folder


# The three ways a compressed JSONL file is cut: runs of BGZF members or zstd frames, and one
# gzip member at its entry points (a unit a fifth of the usual size: the stream is small).
_CUTS = {".gz": ("parts", UNIT_MB), ".zst": ("parts", UNIT_MB), "points": ("text", UNIT_MB / 5)}


@pytest.mark.parametrize("suffix", list(_CUTS))
def test_a_big_compressed_file_is_cut_into_runs_of_parts_or_at_entry_points(
    tmp_path: Path, suffix: str
) -> None:
    kind, unit_mb = _CUTS[suffix]
    inputs = _parted_jsonl(tmp_path / "in", suffix)
    outcome = _scaled(inputs, tmp_path / "scaled", unit_mb=unit_mb)
    units = outcome.manifest.units
    assert outcome.unfinished == [] and len(units) >= 4
    assert {u.span["kind"] for u in units} == {kind}
    if kind == "text":  # every unit but the first enters at a point
        assert sum("point" in u.span for u in units) == len(units) - 1
    assert tree_bytes(tmp_path / "scaled") == _local(inputs, tmp_path / "local")
    # Finalize took the file from its parts, not encoding it again.
    assert [f.reason for f in outcome.result.files] == [
        f"new; assembled from {len(units)} scale-out parts"
    ]


@pytest.mark.parametrize("suffix", list(_CUTS))
def test_bad_rows_in_compressed_ranges_are_numbered_as_in_one_run(
    tmp_path: Path, suffix: str
) -> None:
    kind, unit_mb = _CUTS[suffix]
    name = "parted.jsonl.gz" if suffix == "points" else f"parted.jsonl{suffix}"
    inputs = _parted_jsonl(tmp_path / "in", suffix, bad=(5, 1500, 2999))
    outcome = _scaled(inputs, tmp_path / "scaled", on_error="skip", unit_mb=unit_mb)
    assert outcome.unfinished == []
    assert {u.span["kind"] for u in outcome.manifest.units} == {kind}
    local = _local(inputs, tmp_path / "local", on_error="skip")
    assert tree_bytes(tmp_path / "scaled") == local
    record = json.loads(local[f"{name}/metadata.json"])
    lines = [example.split(":line ")[1].split(":")[0] for example in record["bad_row_examples"]]
    assert lines == ["6", "1516", "3030"]
    # Failing instead: the units that hold rows 5 and 1500 name the file's lines, as one run
    # would.
    failed = _scaled(inputs, tmp_path / "failing", unit_mb=unit_mb)
    errors = [failed.manifest.read_record(u.id, "failed")["error"] for u in failed.unfinished]
    for line in (6, 1516):
        assert any(f"{name}:line {line}:" in error for error in errors), errors


def test_gzip_streams_among_many_files_are_not_decompressed_to_be_cut(tmp_path: Path) -> None:
    """Finding entry points decompresses a file on the planning machine: a gzip stream that
    holds less than an eighth of the run's bytes stays whole (whole files make the units)."""
    inputs = _parted_jsonl(tmp_path / "in", "points")
    stream = (inputs / "parted.jsonl.gz").read_bytes()
    unit_bytes = int(UNIT_MB / 5 * (1 << 20))
    options = tokenize_options([inputs], tmp_path / "out", tokenizer_path=TOKENIZER)
    assert {u.span["kind"] for u in plan_tokenize(options, unit_bytes).units} == {"text"}
    # Two streams, each half the run: both cut (their passes run together).
    (inputs / "copy0.jsonl.gz").write_bytes(stream)
    units = plan_tokenize(options, unit_bytes).units
    assert {u.span["kind"] for u in units} == {"text"} and len({u.task for u in units}) == 2
    for k in range(1, 8):
        (inputs / f"copy{k}.jsonl.gz").write_bytes(stream)
    units = plan_tokenize(options, unit_bytes).units
    assert len(units) == 9 and {u.span["kind"] for u in units} == {"whole"}


def test_a_damaged_or_edited_entry_point_in_the_plan_is_refused(tmp_path: Path) -> None:
    inputs = _parted_jsonl(tmp_path / "in", "points")
    options = tokenize_options([inputs], tmp_path / "out", tokenizer_path=TOKENIZER,
                               progress=False)  # fmt: skip
    manifest = plan_tokenize(options, int(UNIT_MB / 5 * (1 << 20)))
    manifest.save()
    entered = [u for u in manifest.units if "point" in u.span]
    assert len(entered) >= 2
    entered[0].span["point"]["window"] = "not base64!"
    with pytest.raises(ConfigError, match="gzip entry point in the plan is damaged"):
        run_unit(manifest, entered[0].id, threads=1)
    # Its numbers edited: the range no longer starts where the plan cuts from the point.
    entered[1].span["point"]["text"] += 1
    with pytest.raises(ConfigError, match=r"not a range the plan cuts.*plan again"):
        run_unit(manifest, entered[1].id, threads=1)
    # A text of another length than the plan found (the file changed since, same size and
    # time): a stale plan, not a damaged file.
    last = max(manifest.units, key=lambda u: u.index)
    last.span["end"] += 10
    last.span["total"] += 10
    with pytest.raises(ConfigError, match=r"where the plan found .* plan again") as refused:
        run_unit(manifest, last.id, threads=1)
    assert "re-download" not in str(refused.value)


def test_a_plan_on_a_file_system_without_flock_still_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lustre mounted without flock (ENOSYS) or an NFS whose emulated flock refuses an
    exclusive lock on a folder opened read-only (EBADF): the run is not stopped by the lock
    that guards it, as the sample's shared lock is not."""
    import errno
    import fcntl

    inputs = write_inputs(tmp_path / "in")
    options = tokenize_options([inputs], tmp_path / "out", tokenizer_path=TOKENIZER)

    def no_flock(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_flock)
    settings = ExecutorSettings(kind="local", workers=1)
    outcome = scale_tokenize(options, settings, progress=False)
    assert outcome.result is not None and not outcome.unfinished
