"""data_io.tokenize, "nothing lost, nothing mixed": an emptied or renamed input root never
deletes live tasks, one source never becomes two tasks, the repair command really repairs,
damaged task folders are redone, and a MIXED output is a failure said once."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest

from data_io.cli import main
from data_io.errors import ConfigError, OutputError
from data_io.tokenize import tokenize
from tests.tokenize_oracle import load_task, other_tokenizer, task_metadata

DAMAGED = "its arrays do not match its record"


def run(inputs, out: Path, tokenizer: Path, **kwargs):
    return tokenize(inputs, out, tokenizer_path=tokenizer, progress=False, **kwargs)


def snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under `folder` with its mtime and bytes: proof that nothing was touched."""
    return {
        str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def statuses(result) -> dict[str, str]:
    return {f.task: f.status for f in result.files}


# 1. Every input root must hold a row file.


@pytest.mark.parametrize("leftover", [None, "notes.txt", "sub/.hidden.jsonl"])
def test_an_emptied_input_among_several_is_an_error_and_deletes_nothing(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path, leftover: str | None
):
    data, clustered, out = rows_dir / "data", rows_dir / "data_clustered", tmp_path / "out"
    run([data, clustered], out, small_tokenizer)
    before = snapshot(out)
    clustered.rename(tmp_path / "x")
    clustered.mkdir()
    if leftover:
        (clustered / leftover).parent.mkdir(parents=True, exist_ok=True)
        (clustered / leftover).write_text("not rows")
    for inputs in ([data, clustered], [clustered, data]):
        with pytest.raises(ConfigError) as info:
            run(inputs, out, small_tokenizer)
        message = str(info.value)
        assert f"files under the input {clustered} (" in message
        assert "nothing was read, written or deleted" in message
        assert str(data) + " " not in message
    if leftover == "notes.txt":
        assert "it holds 1 other file, " in message and "notes.txt" in message
    assert snapshot(out) == before


# 2. A renamed root rewrites the records of its unchanged tasks.


def test_a_renamed_root_updates_the_records_so_a_later_subset_run_keeps_its_tasks(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    data, clustered, out = rows_dir / "data", rows_dir / "data_clustered", tmp_path / "out"
    run([data, clustered], out, small_tokenizer)
    arrays_before = {k: v for k, v in snapshot(out).items() if k.endswith(".npy")}
    data2 = data.rename(rows_dir / "data2")
    result = run([data2, clustered], out, small_tokenizer)
    assert set(statuses(result).values()) == {"unchanged"}
    for task in ("arithmetic.jsonl", "translations.jsonl", "Platypus__code.jsonl"):
        record = task_metadata(out / task)
        assert record["source_path"] == str(data2 / task.replace("__", "/"))
        assert record["source_root"] == str(data2)
    assert task_metadata(out / "facts__primes_low.parquet")["source_root"] == str(clustered)
    # Only the records changed: the arrays were not rewritten.
    assert {k: v for k, v in snapshot(out).items() if k.endswith(".npy")} == arrays_before
    # A run over the other root alone keeps the renamed root's tasks.
    subset = run([clustered], out, small_tokenizer)
    assert subset.removed_orphans == []
    assert sorted(k.split(" (")[0] for k in subset.kept) == [
        "Platypus__code.jsonl",
        "arithmetic.jsonl",
        "translations.jsonl",
    ]
    assert json.loads((out / "tokenizer_info.json").read_text())["inputs"] == [
        str(clustered),
        str(data2),
    ]


def test_a_renamed_root_with_an_edited_file_redoes_only_that_file(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    data, out = rows_dir / "data", tmp_path / "out"
    run([data], out, small_tokenizer)
    data2 = data.rename(rows_dir / "data2")
    with (data2 / "arithmetic.jsonl").open("a") as f:
        f.write(json.dumps({"condition": "cot", "instruction": "1+1?", "response": "2"}) + "\n")
    result = run([data2], out, small_tokenizer)
    assert statuses(result) == {
        "Platypus__code.jsonl": "unchanged",
        "arithmetic.jsonl": "tokenized",
        "translations.jsonl": "unchanged",
    }
    assert all(task_metadata(out / t)["source_root"] == str(data2) for t in statuses(result))


# 3. One source, one task.


@pytest.mark.parametrize(
    "inner", ["data/Platypus", "data/Platypus/code.jsonl", "data/../data", "data/"]
)
@pytest.mark.parametrize("inner_first", [False, True])
def test_overlapping_input_roots_are_refused_up_front_naming_both(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path, inner: str, inner_first: bool
):
    data, other = rows_dir / "data", rows_dir / inner
    out = tmp_path / "out"
    inputs = [other, data] if inner_first else [data, other]
    with pytest.raises(ConfigError) as info:
        run(inputs, out, small_tokenizer)
    message = str(info.value)
    assert str(data) in message and str(other) in message
    if inner.startswith("data/P"):
        assert f"the input {other} ({other}) is inside the input {data} ({data})" in message
    else:
        assert "are the same folder; give it once" in message
    assert not out.exists()


def test_sibling_roots_with_a_common_name_prefix_are_not_overlapping(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    # data_clustered starts with the characters of "data" but is not inside it.
    result = run(
        [rows_dir / "data", rows_dir / "data_clustered"], tmp_path / "out", small_tokenizer
    )
    assert len(result.files) == 6


@pytest.mark.parametrize("given", ["data/Platypus/code.jsonl", "data/Platypus"])
def test_a_source_already_held_under_another_task_name_is_refused_before_writing(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path, given: str
):
    out = tmp_path / "out"
    run([rows_dir / "data"], out, small_tokenizer)
    before = snapshot(out)
    with pytest.raises(ConfigError) as info:
        run([rows_dir / given], out, small_tokenizer)
    message = str(info.value)
    source = rows_dir / "data" / "Platypus" / "code.jsonl"
    assert f'{source} would become the task "code.jsonl"' in message
    assert f'{out / "Platypus__code.jsonl"} already holds it as "Platypus__code.jsonl"' in message
    assert f"Give the original input root {rows_dir / 'data'} instead of" in message
    assert f"or delete {out / 'Platypus__code.jsonl'}" in message
    assert snapshot(out) == before
    # Doing what the message says works: the old folder goes, the file becomes its own task.
    shutil.rmtree(out / "Platypus__code.jsonl")
    result = run([rows_dir / given], out, small_tokenizer)
    assert statuses(result) == {"code.jsonl": "tokenized"}
    assert sorted(k.split(" (")[0] for k in result.kept) == [
        "arithmetic.jsonl",
        "translations.jsonl",
    ]


def test_a_task_name_reused_for_another_source_is_not_a_duplicate(
    small_tokenizer: Path, tmp_path: Path
):
    # a.jsonl and b.jsonl swap contents by renaming: each task name now has the other
    # source, but no source is held by two folders.
    rows, out = tmp_path / "rows", tmp_path / "out"
    rows.mkdir()
    row = {"condition": "cot", "instruction": "q", "response": "r"}
    (rows / "a.jsonl").write_text(json.dumps(row) + "\n")
    (rows / "b.jsonl").write_text((json.dumps(row) + "\n") * 2)
    run([rows], out, small_tokenizer)
    (rows / "a.jsonl").rename(rows / "tmp.jsonl")
    (rows / "b.jsonl").rename(rows / "a.jsonl")
    (rows / "tmp.jsonl").rename(rows / "b.jsonl")
    result = run([rows], out, small_tokenizer)
    assert statuses(result) == {"a.jsonl": "tokenized", "b.jsonl": "tokenized"}
    assert [f.rows for f in result.files] == [2, 1]


def test_a_task_folder_of_another_existing_source_is_not_replaced(
    small_tokenizer: Path, tmp_path: Path
):
    # r1/x.jsonl and r2/x.jsonl, tokenized by runs over one root each: the second run replaced
    # r1's task with r2's rows ("the source changed") and r1's rows left the output unsaid.
    r1, r2, out = tmp_path / "r1", tmp_path / "r2", tmp_path / "out"
    row = {"condition": "cot", "instruction": "q", "response": "r"}
    for root, rows in ((r1, 1), (r2, 2)):
        root.mkdir()
        (root / "x.jsonl").write_text((json.dumps(row) + "\n") * rows)
    run([r1], out, small_tokenizer)
    before = snapshot(out / "x.jsonl")
    with pytest.raises(OutputError) as info:
        run([r2], out, small_tokenizer)
    message = str(info.value)
    assert f'{r2 / "x.jsonl"} would become the task "x.jsonl"' in message, message
    assert f"holds another file under that name, {r1 / 'x.jsonl'}, which still exists" in message
    assert f"delete {out / 'x.jsonl'} if the new file is meant to replace" in message
    assert snapshot(out / "x.jsonl") == before
    # A source that is gone was moved: its folder is the new path's (a renamed root).
    (r1 / "x.jsonl").unlink()
    assert statuses(run([r2], out, small_tokenizer)) == {"x.jsonl": "tokenized"}
    assert task_metadata(out / "x.jsonl")["rows"] == 2
    # A copy of the same content under another root loses nothing: kept, and repointed.
    r3 = tmp_path / "r3"
    shutil.copytree(r2, r3)
    result = run([r3], out, small_tokenizer)
    assert statuses(result) == {"x.jsonl": "unchanged"}
    assert task_metadata(out / "x.jsonl")["source_path"] == str(r3 / "x.jsonl")
    # ... and when the task is redone for another reason (here a new --boq), it is redone, not
    # refused: no file's rows leave the output.
    r4 = tmp_path / "r4"
    shutil.copytree(r3, r4)
    result = run([r4], out, small_tokenizer, boq="<|im_end|>")
    assert statuses(result) == {"x.jsonl": "tokenized"}
    assert task_metadata(out / "x.jsonl")["source_path"] == str(r4 / "x.jsonl")


# 4. The repair command repairs, also for outputs of older versions.


def strip_provenance_of_older_versions(out: Path) -> None:
    """What an older data_io left: no `inputs` in the info, no `source_root` in records."""
    info = json.loads((out / "tokenizer_info.json").read_text())
    del info["inputs"]
    (out / "tokenizer_info.json").write_text(json.dumps(info))
    for metadata in out.glob("*/metadata.json"):
        record = json.loads(metadata.read_text())
        del record["source_root"]
        metadata.write_text(json.dumps(record))


@pytest.mark.parametrize("older", [False, True])
def test_the_repair_command_repairs_a_mixed_output(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path, older: bool
):
    data, clustered, out = rows_dir / "data", rows_dir / "data_clustered", tmp_path / "out"
    run([data, clustered], out, small_tokenizer)
    if older:
        strip_provenance_of_older_versions(out)
    new = other_tokenizer(small_tokenizer, tmp_path / "new tok")
    with pytest.raises(OutputError, match="is MIXED: 3 task folder") as info:
        run([data], out, new)
    result = info.value.result
    assert set(statuses(result).values()) == {"tokenized"}
    assert shlex.split(result.repair_command) == [
        "data_io",
        "tokenize",
        str(data),
        str(clustered),
        "-o",
        str(out),
        "--tokenizer-path",
        str(new),
    ]
    # Run it, with exactly its arguments: the output is no longer mixed.
    assert main(shlex.split(result.repair_command)[1:]) == 0
    repaired = run([data, clustered], out, new)
    assert repaired.mixed == [] and set(statuses(repaired).values()) == {"unchanged"}
    assert all(task_metadata(t)["source_root"] for t in out.iterdir() if t.is_dir())


def test_the_repair_command_names_a_file_root_as_given(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    code, out = rows_dir / "data" / "Platypus" / "code.jsonl", tmp_path / "out"
    run([code, rows_dir / "data_clustered"], out, small_tokenizer)
    new = other_tokenizer(small_tokenizer, tmp_path / "new")
    with pytest.raises(OutputError) as info:
        run([rows_dir / "data_clustered"], out, new)
    command = info.value.result.repair_command
    assert shlex.split(command)[2:4] == [str(rows_dir / "data_clustered"), str(code)]
    assert main(shlex.split(command)[1:]) == 0
    assert run([code, rows_dir / "data_clustered"], out, new).mixed == []


def test_the_repair_command_of_a_skipping_run_skips_too(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    # It left out --on-error skip: the kept task of a file with a bad row failed under the
    # default `fail` when the command ran, and the output stayed MIXED.
    data, clustered, out = rows_dir / "data", rows_dir / "data_clustered", tmp_path / "out"
    with (data / "arithmetic.jsonl").open("a") as f:
        f.write('{"condition": "cot", "instruction": 1, "response": "x"}\n')
    run([data, clustered], out, small_tokenizer, on_error="skip")
    new = other_tokenizer(small_tokenizer, tmp_path / "new")
    with pytest.raises(OutputError, match="is MIXED") as info:
        run([clustered], out, new, on_error="skip")
    command = shlex.split(info.value.result.repair_command)
    assert command[-2:] == ["--on-error", "skip"], command
    assert main(command[1:]) == 0
    assert run([data, clustered], out, new, on_error="skip").mixed == []


# 5. A damaged task folder is redone.


def _shorter_tokens(task: Path) -> None:
    tokens = np.load(task / "tokens.npy")
    np.save(task / "tokens.npy", tokens[:-1])


def _longer_index(task: Path) -> None:
    np.save(task / "inst_len.npy", np.append(np.load(task / "inst_len.npy"), np.uint64(1)))


def _other_token_dtype(task: Path) -> None:
    np.save(task / "tokens.npy", np.load(task / "tokens.npy").astype(np.uint16))


def _truncated_file(task: Path) -> None:
    data = (task / "resp_start.npy").read_bytes()
    (task / "resp_start.npy").write_bytes(data[:-3])


def _garbage(task: Path) -> None:
    (task / "resp_len.npy").write_bytes(b"not an array")


@pytest.mark.parametrize(
    "damage", [_shorter_tokens, _longer_index, _other_token_dtype, _truncated_file, _garbage]
)
def test_a_task_whose_arrays_do_not_match_its_record_is_redone(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path, damage
):
    out = tmp_path / "out"
    run([rows_dir], out, small_tokenizer)
    task = out / "data__arithmetic.jsonl"
    good = load_task(task)
    damage(task)
    result = run([rows_dir], out, small_tokenizer)
    (report,) = [f for f in result.files if f.status != "unchanged"]
    assert (report.task, report.status, report.reason) == (
        "data__arithmetic.jsonl",
        "tokenized",
        DAMAGED,
    )
    redone = load_task(task)
    assert all(np.array_equal(redone[k], good[k]) for k in good)
    assert {k: v.dtype for k, v in redone.items()} == {k: v.dtype for k, v in good.items()}
    assert set(statuses(run([rows_dir], out, small_tokenizer)).values()) == {"unchanged"}


def test_arrays_are_checked_against_the_auto_dtype_too(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    out = tmp_path / "out"
    run([rows_dir], out, small_tokenizer, token_dtype="auto")
    task = out / "data__arithmetic.jsonl"
    assert np.load(task / "tokens.npy").dtype == np.uint16
    # Widened to the original's uint32: the values are the same, the dtype is not the record's.
    np.save(task / "tokens.npy", np.load(task / "tokens.npy").astype(np.uint32))
    result = run([rows_dir], out, small_tokenizer, token_dtype="auto")
    assert statuses(result)["data__arithmetic.jsonl"] == "tokenized"
    assert np.load(task / "tokens.npy").dtype == np.uint16


# 6. A MIXED output fails, said once; the totals cover the whole output.


def _mixed_cli_run(rows: Path, out: Path, small_tokenizer: Path, tmp_path: Path, quiet: bool):
    new = other_tokenizer(small_tokenizer, tmp_path / "new")
    argv = ["tokenize", str(rows), "-o", str(out), "--tokenizer-path", str(new)]
    return main([*argv, "-q"] if quiet else argv)


@pytest.mark.parametrize("quiet", [False, True])
def test_a_mixed_output_exits_non_zero_and_is_said_once(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path, capsys, quiet: bool
):
    out = tmp_path / "out"
    run([rows_dir / "data", rows_dir / "data_clustered"], out, small_tokenizer)
    code = _mixed_cli_run(rows_dir / "data", out, small_tokenizer, tmp_path, quiet)
    captured = capsys.readouterr()
    assert code == 1
    both = captured.out + captured.err
    assert both.count("is MIXED") == 1 and both.count("Repair it") == 1
    assert "data_io tokenize: error: the output" in captured.err
    # The work was still done before the failure: data's tasks use the new tokenizer.
    new_hash = json.loads((out / "tokenizer_info.json").read_text())["tokenizer_blake3"]
    assert task_metadata(out / "arithmetic.jsonl")["tokenizer_blake3"] == new_hash
    assert task_metadata(out / "facts__primes_low.parquet")["tokenizer_blake3"] != new_hash


def test_a_failed_file_in_a_mixed_output_is_said_once_too(
    small_tokenizer: Path, tmp_path: Path, capsys
):
    rows, out = tmp_path / "rows", tmp_path / "out"
    rows.mkdir()
    row = json.dumps({"condition": "cot", "instruction": "q", "response": "r"})
    (rows / "a.jsonl").write_text(row + "\n")
    (rows / "b.jsonl").write_text(row + "\n")
    run([rows], out, small_tokenizer)
    (rows / "b.jsonl").write_text("{oops\n")
    assert _mixed_cli_run(rows, out, small_tokenizer, tmp_path, quiet=False) == 1
    captured = capsys.readouterr()
    both = captured.out + captured.err
    assert both.count("is MIXED") == 1
    assert both.count(f"{rows / 'b.jsonl'}:line 1: malformed JSON") == 1
    assert "1 of 2 files failed" in captured.err


def test_a_mixed_output_raises_through_the_api_unless_check_is_off(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    out = tmp_path / "out"
    run([rows_dir / "data", rows_dir / "data_clustered"], out, small_tokenizer)
    new = other_tokenizer(small_tokenizer, tmp_path / "new")
    result = run([rows_dir / "data"], out, new, check=False)
    assert len(result.mixed) == 3
    with pytest.raises(OutputError) as info:
        result.raise_for_failures()
    assert info.value.result is result
    assert "files failed" not in str(info.value)


def test_the_output_totals_count_kept_tasks_from_their_records(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path, capsys
):
    out = tmp_path / "out"
    full = run([rows_dir / "data", rows_dir / "data_clustered"], out, small_tokenizer)
    rows, tokens = sum(f.rows for f in full.files), sum(f.tokens for f in full.files)
    assert (full.output_tasks, full.output_rows, full.output_tokens) == (6, rows, tokens)
    argv = ["tokenize", str(rows_dir / "data"), "-o", str(out)]
    assert main([*argv, "--tokenizer-path", str(small_tokenizer)]) == 0
    text = capsys.readouterr().out
    assert f"the output holds 6 tasks, {rows:,} rows, {tokens:,} tokens" in text
    # A folder of the original pipeline counts by its array headers.
    original = out / "old.jsonl"
    shutil.copytree(out / "arithmetic.jsonl", original)
    (original / "metadata.json").write_text('{"source_mtime": 1, "source_size": 2}')
    extra = task_metadata(out / "arithmetic.jsonl")
    with pytest.raises(OutputError):
        run([rows_dir / "data"], out, small_tokenizer)
    result = run([rows_dir / "data"], out, small_tokenizer, check=False)
    assert (result.output_tasks, result.output_rows, result.output_tokens) == (
        7,
        rows + extra["rows"],
        tokens + extra["tokens"],
    )
