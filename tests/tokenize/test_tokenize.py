"""data_io.tokenize: layout against an independent oracle, dtypes, special tokens in text."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from data_io.errors import ConfigError, TokenizerError
from data_io.tokenize import parse_conditions, tokenize
from tests.conftest import EXAMPLE_ROWS
from tests.tokenize_oracle import expected_layout, load_task, read_rows, task_metadata

EXAMPLE_TASKS = [
    "data__Platypus__code.jsonl",
    "data__arithmetic.jsonl",
    "data__translations.jsonl",
    "data_clustered__chat__special_tokens.parquet",
    "data_clustered__facts__primes_high.parquet",
    "data_clustered__facts__primes_low.parquet",
]


def test_layout_matches_the_tokenizers_oracle_row_by_row(small_tokenizer: Path, tmp_path: Path):
    out = tmp_path / "out"
    result = tokenize([EXAMPLE_ROWS], out, tokenizer_path=small_tokenizer, progress=False)
    assert sorted(f.task for f in result.files) == EXAMPLE_TASKS
    assert {f.status for f in result.files} == {"tokenized"}
    for source in sorted(EXAMPLE_ROWS.rglob("*.*")):
        if source.suffix not in (".jsonl", ".parquet"):
            continue
        task = "__".join(source.relative_to(EXAMPLE_ROWS).parts)
        got = load_task(out / task)
        want = expected_layout(small_tokenizer, read_rows(source))
        for name, array in want.items():
            np.testing.assert_array_equal(
                got[name].astype(np.uint64), array, err_msg=f"{task}/{name}"
            )
        assert got["tokens"].dtype == np.dtype("<u4")
        for name in ("inst_start", "inst_len", "resp_start", "resp_len"):
            assert got[name].dtype == np.dtype("<u8")
        # Rows are back to back: each starts where the previous ended.
        np.testing.assert_array_equal(got["resp_start"], got["inst_start"] + got["inst_len"])
        np.testing.assert_array_equal(
            got["inst_start"][1:], got["resp_start"][:-1] + got["resp_len"][:-1]
        )
        meta = task_metadata(out / task)
        assert meta["tool"] == "data_io" and meta["rows"] == len(got["inst_len"])
        assert meta["source_size"] == source.stat().st_size and "source_mtime" in meta


def original_npy_bytes(array: np.ndarray) -> bytes:
    """The bytes the original data_io writes for a 1-D array: the header dict as a Python
    literal without numpy's trailing ", }", spaces to a 64-byte boundary, then a newline."""
    fields = f"{{'descr': '{array.dtype.str}', 'fortran_order': False, 'shape': ({len(array)},)}}"
    body = fields.encode("ascii")
    total = 10 + len(body) + 1
    padded = body + b" " * (64 - total % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(padded).to_bytes(2, "little") + padded + array.tobytes()


def test_arrays_are_byte_identical_to_the_original_tools(small_tokenizer: Path, tmp_path: Path):
    """The original's users compare runs by the SHA-256 of the .npy files."""
    out = tmp_path / "out"
    tokenize([EXAMPLE_ROWS], out, tokenizer_path=small_tokenizer, progress=False)
    for task in EXAMPLE_TASKS:
        for name, array in load_task(out / task).items():
            data = (out / task / f"{name}.npy").read_bytes()
            assert data == original_npy_bytes(np.ascontiguousarray(array)), f"{task}/{name}"
    empty = np.zeros(0, dtype="<u8")
    assert original_npy_bytes(empty)[10:].startswith(
        b"{'descr': '<u8', 'fortran_order': False, 'shape': (0,)} "
    )


def test_tokenizer_info_has_the_original_keys(small_tokenizer: Path, tmp_path: Path):
    tokenize([EXAMPLE_ROWS], tmp_path / "out", tokenizer_path=small_tokenizer, progress=False)
    info = json.loads((tmp_path / "out" / "tokenizer_info.json").read_text())
    assert {"tokenizer_path", "boq", "eoq", "eoa", "condition_mapping", "vocab_size"} <= info.keys()
    assert info["boq"] == "<|im_start|>" and info["eoa"] == "<|box_end|>"
    assert info["condition_mapping"]["cot"] == "<|object_ref_end|>"
    assert info["vocab_size"] == 600


def test_special_token_strings_in_text_are_plain_text(small_tokenizer: Path, tmp_path: Path):
    rows = tmp_path / "rows"
    rows.mkdir()
    (rows / "a.jsonl").write_text(
        json.dumps(
            {"condition": "", "instruction": "say <|im_end|> now", "response": "<|box_end|>"}
        )
        + "\n"
    )
    tokenize([rows], tmp_path / "out", tokenizer_path=small_tokenizer, progress=False)
    task = load_task(tmp_path / "out" / "a.jsonl")
    info = json.loads((tmp_path / "out" / "tokenizer_info.json").read_text())
    inst = task["tokens"][: int(task["inst_len"][0])]
    resp = task["tokens"][int(task["resp_start"][0]) :]
    # The control ids appear only where the layout puts them.
    assert list(inst).count(info["eoq_id"]) == 1 and inst[-1] == info["eoq_id"]
    assert list(resp).count(info["eoa_id"]) == 1 and resp[-1] == info["eoa_id"]
    assert len(resp) > 2  # "<|box_end|>" spelled out in several byte-level tokens


def test_auto_dtype_picks_uint16_for_small_vocabularies(small_tokenizer: Path, tmp_path: Path):
    result = tokenize(
        [EXAMPLE_ROWS],
        tmp_path / "out",
        tokenizer_path=small_tokenizer,
        token_dtype="auto",
        progress=False,
    )
    assert result.token_dtype == "uint16"
    tokens = np.load(tmp_path / "out" / EXAMPLE_TASKS[0] / "tokens.npy")
    assert tokens.dtype == np.dtype("<u2")
    reference = tokenize(
        [EXAMPLE_ROWS], tmp_path / "ref", tokenizer_path=small_tokenizer, progress=False
    )
    assert reference.token_dtype == "uint32"
    np.testing.assert_array_equal(
        tokens, np.load(tmp_path / "ref" / EXAMPLE_TASKS[0] / "tokens.npy")
    )


@pytest.mark.parametrize("column_type", [pa.string(), pa.large_string(), pa.string_view()])
def test_parquet_string_column_types(
    small_tokenizer: Path, tmp_path: Path, column_type: pa.DataType
):
    rows = read_rows(EXAMPLE_ROWS / "data" / "translations.jsonl")
    table = pa.table(
        {
            k: pa.array([r[k] for r in rows], type=column_type)
            for k in ("response", "condition", "instruction")
        }
    )
    (tmp_path / "in").mkdir()
    pq.write_table(table, tmp_path / "in" / "t.parquet", row_group_size=7)
    tokenize([tmp_path / "in"], tmp_path / "out", tokenizer_path=small_tokenizer, progress=False)
    got = load_task(tmp_path / "out" / "t.parquet")
    np.testing.assert_array_equal(got["tokens"], expected_layout(small_tokenizer, rows)["tokens"])


def test_custom_condition_map_and_empty_map(small_tokenizer: Path, tmp_path: Path):
    rows = tmp_path / "rows"
    rows.mkdir()
    (rows / "a.jsonl").write_text(
        json.dumps({"condition": "math", "instruction": "x", "response": "y"}) + "\n"
    )
    mapping = {"math": "<think>"}
    tokenize(
        [rows], tmp_path / "out", tokenizer_path=small_tokenizer, conditions=mapping, progress=False
    )
    want = expected_layout(small_tokenizer, read_rows(rows / "a.jsonl"), tags=mapping)
    np.testing.assert_array_equal(load_task(tmp_path / "out" / "a.jsonl")["tokens"], want["tokens"])


def test_parse_conditions():
    assert parse_conditions("direct=<|a|>, cot=<|b|>") == {"direct": "<|a|>", "cot": "<|b|>"}
    assert parse_conditions("") == {}
    with pytest.raises(ConfigError, match="not TAG=TOKEN"):
        parse_conditions("direct")
    with pytest.raises(ConfigError, match="twice"):
        parse_conditions("a=<x>,a=<y>")


def test_tokenizer_lacking_layout_tokens_is_rejected_up_front(
    small_tokenizer: Path, tmp_path: Path
):
    with pytest.raises(TokenizerError, match=r'"<\|nope\|>" \(--eoa\)'):
        tokenize(
            [EXAMPLE_ROWS],
            tmp_path / "out",
            tokenizer_path=small_tokenizer,
            eoa="<|nope|>",
            progress=False,
        )
    assert not (tmp_path / "out" / EXAMPLE_TASKS[0]).exists()


def test_tokenizer_path_may_be_a_folder_and_a_hub_id_fails_clearly(
    small_tokenizer: Path, tmp_path: Path, monkeypatch
):
    result = tokenize(
        [EXAMPLE_ROWS], tmp_path / "out", tokenizer_path=small_tokenizer.parent, progress=False
    )
    assert len(result.files) == len(EXAMPLE_TASKS)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(TokenizerError, match="hf download nobody/none"):
        tokenize([EXAMPLE_ROWS], tmp_path / "out2", tokenizer_path="nobody/none", progress=False)
    with pytest.raises(TokenizerError, match="does not exist"):
        tokenize(
            [EXAMPLE_ROWS],
            tmp_path / "out2",
            tokenizer_path=tmp_path / "missing.json",
            progress=False,
        )


def test_bad_options_are_config_errors(small_tokenizer: Path, tmp_path: Path):
    for kwargs, message in (
        ({"on_error": "ignore"}, "on_error"),
        ({"token_dtype": "int8"}, "token_dtype"),
        ({"threads": 0}, "threads"),
    ):
        with pytest.raises(ConfigError, match=message):
            tokenize(
                [EXAMPLE_ROWS],
                tmp_path / "out",
                tokenizer_path=small_tokenizer,
                progress=False,
                **kwargs,
            )
    with pytest.raises(ConfigError, match="does not exist"):
        tokenize(
            [tmp_path / "nowhere"], tmp_path / "out", tokenizer_path=small_tokenizer, progress=False
        )


def test_two_files_with_one_task_name_are_rejected(small_tokenizer: Path, tmp_path: Path):
    for root in ("a", "b"):
        (tmp_path / root).mkdir()
        (tmp_path / root / "x.jsonl").write_text(
            '{"condition":"","instruction":"a","response":"b"}\n'
        )
    with pytest.raises(ConfigError, match=r'task name "x\.jsonl"'):
        tokenize(
            [tmp_path / "a", tmp_path / "b"],
            tmp_path / "out",
            tokenizer_path=small_tokenizer,
            progress=False,
        )


def test_threads_do_not_change_the_output(small_tokenizer: Path, tmp_path: Path):
    for threads, batch_rows in ((1, 4096), (2, 3)):
        tokenize(
            [EXAMPLE_ROWS],
            tmp_path / f"t{threads}",
            tokenizer_path=small_tokenizer,
            threads=threads,
            batch_rows=batch_rows,
            progress=False,
        )
    for task in EXAMPLE_TASKS:
        for name, array in load_task(tmp_path / "t1" / task).items():
            np.testing.assert_array_equal(array, load_task(tmp_path / "t2" / task)[name])
