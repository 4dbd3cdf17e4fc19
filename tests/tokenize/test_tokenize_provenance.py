"""data_io.tokenize, folder-wide: tokenizer_info.json describes the run, orphan pruning only
removes provably orphaned tasks, a mixed folder is reported with its repair command, and the
output may not overlap an input."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from data_io.errors import ConfigError, InputError, OutputError
from data_io.tokenize import tokenize
from tests.tokenize_oracle import other_tokenizer, task_metadata

GOOD = {"condition": "cot", "instruction": "What is 2+2?", "response": "4"}


def write_rows(path: Path, rows: int = 2, line: bytes | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(GOOD).encode()
    path.write_bytes(b"\n".join([line or text] * rows) + b"\n")
    return path


def run(inputs, out: Path, tokenizer: Path, **kwargs):
    return tokenize(inputs, out, tokenizer_path=tokenizer, progress=False, **kwargs)


def info_of(out: Path) -> dict:
    return json.loads((out / "tokenizer_info.json").read_text())


def test_tokenizer_info_describes_the_run_and_matches_every_record(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Relative paths on the command line become absolute in the info and the records.
    monkeypatch.chdir(tmp_path)
    relative_tokenizer = Path(shutil.copy(small_tokenizer, tmp_path / "tok.json")).name
    run([Path("rows") / "data", Path("rows") / "data_clustered"], Path("out"), relative_tokenizer)
    info = info_of(tmp_path / "out")
    # The original keys, kept for the HRM-Text trainer ...
    assert {"tokenizer_path", "boq", "eoq", "eoa", "condition_mapping", "vocab_size"} <= info.keys()
    # ... and the provenance a consumer checks every task against.
    assert info["tool"] == "data_io" and info["format_version"] == 1
    assert info["inputs"] == [str(rows_dir / "data"), str(rows_dir / "data_clustered")]
    assert info["tokenizer_path"] == str(tmp_path / "tok.json")
    tasks = [p for p in (tmp_path / "out").iterdir() if p.is_dir()]
    assert len(tasks) == 6
    for task in tasks:
        record = task_metadata(task)
        assert record["tokenizer_blake3"] == info["tokenizer_blake3"]
        assert record["options_blake3"] == info["options_blake3"]
        assert Path(record["source_path"]).is_absolute()
        assert Path(record["source_path"]).is_file()


def test_a_subset_of_the_inputs_keeps_the_other_folders_tasks(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    out = tmp_path / "out"
    run([rows_dir / "data", rows_dir / "data_clustered"], out, small_tokenizer)
    before = sorted(p.name for p in out.iterdir())
    result = run([rows_dir / "data"], out, small_tokenizer)
    assert sorted(p.name for p in out.iterdir()) == before
    assert result.removed_orphans == []
    assert [k.split(" (")[0] for k in result.kept] == [
        "chat__special_tokens.parquet",
        "facts__primes_high.parquet",
        "facts__primes_low.parquet",
    ]
    assert all("still exists but is not under this run's inputs" in k for k in result.kept)
    # The info still names the kept tasks' input, so the repair command would cover them.
    assert info_of(out)["inputs"] == [str(rows_dir / "data"), str(rows_dir / "data_clustered")]
    assert result.mixed == [] and result.repair_command is None


def test_an_empty_input_folder_is_an_error_and_deletes_nothing(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    out = tmp_path / "out"
    run([rows_dir], out, small_tokenizer)
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not rows")
    with pytest.raises(ConfigError) as info:
        run([empty], out, small_tokenizer)
    message = str(info.value)
    assert f"no .jsonl, .jsonl.gz, .jsonl.zst or .parquet files under the input {empty}" in (
        message
    )
    assert "notes.txt" in message and "nothing was read, written or deleted" in message
    assert before == {p: p.stat().st_mtime_ns for p in out.rglob("*")}


def test_deleting_a_source_removes_exactly_its_task(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    out = tmp_path / "out"
    run([rows_dir / "data", rows_dir / "data_clustered"], out, small_tokenizer)
    (rows_dir / "data_clustered" / "facts" / "primes_low.parquet").unlink()
    # Run on the other folder only: the deleted source's task goes, the rest of the
    # data_clustered tasks stay.
    result = run([rows_dir / "data"], out, small_tokenizer)
    assert result.removed_orphans == ["facts__primes_low.parquet"]
    assert not (out / "facts__primes_low.parquet").exists()
    assert len(result.kept) == 2
    assert (out / "facts__primes_high.parquet" / "tokens.npy").exists()


def test_original_format_and_relative_source_records_are_kept_with_a_reason(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    out = tmp_path / "out"
    run([rows_dir], out, small_tokenizer)
    original = out / "old_task.jsonl"
    original.mkdir()
    (original / "metadata.json").write_text('{"source_mtime": 1, "source_size": 2}')
    relative = out / "relative.jsonl"
    shutil.copytree(out / "data__arithmetic.jsonl", relative)
    record = task_metadata(relative)
    record["source_path"] = "data/relative.jsonl"
    (relative / "metadata.json").write_text(json.dumps(record))
    # The original folder cannot be checked against the tokenizer: the output is MIXED.
    with pytest.raises(OutputError, match="is MIXED") as info:
        run([rows_dir], out, small_tokenizer)
    result = info.value.result
    assert original.exists() and relative.exists()
    kept = dict(k.split(" (", 1) for k in result.kept)
    assert "written by the original pipeline" in kept["old_task.jsonl"]
    assert "relative source path" in kept["relative.jsonl"]
    assert [m.split(" (")[0] for m in result.mixed] == ["old_task.jsonl"]


def test_a_failed_file_with_an_old_output_makes_the_folder_mixed(
    small_tokenizer: Path, tmp_path: Path
):
    rows, out = tmp_path / "rows", tmp_path / "out"
    write_rows(rows / "fine.jsonl")
    write_rows(rows / "later_bad.jsonl")
    run([rows], out, small_tokenizer)
    write_rows(rows / "later_bad.jsonl", line=b"{broken")
    new = other_tokenizer(small_tokenizer, tmp_path / "new tok")
    with pytest.raises(InputError) as info:
        run([rows], out, new)
    result = info.value.result
    assert result.mixed == ["later_bad.jsonl (tokenized with another tokenizer)"]
    assert shlex.split(result.repair_command) == [
        "data_io",
        "tokenize",
        str(rows),
        "-o",
        str(out),
        "--tokenizer-path",
        str(new),
    ]
    assert "MIXED" in str(info.value) and result.repair_command in str(info.value)
    # The info names the new tokenizer: the kept old task visibly mismatches it.
    assert (
        info_of(out)["tokenizer_blake3"]
        != task_metadata(out / "later_bad.jsonl")["tokenizer_blake3"]
    )
    # Repaired: nothing is mixed any more.
    write_rows(rows / "later_bad.jsonl")
    assert run([rows], out, new).mixed == []


def test_the_repair_command_carries_non_default_options(small_tokenizer: Path, tmp_path: Path):
    rows, out = tmp_path / "rows", tmp_path / "out"
    write_rows(rows / "a.jsonl")
    write_rows(rows / "b.jsonl")
    run([rows], out, small_tokenizer)
    write_rows(rows / "b.jsonl", line=b"[1]")
    with pytest.raises(InputError) as info:
        run([rows], out, small_tokenizer, token_dtype="auto", eoa="<|im_end|>")
    command = shlex.split(info.value.result.repair_command)
    assert command[-4:] == ["--eoa", "<|im_end|>", "--token-dtype", "auto"]
    assert info.value.result.mixed == ["b.jsonl (tokenized with other layout options)"]


def test_info_is_written_before_the_first_task_is_replaced(small_tokenizer: Path, tmp_path: Path):
    # Every file fails: no task is replaced, but the info already names the new tokenizer,
    # as it would for a run killed midway.
    rows, out = tmp_path / "rows", tmp_path / "out"
    write_rows(rows / "a.jsonl")
    run([rows], out, small_tokenizer)
    write_rows(rows / "a.jsonl", line=b"{")
    new = other_tokenizer(small_tokenizer, tmp_path / "new")
    with pytest.raises(InputError):
        run([rows], out, new)
    assert info_of(out)["tokenizer_path"] == str(new)


def test_a_run_with_nothing_to_do_leaves_the_info_untouched(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    out = tmp_path / "out"
    run([rows_dir], out, small_tokenizer)
    before = (out / "tokenizer_info.json").stat().st_mtime_ns
    run([rows_dir], out, small_tokenizer)
    assert (out / "tokenizer_info.json").stat().st_mtime_ns == before


@pytest.mark.parametrize("where", ["same", "inside", "containing"])
def test_an_output_overlapping_an_input_is_refused_up_front(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path, where: str
):
    out = {
        "same": rows_dir,
        "inside": rows_dir / "data" / "tokenized",
        "containing": tmp_path,
    }[where]
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    with pytest.raises(ConfigError) as info:
        run([rows_dir], out, small_tokenizer)
    relation = {"same": "is the input", "inside": "is inside", "containing": "contains"}[where]
    assert f"the output folder {out} {relation}" in str(info.value)
    assert str(rows_dir) in str(info.value)
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_an_output_reached_through_a_link_is_still_refused(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    link = tmp_path / "link"
    link.symlink_to(rows_dir)
    with pytest.raises(ConfigError, match="is inside the input"):
        run([rows_dir], link / "out", small_tokenizer)
