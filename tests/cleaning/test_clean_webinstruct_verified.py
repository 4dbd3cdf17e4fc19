"""pipe.clean_webinstruct_verified on a local copy in the `hf download` layout."""

from __future__ import annotations

from pathlib import Path

from pipe.clean_webinstruct_verified import CLEANER

from .upstream import (
    assert_offline_run_names_hub_download,
    jsonl_bytes,
    read_jsonl,
    row,
    run_expecting_error,
    run_module_offline,
    write_hub_copy,
)


def _item(question: str | None, answer: str | None, **extra: object) -> dict:
    # The upstream columns, the unused ones included.
    return {
        "id": extra.get("id", "x"),
        "question": question,
        "answer": answer,
        "answer_type": "Float",
        "category": "Physics",
        "difficulty": "Senior High School",
    }


TRAIN = [
    _item("  What is 2 + 2? ", " 4\n"),
    _item("Ünïcode – énergie en J ?", "3.2e-19 J"),
    _item(None, "orphan answer"),
    _item("Question without answer", None),
    _item("", ""),
    _item("Multi\nline", "Line one\nLine two"),
]
# Both fields as-is (not stripped), condition plain "direct"; null items dropped.
EXPECTED = [
    row("direct", "  What is 2 + 2? ", " 4\n"),
    row("direct", "Ünïcode – énergie en J ?", "3.2e-19 J"),
    row("direct", "", ""),
    row("direct", "Multi\nline", "Line one\nLine two"),
]


def _copy(root: Path, train: list[dict]) -> Path:
    # The test split exists upstream and must not be read.
    return write_hub_copy(
        root,
        {("default", "train"): train, ("default", "test"): [_item("unused", "unused")]},
    )


def _independent(train: list[dict]) -> list[dict]:
    """The expected rows re-derived in plain Python from cleaners.md §3.9."""
    return [
        row("direct", item["question"], item["answer"])
        for item in train
        if item["question"] is not None and item["answer"] is not None
    ]


def test_rows_and_bytes(tmp_path: Path) -> None:
    out = tmp_path / "out" / "webinstruct_verified.jsonl"
    report = CLEANER.run(_copy(tmp_path / "copy", TRAIN), out, progress=False)
    assert read_jsonl(out) == EXPECTED == _independent(TRAIN)
    assert out.read_bytes() == jsonl_bytes(EXPECTED)
    assert report.records == 6 and report.rows_written == 4
    assert dict(report.drops) == {"null question or answer": 2}


def test_many_batches_keep_source_order(tmp_path: Path) -> None:
    train = [_item(f"q{i}", f"a{i}") for i in range(20_000)]  # more than one 8192-row batch
    out = tmp_path / "out.jsonl"
    report = CLEANER.run(_copy(tmp_path / "copy", train), out, progress=False)
    assert read_jsonl(out) == _independent(train)
    assert report.records == 20_000 and not report.drops


def test_missing_column_names_the_rows(tmp_path: Path) -> None:
    train = [{"question": "q", "response": "not the upstream name"}]
    run_expecting_error(
        CLEANER,
        _copy(tmp_path / "copy", train),
        tmp_path / "out.jsonl",
        "default/train row 0",
        "column(s) ['answer'] missing",
    )


def test_module_without_network_or_copy_says_what_to_download(tmp_path: Path) -> None:
    assert_offline_run_names_hub_download(
        "pipe.clean_webinstruct_verified", tmp_path, "TIGER-Lab/WebInstruct-verified"
    )


def test_module_reads_the_default_local_copy(tmp_path: Path) -> None:
    _copy(tmp_path / "raw_data" / "hub" / "TIGER-Lab" / "WebInstruct-verified", TRAIN)
    done = run_module_offline("pipe.clean_webinstruct_verified", tmp_path)
    assert done.returncode == 0, done.stderr
    assert read_jsonl(tmp_path / "data" / "webinstruct_verified.jsonl") == EXPECTED
    assert "6 records read, 4 rows written" in done.stdout
    assert "dropped 2: null question or answer" in done.stdout
