"""Reading the tokenized layout: what is accepted, and how bad input is reported."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from data_io.errors import InputError
from data_io.formats.prefix_config import PrefixConfig, PrefixRule
from data_io.sampling.synthetic import SyntheticTask, write_corpus
from data_io.sampling.tasks import load_tokenizer_info, read_tasks

RULES = PrefixConfig(rules=[PrefixRule("a", max_per_file=3)])


def _corpus(tmp_path: Path) -> Path:
    tasks = {
        "a.jsonl": SyntheticTask(inst_len=np.array([3, 4]), resp_len=np.array([2, 5])),
        "b.jsonl": SyntheticTask(inst_len=np.array([6]), resp_len=np.array([2]), token_dtype="<u2"),
    }
    return write_corpus(tmp_path / "tok", tasks, vocab_size=100)


def test_reads_tasks_in_name_order_and_matches_rules(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    tasks = read_tasks(corpus, RULES, progress=False)
    assert [task.name for task in tasks] == ["a.jsonl", "b.jsonl"]
    assert tasks[0].rule.max_per_file == 3 and tasks[0].matched
    assert tasks[1].rule == PrefixRule("") and not tasks[1].matched
    assert tasks[0].tokens.dtype == np.dtype("<u4") and tasks[0].tokens.length == 14
    assert tasks[1].tokens.dtype == np.dtype("<u2") and tasks[1].tokens.length == 8
    assert tasks[0].inst_start.dtype == np.int64
    assert tasks[0].category == "a.jsonl"


def test_ignores_temporary_folders_and_files(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    (corpus / ".a.jsonl.tmp-123").mkdir()  # the tokenizer's half-written folder
    (corpus / "notes.txt").write_text("not a task")
    assert [task.name for task in read_tasks(corpus, RULES, progress=False)] == [
        "a.jsonl",
        "b.jsonl",
    ]


def _break(tmp_path: Path, name: str, array: np.ndarray, task: str = "a.jsonl") -> Path:
    corpus = _corpus(tmp_path)
    np.save(corpus / task / name, array)
    return corpus


@pytest.mark.parametrize(
    ("file", "array", "fragment"),
    [
        ("inst_len.npy", np.array([3, 4, 1], dtype="<u8"), "disagree on the row count"),
        ("inst_len.npy", np.array([[3, 4]], dtype="<u8"), "1-D integer"),
        ("inst_len.npy", np.array([3.0, 4.0]), "1-D integer"),
        ("inst_start.npy", np.array([0, -5], dtype="<i8"), "row 1 is negative"),
        (
            "resp_start.npy",
            np.array([3, 100], dtype="<u8"),
            "has resp_start 100, not inst_start 5 + inst_len 4 = 9",
        ),
        # An instruction length that disagrees with where its response starts.
        (
            "inst_len.npy",
            np.array([3, 5], dtype="<u8"),
            "resp_start 9, not inst_start 5 + inst_len 5",
        ),
        ("resp_len.npy", np.array([2, 4], dtype="<u8"), "rows cover 13 tokens"),
        ("resp_len.npy", np.array([2, 6], dtype="<u8"), "row 1 of"),
        ("tokens.npy", np.arange(14, dtype="<i8"), "dtype <i8"),
        ("tokens.npy", np.arange(14, dtype="<u4").reshape(2, 7), "1-D"),
    ],
)
def test_bad_task_files_name_task_and_file(
    tmp_path: Path, file: str, array: np.ndarray, fragment: str
) -> None:
    corpus = _break(tmp_path, file, array)
    with pytest.raises(InputError) as info:
        read_tasks(corpus, RULES, progress=False)
    assert "task a.jsonl" in str(info.value)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("inst_start", "resp_start", "fragment"),
    [
        ([0, 6], [3, 10], "row 1 of {folder} starts at 6 but row 0 ends at 5"),  # a gap
        ([0, 4], [3, 8], "row 1 of {folder} starts at 4 but row 0 ends at 5"),  # an overlap
        ([1, 5], [4, 9], "row 0 of {folder} starts at 1 but row 0 must start at 0"),
    ],
)
def test_rows_must_be_back_to_back(
    tmp_path: Path, inst_start: list[int], resp_start: list[int], fragment: str
) -> None:
    """Consistent within each row, but not laid out as formats.md §3 says."""
    corpus = _corpus(tmp_path)
    np.save(corpus / "a.jsonl" / "inst_start.npy", np.array(inst_start, dtype="<u8"))
    np.save(corpus / "a.jsonl" / "resp_start.npy", np.array(resp_start, dtype="<u8"))
    with pytest.raises(InputError) as info:
        read_tasks(corpus, RULES, progress=False)
    message = str(info.value)
    assert message.startswith("task a.jsonl: ")
    assert fragment.format(folder=corpus / "a.jsonl") in message
    assert "back to back" in message
    # Re-running the tokenizer alone would keep the folder (its cache does not read arrays).
    assert f"delete {corpus / 'a.jsonl'} and re-run `data_io tokenize " in message


def test_missing_file_is_reported(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    (corpus / "b.jsonl" / "resp_len.npy").unlink()
    with pytest.raises(InputError, match=r"task b\.jsonl: .*resp_len\.npy is missing"):
        read_tasks(corpus, RULES, progress=False)


def test_truncated_tokens_file_is_reported(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    path = corpus / "a.jsonl" / "tokens.npy"
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(InputError, match="truncated"):
        read_tasks(corpus, RULES, progress=False)


def test_garbage_npy_is_reported(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    (corpus / "a.jsonl" / "inst_len.npy").write_bytes(b"not numpy")
    with pytest.raises(InputError, match=r"task a\.jsonl: .*inst_len\.npy is not a valid"):
        read_tasks(corpus, RULES, progress=False)


def test_tokenizer_info(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    info = load_tokenizer_info(corpus)
    assert info["vocab_size"] == 100 and "condition_mapping" in info
    (corpus / "tokenizer_info.json").write_text(json.dumps({**info, "extra": [1, 2]}))
    assert load_tokenizer_info(corpus)["extra"] == [1, 2]  # unknown keys are kept
    (corpus / "tokenizer_info.json").write_text(json.dumps({**info, "vocab_size": "big"}))
    with pytest.raises(InputError, match="vocab_size"):
        load_tokenizer_info(corpus)
    (corpus / "tokenizer_info.json").write_text("{broken")
    with pytest.raises(InputError, match=r"tokenizer_info\.json cannot be read"):
        load_tokenizer_info(corpus)
    (corpus / "tokenizer_info.json").unlink()
    with pytest.raises(InputError, match="is missing"):
        load_tokenizer_info(corpus)
