"""data_io.cleaning.runner: drops, assertions, validation, order, summary, bounded memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from data_io.cleaning import (
    Cleaner,
    Drop,
    LocalFiles,
    Record,
    Row,
    jsonl_file,
    read_jsonl,
    require,
    run_cleaner,
)
from data_io.errors import InputError

from .upstream import REPO_ROOT, write_json
from .upstream import read_jsonl as read_output


def _source(tmp_path: Path, items: list[dict]) -> Path:
    folder = tmp_path / "raw"
    folder.mkdir(exist_ok=True)
    with (folder / "a.jsonl").open("w", encoding="utf-8") as handle:
        for item in items:
            handle.write(json.dumps(item) + "\n")
    return folder


def _cleaner(clean) -> Cleaner:
    return Cleaner(
        name="toy",
        source=LocalFiles(
            "raw_data/toy", reader=read_jsonl, include=("*.jsonl",), how_to_get="make toy"
        ),
        output=jsonl_file("data/toy.jsonl"),
        clean=clean,
        batch_rows=2,
    )


def _toy(record: Record) -> Iterator[Row | Drop | pa.Table]:
    kind = record["kind"]
    require(kind != "broken", "kind must not be 'broken'")
    if kind == "skip":
        yield Drop("skipped on purpose")
    elif kind == "table":
        yield pa.table(
            {"condition": ["direct"], "instruction": [record["q"]], "response": ["from a table"]}
        )
    elif kind == "two":
        yield Row("cot", record["q"], "long")
        yield Row("direct", record["q"], "short")
    else:
        yield Row(kind, record["q"], record.get("a", "-"))


ITEMS = [
    {"kind": "noisy,cot", "q": "1"},
    {"kind": "skip", "q": "2"},
    {"kind": "two", "q": "3"},
    {"kind": "table", "q": "4"},
    {"kind": "skip", "q": "5"},
    {"kind": "direct", "q": "6", "a": "six"},
]


def test_order_drops_and_summary(tmp_path: Path) -> None:
    out = tmp_path / "toy.jsonl"
    report = run_cleaner(_cleaner(_toy), _source(tmp_path, ITEMS), out, progress=False)
    assert read_output(out) == [
        {"condition": "noisy,cot", "instruction": "1", "response": "-"},
        {"condition": "cot", "instruction": "3", "response": "long"},
        {"condition": "direct", "instruction": "3", "response": "short"},
        {"condition": "direct", "instruction": "4", "response": "from a table"},
        {"condition": "direct", "instruction": "6", "response": "six"},
    ]
    assert report.records == 6 and report.rows_written == 5
    assert dict(report.drops) == {"skipped on purpose": 2}
    assert report.format().splitlines() == [
        "toy: 6 records read, 5 rows written to 1 file, 2 records dropped",
        f"  wrote {out} (5 rows)",
        "  dropped 2: skipped on purpose",
    ]


def _neither_row(record: Record) -> Iterator[Row | Drop]:
    """Two rows per record, each made only when its field is set (scibench's rule)."""
    if record["q"] == "":
        yield Drop("empty question")
        return
    for condition, field in (("cot", "long"), ("direct", "short")):
        if record[field]:
            yield Row(condition, record["q"], record[field])
        else:
            yield Drop(f"no {condition} row: empty {field}")


def test_rows_not_made_are_not_counted_as_records_dropped(tmp_path: Path) -> None:
    items = [
        {"q": "1", "long": "", "short": ""},  # gives no row, though not dropped as a record
        {"q": "2", "long": "l", "short": ""},
        {"q": "", "long": "l", "short": "s"},
    ]
    out = tmp_path / "toy.jsonl"
    report = run_cleaner(_cleaner(_neither_row), _source(tmp_path, items), out, progress=False)
    assert report.records == 3 and report.rows_written == 1
    assert report.format().splitlines() == [
        "toy: 3 records read, 1 row written to 1 file, 1 record dropped, 3 rows not made",
        f"  wrote {out} (1 rows)",
        "  dropped 1: empty question",
        "  dropped 1: no cot row: empty long",
        "  dropped 2: no direct row: empty short",
    ]


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (
            {"kind": "broken", "q": "x"},
            r"toy: assertion failed at .*a\.jsonl line 3: kind must not be 'broken'",
        ),
        ({"kind": "", "q": "x"}, r"bad row from .*a\.jsonl line 3: the condition is empty"),
        ({"kind": "cot,Synth", "q": "x"}, r"line 3: unknown condition tag\(s\) \['Synth'\]"),
        ({"kind": "cot", "q": 7}, r"line 3: instruction is int, not a string"),
        (
            {"kind": "cot", "q": "\ud800"},
            r"line 3 has text in instruction that is not valid Unicode",
        ),
        (
            {"kind": "cot"},
            r"cannot clean .*a\.jsonl line 3: no field 'q' \(its fields: kind\); KeyError",
        ),
        (
            {"kind": "table", "q": None},
            r"bad table from .*line 3: column instruction has type null, not a string type",
        ),
    ],
)
def test_bad_rows_stop_the_run_and_name_the_record(
    tmp_path: Path, item: dict, message: str
) -> None:
    out = tmp_path / "toy.jsonl"
    out.write_text("previous\n")
    items = [ITEMS[0], ITEMS[1], item, ITEMS[2]]
    with pytest.raises(InputError, match=message):
        run_cleaner(_cleaner(_toy), _source(tmp_path, items), out, progress=False)
    assert out.read_text() == "previous\n"
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []


