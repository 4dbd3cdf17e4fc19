"""Bad input to data_io.tokenize: every error names file and line/row; nothing is lost."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from data_io.errors import InputError
from data_io.tokenize import tokenize
from tests.tokenize_oracle import expected_layout, load_task, task_metadata

GOOD = {"condition": "cot", "instruction": "What is 2+2?", "response": "4"}

# (bad line, expected message fragment) — each placed on line 3 of a JSONL file.
BAD_LINES = [
    (b"{not json}", "line 3: malformed JSON"),
    (b'{"condition": "cot", "instruction": "q"}', 'line 3: missing field "response"'),
    (
        b'{"condition": "cot", "instruction": null, "response": "a"}',
        'line 3: field "instruction" is null',
    ),
    (
        b'{"condition": "cot", "instruction": ["q"], "response": "a"}',
        'line 3: field "instruction" is an array',
    ),
    (
        b'{"condition": 1, "instruction": "q", "response": "a"}',
        'line 3: field "condition" is a number',
    ),
    (b'{"condition": "cot", "instruction": "\xff\xfe", "response": "a"}', "line 3: invalid UTF-8"),
    (
        b'{"condition": "math", "instruction": "q", "response": "a"}',
        'line 3: unknown condition tag "math"',
    ),
    (
        b'{"condition": "cot,", "instruction": "q", "response": "a"}',
        'line 3: unknown condition tag ""',
    ),
    (b'"just a string"', "line 3: expected a JSON object, found a string"),
]


def write_jsonl_with(folder: Path, bad_line: bytes, name: str = "bad.jsonl") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    good = json.dumps(GOOD).encode()
    path = folder / name
    path.write_bytes(b"\n".join([good, good, bad_line, good]) + b"\n")
    return path


def tokenize_skipping(tmp_path: Path, tokenizer: Path, **options):
    """``tokenize`` of ``tmp_path/rows`` into ``tmp_path/out`` with bad rows skipped."""
    return tokenize(
        [tmp_path / "rows"],
        tmp_path / "out",
        tokenizer_path=tokenizer,
        on_error="skip",
        progress=False,
        **options,
    )


@pytest.mark.parametrize(("bad_line", "message"), BAD_LINES)
def test_fail_mode_names_file_and_line(
    small_tokenizer: Path, tmp_path: Path, bad_line: bytes, message: str
):
    path = write_jsonl_with(tmp_path / "rows", bad_line)
    with pytest.raises(InputError) as info:
        tokenize(
            [tmp_path / "rows"], tmp_path / "out", tokenizer_path=small_tokenizer, progress=False
        )
    assert f"{path}:{message}" in str(info.value)
    assert not (tmp_path / "out" / "bad.jsonl").exists()
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".data_io-tmp")]


@pytest.mark.parametrize(("bad_line", "message"), BAD_LINES)
def test_skip_mode_skips_counts_and_records(
    small_tokenizer: Path, tmp_path: Path, bad_line: bytes, message: str
):
    write_jsonl_with(tmp_path / "rows", bad_line)
    result = tokenize_skipping(tmp_path, small_tokenizer)
    (report,) = result.files
    assert report.status == "tokenized" and report.rows == 3 and report.bad_rows == 1
    assert message in report.bad_row_examples[0]
    meta = task_metadata(tmp_path / "out" / "bad.jsonl")
    assert meta["bad_rows"] == 1 and message in meta["bad_row_examples"][0]
    got = load_task(tmp_path / "out" / "bad.jsonl")
    np.testing.assert_array_equal(
        got["tokens"], expected_layout(small_tokenizer, [GOOD] * 3)["tokens"]
    )


@pytest.mark.parametrize("threads", [1, 2])
def test_skipped_rows_at_the_edges_of_runs_leave_no_tokens(
    small_tokenizer: Path, tmp_path: Path, threads: int
):
    """A batch is encoded in runs of rows (64 and more), each into one buffer: bad rows at a
    run's first and last place, and runs of bad rows, leave the other rows' tokens and
    offsets exactly as the oracle derives them."""
    # 1000 rows are 4 runs of 250 at one thread and 8 of 125 at two.
    bad_at = {0, 1, 124, 125, 249, 250, 300, 301, 302, 374, 375, 499, 500, 749, 750, 999}
    bad_kinds = [line for line, _ in BAD_LINES]
    rows, lines = [], []
    for k in range(1000):
        if k in bad_at:
            lines.append(bad_kinds[k % len(bad_kinds)])
            continue
        row = {"condition": ["cot", "", "direct,noisy"][k % 3], "instruction": f"question {k}",
               "response": "answer " * (k % 7)}  # fmt: skip
        rows.append(row)
        lines.append(json.dumps(row).encode())
    (tmp_path / "rows").mkdir()
    (tmp_path / "rows" / "many.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    result = tokenize_skipping(tmp_path, small_tokenizer, threads=threads)
    (report,) = result.files
    assert (report.rows, report.bad_rows) == (1000 - len(bad_at), len(bad_at))
    got = load_task(tmp_path / "out" / "many.jsonl")
    expected = expected_layout(small_tokenizer, rows)
    for name, values in expected.items():
        np.testing.assert_array_equal(got[name], values, err_msg=name)


def test_skipped_rows_are_rechecked_when_the_policy_becomes_fail(
    small_tokenizer: Path, tmp_path: Path
):
    write_jsonl_with(tmp_path / "rows", b"{oops")
    tokenize_skipping(tmp_path, small_tokenizer)
    with pytest.raises(InputError, match="malformed JSON"):
        tokenize(
            [tmp_path / "rows"], tmp_path / "out", tokenizer_path=small_tokenizer, progress=False
        )


def test_a_failing_file_leaves_the_other_outputs_intact(small_tokenizer: Path, tmp_path: Path):
    rows = tmp_path / "rows"
    write_jsonl_with(rows, json.dumps(GOOD).encode(), "fine.jsonl")
    write_jsonl_with(rows, json.dumps(GOOD).encode(), "later_bad.jsonl")
    tokenize([rows], tmp_path / "out", tokenizer_path=small_tokenizer, progress=False)
    before = (tmp_path / "out" / "later_bad.jsonl" / "tokens.npy").read_bytes()
    write_jsonl_with(rows, b"{broken", "later_bad.jsonl")
    write_jsonl_with(rows, json.dumps(GOOD).encode(), "new.jsonl")
    with pytest.raises(InputError, match="1 of 3 file"):
        tokenize([rows], tmp_path / "out", tokenizer_path=small_tokenizer, progress=False)
    # The failed file's previous output is untouched; the new file was still done.
    assert (tmp_path / "out" / "later_bad.jsonl" / "tokens.npy").read_bytes() == before
    assert (tmp_path / "out" / "new.jsonl" / "tokens.npy").exists()


def test_empty_files_fail_or_become_empty_tasks(small_tokenizer: Path, tmp_path: Path):
    rows = tmp_path / "rows"
    rows.mkdir()
    (rows / "empty.jsonl").write_bytes(b"")
    (rows / "blank.jsonl").write_bytes(b"\n\n")
    with pytest.raises(InputError, match=r"blank\.jsonl: the file holds no rows") as info:
        tokenize([rows], tmp_path / "out", tokenizer_path=small_tokenizer, progress=False)
    assert "empty.jsonl: the file holds no rows" in str(info.value)
    # Under skip they become empty tasks; but no row at all in the whole output is an error.
    with pytest.raises(InputError, match="no rows at all: 2 input file") as info:
        tokenize(
            [rows],
            tmp_path / "out",
            tokenizer_path=small_tokenizer,
            on_error="skip",
            progress=False,
        )
    result = info.value.result
    assert all(f.status == "tokenized" and f.rows == 0 and f.warnings for f in result.files)
    assert load_task(tmp_path / "out" / "empty.jsonl")["tokens"].shape == (0,)
    write_jsonl_with(rows, json.dumps(GOOD).encode(), "good.jsonl")
    result = tokenize(
        [rows], tmp_path / "out", tokenizer_path=small_tokenizer, on_error="skip", progress=False
    )
    assert {f.task: f.rows for f in result.files} == {
        "blank.jsonl": 0,
        "empty.jsonl": 0,
        "good.jsonl": 4,
    }


def _parquet(path: Path, **columns) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)


def test_parquet_problems_name_file_and_row(small_tokenizer: Path, tmp_path: Path):
    rows = tmp_path / "rows"
    _parquet(
        rows / "nulls.parquet",
        condition=["cot", "cot", "cot"],
        instruction=["a", "b", "c"],
        response=["x", None, "z"],
    )
    _parquet(rows / "missing.parquet", condition=["cot"], instruction=["a"])
    _parquet(rows / "typed.parquet", condition=["cot"], instruction=["a"], response=[3])
    good = rows / "good.parquet"
    _parquet(good, condition=["cot"] * 50, instruction=["a"] * 50, response=["b"] * 50)
    (rows / "truncated.parquet").write_bytes(good.read_bytes()[:-30])
    (rows / "empty.parquet").write_bytes(b"")
    with pytest.raises(InputError) as info:
        tokenize([rows], tmp_path / "out", tokenizer_path=small_tokenizer, progress=False)
    message = str(info.value)
    assert f'{rows / "nulls.parquet"}:row 1 (counted from 0): field "response" is null' in message
    assert f'{rows / "missing.parquet"}: missing column "response"' in message
    assert f'{rows / "typed.parquet"}: column "response" has type Int64' in message
    assert f"{rows / 'truncated.parquet'}: not a readable Parquet file" in message
    assert f"{rows / 'empty.parquet'}: not a readable Parquet file" in message
    assert "5 of 6 files failed" in message
    assert (tmp_path / "out" / "good.parquet" / "tokens.npy").exists()


def test_a_tokenizer_whose_ids_leave_gaps_records_a_vocab_size_above_every_id(
    small_tokenizer: Path, tmp_path: Path
) -> None:
    """vocab_size bounds the ids (the dtype, the sampler's id checks): with gaps in the ids it
    is one past the largest, not the count of tokens (which the sampler then refused)."""
    from tokenizers import Tokenizer

    from data_io.tokenizer import TextEncoder

    spec = json.loads(small_tokenizer.read_text(encoding="utf-8"))
    count = len(spec["model"]["vocab"])
    spec["model"]["vocab"] = {
        token: (i if i < 100 else i + 1000) for token, i in spec["model"]["vocab"].items()
    }
    for added in spec["added_tokens"]:
        added["id"] = added["id"] if added["id"] < 100 else added["id"] + 1000
    largest = max([*spec["model"]["vocab"].values(), *(a["id"] for a in spec["added_tokens"])])
    gapped = tmp_path / "gapped" / "tokenizer.json"
    gapped.parent.mkdir()
    gapped.write_text(json.dumps(spec), encoding="utf-8")
    text = "What is 2+2? Say ünïcode 日本"
    assert TextEncoder(gapped).vocab_size == largest + 1 > count
    oracle = Tokenizer.from_file(str(gapped)).encode(text, add_special_tokens=False).ids
    assert TextEncoder(gapped).encode_batch([text]).ids.tolist() == oracle
    rows = tmp_path / "rows"
    rows.mkdir()
    (rows / "a.jsonl").write_text(json.dumps(GOOD) + "\n", encoding="utf-8")
    tokenize([rows], tmp_path / "out", tokenizer_path=gapped, progress=False)
    info = json.loads((tmp_path / "out" / "tokenizer_info.json").read_text(encoding="utf-8"))
    tokens = np.load(tmp_path / "out" / "a.jsonl" / "tokens.npy")
    assert info["vocab_size"] == largest + 1 > int(tokens.max())
