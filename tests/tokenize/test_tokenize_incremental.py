"""Incremental runs of data_io.tokenize: what is kept, redone and removed; crash safety."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from data_io.errors import InputError, OutputError
from data_io.tokenize import tokenize
from tests.tokenize_oracle import load_task, task_metadata


def run(rows: Path, out: Path, tokenizer: Path, **kwargs):
    result = tokenize([rows], out, tokenizer_path=tokenizer, progress=False, **kwargs)
    return {f.task: f.status for f in result.files}, result


def test_second_run_changes_nothing(rows_dir: Path, small_tokenizer: Path, tmp_path: Path):
    out = tmp_path / "out"
    first, _ = run(rows_dir, out, small_tokenizer)
    assert set(first.values()) == {"tokenized"}
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*.npy")}
    second, _ = run(rows_dir, out, small_tokenizer)
    assert set(second.values()) == {"unchanged"}
    assert before == {p: p.stat().st_mtime_ns for p in out.rglob("*.npy")}


def test_touched_but_identical_file_is_not_retokenized(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    out = tmp_path / "out"
    run(rows_dir, out, small_tokenizer)
    source = rows_dir / "data" / "arithmetic.jsonl"
    later = time.time() + 100
    os.utime(source, (later, later))
    statuses, _ = run(rows_dir, out, small_tokenizer)
    assert statuses["data__arithmetic.jsonl"] == "unchanged"
    # The record learned the new mtime: the next run takes the fast path.
    assert (
        task_metadata(out / "data__arithmetic.jsonl")["source_mtime_ns"]
        == source.stat().st_mtime_ns
    )


def test_changed_content_retokenizes_that_file_only(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    out = tmp_path / "out"
    run(rows_dir, out, small_tokenizer)
    source = rows_dir / "data" / "arithmetic.jsonl"
    with source.open("a") as f:
        f.write(json.dumps({"condition": "cot", "instruction": "new", "response": "row"}) + "\n")
    statuses, result = run(rows_dir, out, small_tokenizer)
    assert statuses.pop("data__arithmetic.jsonl") == "tokenized"
    assert set(statuses.values()) == {"unchanged"}
    assert next(f for f in result.files if f.status == "tokenized").reason == "the source changed"
    assert len(load_task(out / "data__arithmetic.jsonl")["inst_len"]) == 91


def test_same_size_same_mtime_edit_is_caught_when_mtime_moves(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    out = tmp_path / "out"
    run(rows_dir, out, small_tokenizer)
    source = rows_dir / "data" / "translations.jsonl"
    text = source.read_text(encoding="utf-8")
    source.write_text(text.replace("Bonjour", "BONJOUR"), encoding="utf-8")  # same size
    statuses, _ = run(rows_dir, out, small_tokenizer)
    assert statuses["data__translations.jsonl"] == "tokenized"


def test_an_edit_whose_size_and_mtime_were_put_back_is_caught(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    # `touch -d` restores the mtime; the kernel's ctime still moved, so the content is hashed.
    out = tmp_path / "out"
    run(rows_dir, out, small_tokenizer)
    source = rows_dir / "data" / "translations.jsonl"
    before = source.stat()
    text = source.read_text(encoding="utf-8")
    source.write_text(text.replace("Bonjour", "BONJOUR"), encoding="utf-8")  # same size
    os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (source.stat().st_size, source.stat().st_mtime_ns) == (
        before.st_size,
        before.st_mtime_ns,
    )
    statuses, result = run(rows_dir, out, small_tokenizer)
    assert statuses["data__translations.jsonl"] == "tokenized"
    assert {f.task: f.reason for f in result.files}["data__translations.jsonl"] == (
        "the source changed"
    )
    # A file only touched (its ctime moved, its content the same) is hashed once, then fast.
    os.utime(rows_dir / "data" / "arithmetic.jsonl")
    statuses, _ = run(rows_dir, out, small_tokenizer)
    assert set(statuses.values()) == {"unchanged"}


def test_an_empty_task_kept_under_skip_is_checked_again_under_fail(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    # Under `fail` an empty file is an error, but its empty task written under `skip` was
    # "unchanged" and the run exited 0 (a task that skipped bad rows was checked again).
    out = tmp_path / "out"
    (rows_dir / "data" / "arithmetic.jsonl").write_text("")
    statuses, _ = run(rows_dir, out, small_tokenizer, on_error="skip")
    assert statuses["data__arithmetic.jsonl"] == "tokenized"
    with pytest.raises(InputError, match="the file holds no rows") as info:
        run(rows_dir, out, small_tokenizer)
    assert [f.task for f in info.value.result.failed] == ["data__arithmetic.jsonl"]
    assert task_metadata(out / "data__arithmetic.jsonl")["rows"] == 0  # kept as it was
    statuses, _ = run(rows_dir, out, small_tokenizer, on_error="skip")
    assert set(statuses.values()) == {"unchanged"}


def test_new_tokenizer_or_options_retokenize_everything(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    out = tmp_path / "out"
    run(rows_dir, out, small_tokenizer)
    other = tmp_path / "other" / "tokenizer.json"
    other.parent.mkdir()
    data = json.loads(small_tokenizer.read_text())
    data["truncation"] = None  # same behaviour, different bytes: the hash decides
    other.write_text(json.dumps(data))
    statuses, result = run(rows_dir, out, other)
    assert set(statuses.values()) == {"tokenized"}
    assert {f.reason for f in result.files} == {"the tokenizer changed"}
    statuses, result = run(
        rows_dir,
        out,
        other,
        conditions={
            "direct": "<think>",
            "cot": "</think>",
            "noisy": "<|quad_start|>",
            "synth": "<|quad_end|>",
        },
    )
    changed = "the layout options changed (--boq, --eoq, --eoa or --conditions)"
    assert {f.reason for f in result.files} == {changed}
    statuses, result = run(rows_dir, out, other, token_dtype="auto")
    assert set(statuses.values()) == {"tokenized"}
    assert {f.reason for f in result.files} == {"the token dtype changed (--token-dtype)"}


def test_orphans_are_removed_only_if_data_io_wrote_them(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    out = tmp_path / "out"
    run(rows_dir, out, small_tokenizer)
    (rows_dir / "data" / "arithmetic.jsonl").unlink()
    (out / "notes").mkdir()
    (out / "notes" / "keep.txt").write_text("mine")
    original = out / "old_task.jsonl"
    original.mkdir()
    (original / "metadata.json").write_text('{"source_mtime": 1, "source_size": 2}')
    (out / "README.txt").write_text("a file, not a folder")
    # The original-pipeline folder cannot be checked against the tokenizer: the run does
    # all its work, then fails because the output is MIXED.
    with pytest.raises(OutputError, match="is MIXED") as info:
        run(rows_dir, out, small_tokenizer)
    result = info.value.result
    assert result.mixed == [
        "old_task.jsonl (tokenized with the original pipeline, no record of its tokenizer or "
        "source; delete it, or tokenize the file it came from into this output)"
    ]
    assert result.removed_orphans == ["data__arithmetic.jsonl"]
    assert not (out / "data__arithmetic.jsonl").exists()
    assert (out / "notes" / "keep.txt").read_text() == "mine"
    assert original.exists() and (out / "README.txt").exists()
    assert any(item.startswith("notes (") for item in result.left_alone)
    # An original-pipeline task names no source: it cannot be proven orphaned, so it stays.
    assert [item.split(" (")[0] for item in result.kept] == ["old_task.jsonl"]


def test_a_foreign_folder_with_a_task_name_is_never_replaced(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    out = tmp_path / "out"
    (out / "data__arithmetic.jsonl").mkdir(parents=True)
    (out / "data__arithmetic.jsonl" / "precious.txt").write_text("x")
    with pytest.raises(OutputError, match="only replaces folders it wrote") as info:
        run(rows_dir, out, small_tokenizer)
    assert (out / "data__arithmetic.jsonl" / "precious.txt").exists()
    # The other files were still done.
    statuses = {f.task: f.status for f in info.value.result.files}
    assert statuses.pop("data__arithmetic.jsonl") == "failed"
    assert set(statuses.values()) == {"tokenized"}
    # The reason column says at what point it failed (the error says what).
    reasons = {f.task: f.reason for f in info.value.result.files}
    assert reasons["data__arithmetic.jsonl"] == "refused before encoding"


def test_a_folder_of_the_original_pipeline_is_replaced(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    out = tmp_path / "out"
    folder = out / "data__arithmetic.jsonl"
    folder.mkdir(parents=True)
    (folder / "metadata.json").write_text('{"source_mtime": 1, "source_size": 2}')
    statuses, _ = run(rows_dir, out, small_tokenizer)
    assert statuses["data__arithmetic.jsonl"] == "tokenized"
    assert task_metadata(folder)["tool"] == "data_io"


def test_stale_temporaries_of_a_crashed_run_are_cleaned(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    out = tmp_path / "out"
    stale = out / ".data_io-tmp-data__arithmetic.jsonl-99999"
    stale.mkdir(parents=True)
    (stale / "tokens.npy").write_bytes(b"partial")
    run(rows_dir, out, small_tokenizer)
    assert not stale.exists()


def _big_input(folder: Path, files: int = 4, rows: int = 6000) -> None:
    rng = random.Random(0)
    words = ["alpha", "beta", "gamma", "delta", "日本語", "Ünïcode", "x = y + 1", "<|im_end|>"]
    folder.mkdir(parents=True)
    for k in range(files):
        with (folder / f"part{k}.jsonl").open("w", encoding="utf-8") as f:
            for _ in range(rows):
                text = " ".join(rng.choice(words) for _ in range(rng.randint(5, 60)))
                f.write(
                    json.dumps(
                        {"condition": "cot", "instruction": text, "response": text[::-1]},
                        ensure_ascii=False,
                    )
                    + "\n"
                )


def _snapshot(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.npy"))}


def test_killing_at_any_moment_then_rerunning_gives_the_uninterrupted_output(
    small_tokenizer: Path, tmp_path: Path
):
    rows = tmp_path / "rows"
    _big_input(rows)
    reference = tmp_path / "reference"
    run(rows, reference, small_tokenizer)
    expected = _snapshot(reference)
    code = (
        "import sys; from data_io.tokenize import tokenize; "
        "tokenize([sys.argv[1]], sys.argv[2], tokenizer_path=sys.argv[3], threads=1, batch_rows=256, progress=False)"
    )
    rng = random.Random(1)
    out = tmp_path / "out"
    for attempt in range(4):
        proc = subprocess.Popen(
            [sys.executable, "-c", code, str(rows), str(out), str(small_tokenizer)],
            cwd=Path(__file__).resolve().parents[2],
        )
        time.sleep(rng.uniform(0.3, 1.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        # Whatever is visible is either complete (identical to the reference) or absent.
        for task in out.iterdir() if out.exists() else []:
            if task.is_dir() and not task.name.startswith("."):
                for f in task.glob("*.npy"):
                    assert f.read_bytes() == expected[str(f.relative_to(out))], (
                        f"attempt {attempt}: {f}"
                    )
        if attempt == 1:  # also change a source between kills
            shutil.copy(rows / "part0.jsonl", rows / "part0.jsonl.bak")
    (rows / "part0.jsonl.bak").unlink(missing_ok=True)
    run(rows, out, small_tokenizer)
    assert _snapshot(out) == expected
    assert not [p for p in out.iterdir() if p.name.startswith(".data_io-tmp")]


def test_outputs_are_loadable_by_numpy_memmap(
    small_tokenizer: Path, rows_dir: Path, tmp_path: Path
):
    run(rows_dir, tmp_path / "out", small_tokenizer)
    tokens = np.load(tmp_path / "out" / "data__arithmetic.jsonl" / "tokens.npy", mmap_mode="r")
    assert tokens.shape[0] == task_metadata(tmp_path / "out" / "data__arithmetic.jsonl")["tokens"]


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("dataset_metadata.json", r"holds `data_io prepare`'s shards \(dataset_metadata\.json\)"),
        ("metadata.json", r"is a sampled folder"),
    ],
)
def test_another_stages_output_folder_is_refused_and_left_as_it_was(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path, marker: str, message: str
):
    """Notes beside the tasks are left alone; another stage's whole output is not a place for
    tasks (its loader would then find two datasets in one folder)."""
    out = tmp_path / "out"
    out.mkdir()
    (out / marker).write_text("{}")
    (out / "epoch_0").mkdir()
    with pytest.raises(OutputError, match=message):
        run(rows_dir, out, small_tokenizer)
    assert sorted(p.name for p in out.iterdir()) == sorted([marker, "epoch_0"])