def test_unknown_yield_is_rejected(tmp_path: Path) -> None:
    def clean(record: Record):
        yield {"condition": "cot"}

    with pytest.raises(InputError, match="yielded a dict"):
        run_cleaner(_cleaner(clean), _source(tmp_path, ITEMS), tmp_path / "o.jsonl", progress=False)


def test_malformed_source_line(tmp_path: Path) -> None:
    folder = _source(tmp_path, ITEMS[:2])
    with (folder / "a.jsonl").open("a") as handle:
        handle.write("{not json\n")
    with pytest.raises(InputError, match=r"a\.jsonl line 3: not valid UTF-8 JSON"):
        run_cleaner(_cleaner(_toy), folder, tmp_path / "o.jsonl", progress=False)


def test_missing_source_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        InputError,
        match=r"(?s)raw input not found: raw_data/toy\nGet it with:\n  make toy\nor pass --source",
    ):
        run_cleaner(_cleaner(_toy), progress=False)
    (tmp_path / "raw_data" / "toy").mkdir(parents=True)
    with pytest.raises(InputError, match=r"files matching \['\*\.jsonl'\] not found"):
        run_cleaner(_cleaner(_toy), progress=False)


# The child streams 40 batches of 8,192 rows of ~3 KB (about 1 GB of text) through a vectorised
# cleaner into 50 grouped Parquet files and through per-row Python into one JSON Lines file,
# then prints its peak RSS. Holding either output would take far more than the bound below.
_STREAM_A_LOT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import pyarrow as pa
    from data_io.cleaning import Cleaner, Record, Row, jsonl_file, parquet_files, run_cleaner

    BATCHES, ROWS = 40, 8192
    out = Path(sys.argv[1])

    class Synthetic:
        default = "synthetic"
        def describe(self): return "synthetic"
        def present(self, override=None): return True
        def records(self, override=None):
            for b in range(BATCHES):
                keys = pa.array([f"task{(b * 7 + i) % 50}" for i in range(ROWS)])
                text = pa.array([f"{b}-{i}-" + "x" * 3000 for i in range(ROWS)])
                yield Record(pa.table({"text": text, "key": keys}), "synthetic", b * ROWS, "synthetic", rows=ROWS)

    def grouped(record):
        t = record.data
        yield pa.table({"condition": pa.repeat(pa.scalar("direct", pa.string()), t.num_rows),
                        "instruction": t["text"], "response": t["text"], "file": t["key"]})

    def rows(record):
        for text in record.data["text"].to_pylist()[:2048]:
            yield Row("cot", text, text)

    options = {"buffer_bytes": 32 << 20, "row_group_bytes": 8 << 20}
    a = run_cleaner(Cleaner("g", Synthetic(), parquet_files(""), grouped), None, out / "grouped",
                    progress=False, writer_options=options)
    b = run_cleaner(Cleaner("r", Synthetic(), jsonl_file(""), rows), None, out / "rows.jsonl",
                    progress=False, writer_options=options)
    # VmHWM is this program's own peak; ru_maxrss would include the forking parent's.
    status = Path("/proc/self/status").read_text()
    peak_kib = int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])
    print(a.rows_written, b.rows_written, peak_kib * 1024)
    """
)


def test_memory_stays_bounded_by_a_batch(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _STREAM_A_LOT, str(tmp_path)],
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    grouped_rows, jsonl_rows, peak = (int(v) for v in done.stdout.split())
    assert grouped_rows == 40 * 8192 and jsonl_rows == 40 * 2048
    written = sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file())
    text = 40 * 8192 * 2 * 3000 + 40 * 2048 * 2 * 3000  # ~2.5 GB of strings went through
    assert peak < 700 << 20, f"peak RSS {peak >> 20} MiB for {text >> 20} MiB of text"
    assert len(list((tmp_path / "grouped").iterdir())) == 50 and written > 0


def test_a_row_error_never_aborts_the_process(tmp_path: Path) -> None:
    """A row error stops the read in the middle of a Parquet row group that Arrow's worker
    threads are still decoding. Before the fix, 40-60% of these runs ended in SIGABRT
    ("terminate called without an active exception") while the interpreter shut down; now the
    abandoned scan is closed and waited for while the interpreter is alive."""
    import pyarrow.parquet as pq

    from .upstream import write_hub_copy

    rows = 100_000
    answers = [f"a #### {i}" for i in range(rows)]
    answers[2500] = "no delimiter"  # cleaners.md §4: exactly one '#### '
    root = write_hub_copy(
        tmp_path / "raw_data" / "hub" / "openai" / "gsm8k",
        {("main", "train"): [{"question": "q", "answer": "a #### 1"}]},
    )
    table = pa.table({"question": [f"q{i}" for i in range(rows)], "answer": answers})
    pq.write_table(table, root / "main" / "train-00000-of-00001.parquet", row_group_size=500)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    for _ in range(8):  # the abort came in about half of the runs
        done = subprocess.run(
            [sys.executable, "-m", "pipe.clean_gsm8k_train", "--quiet"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert "terminate called" not in done.stderr
        assert done.returncode == 1, done.stderr  # the clean error code, not -6 (SIGABRT)
        assert done.stderr == (
            "clean gsm8k_train: error: gsm8k_train: assertion failed at raw_data/hub/openai/gsm8k "
            "main/train row 2500: answer splits on '#### ' into 1 parts, expected 2\n"
        )
    assert not (tmp_path / "data").exists()


def test_an_unwritable_cache_is_a_warning_after_the_outputs_are_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from data_io.cleaning.runner import run_and_report
    from pipe.clean_platypus.clean_arb import CLEANER as ARB

    source = tmp_path / "ARB"
    for name in ("math", "reading", "law", "science", "physics"):
        write_json(source / f"{name}.json", [{"instruction": name, "response": "r"}])
    (tmp_path / "cache").write_text("a file where the cache folder should be\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    out = tmp_path / "Platypus"
    assert run_and_report(ARB, source, out) == 0  # was: a NotADirectoryError traceback
    said = capsys.readouterr()
    assert "arb: 5 records read, 5 rows written to 5 files" in said.out
    assert said.err.startswith("clean arb: warning: the outputs are written, but the list of")
    assert "set XDG_CACHE_HOME to a writable folder" in said.err
    assert sorted(p.name for p in out.iterdir()) == [
        f"arb_{name}.jsonl" for name in ("law", "math", "physics", "reading", "science")
    ]
