"""``data_io inspect`` on what it used to misread: cleaned rows (files and folders), tokenized
rows decoded with their special tokens, packing caches, mixed-dtype shard folders, folders it
does not know (an error naming only its own options), and non-task folders of a tokenized
folder."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from data_io.cli import main
from data_io.errors import InputError
from data_io.inspect import inspect_path
from tests.load.rows_fixture import random_rows, write_rows

REPO = Path(__file__).resolve().parents[2]
BPE = REPO / "trained_tokenizers" / "bpe" / "tokenizer.json"


def _row(i: int, condition: str = "direct") -> dict[str, str]:
    return {"condition": condition, "instruction": f"question {i}", "response": f"answer {i}"}


def _jsonl(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


# -- cleaned rows --------------------------------------------------------------------------------
def test_a_jsonl_file_of_cleaned_rows(tmp_path: Path) -> None:
    rows = [json.dumps(_row(i)) for i in range(5)]
    path = _jsonl(tmp_path / "rows.jsonl", [*rows[:2], "", *rows[2:]])  # a blank line is no row
    report = inspect_path(path, documents=2)
    assert report.ok, report.problems
    assert report.kind == "cleaned rows"
    assert report.facts["rows"] == 5 and report.facts["files"] == 1
    assert report.facts["columns"] == "condition (str), instruction (str), response (str)"
    assert report.samples == ["[direct] question 0 → answer 0", "[direct] question 1 → answer 1"]
    assert report.tables["files"] == [{"file": "rows.jsonl", "rows": 5, "problems": 0}]


def test_a_folder_of_jsonl_gz_and_parquet_files(tmp_path: Path) -> None:
    root = tmp_path / "rows"
    _jsonl(root / "data" / "a.jsonl", [json.dumps(_row(i)) for i in range(3)])
    (root / "data" / "b.jsonl.gz").write_bytes(
        gzip.compress("".join(json.dumps(_row(i, "cot")) + "\n" for i in range(4)).encode())
    )
    (root / "c").mkdir()
    pq.write_table(pa.Table.from_pylist([_row(i) for i in range(6)]), root / "c" / "d.parquet")
    (root / ".hidden").mkdir()
    _jsonl(root / ".hidden" / "x.jsonl", ["not read"])
    report = inspect_path(root, documents=10)
    assert report.ok, report.problems
    assert report.facts["rows"] == 13 and report.facts["files"] == 3
    assert [row["file"] for row in report.tables["files"]] == [
        "c/d.parquet",
        "data/a.jsonl",
        "data/b.jsonl.gz",
    ]
    assert len(report.samples) == 10 and report.samples[0] == "[direct] question 0 → answer 0"


def test_a_cut_jsonl_gz_names_the_line_it_stops_after(tmp_path: Path) -> None:
    whole = gzip.compress("".join(json.dumps(_row(i)) + "\n" for i in range(2000)).encode())
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    report = inspect_path(cut)
    rows = report.facts["rows"]
    assert not report.ok and 0 < rows < 2000
    assert report.problems == [
        f"{cut}: unreadable after line {rows} (Compressed file ended before the end-of-stream "
        "marker was reached); the file is damaged or not .gz: restore or rewrite it"
    ]
    plain = tmp_path / "plain.jsonl.gz"
    plain.write_text(json.dumps(_row(0)) + "\n")
    (problem,) = inspect_path(plain).problems
    assert problem.startswith(f"{plain}: unreadable from its start (Not a gzipped file")


def test_bad_rows_are_named_by_file_and_line(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path / "bad.jsonl",
        [
            json.dumps(_row(0)),
            "{not json",
            json.dumps([1, 2]),
            json.dumps({"condition": "direct", "instruction": "q"}),
            json.dumps({**_row(4), "response": 7, "extra": 1}),
        ],
    )
    report = inspect_path(path)
    assert not report.ok
    problems = "\n".join(report.problems)
    assert f"{path}: line 2 is not JSON" in problems
    assert f"{path}: line 3 holds a JSON list, not an object" in problems
    assert f"{path}: line 4: response missing or not a string" in problems
    assert f"{path}: line 5: response missing or not a string" in problems
    assert report.facts["rows"] == 5 and report.tables["files"][0]["problems"] == 4
    assert any("extra" in note for note in report.notes)


def test_many_bad_rows_are_counted_not_all_listed(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "bad.jsonl", ["{"] * 12)
    report = inspect_path(path)
    assert len(report.problems) == 5 and report.problem_count == 12
    assert report.notes == [
        f"{path}: 7 more problems of the same kinds, not listed (the first 5 are)"
    ]
    shown = subprocess.run([sys.executable, "-m", "data_io", "inspect", str(path), "--json"],
                           cwd=REPO, capture_output=True, text=True, check=False)  # fmt: skip
    assert shown.returncode == 1
    assert json.loads(shown.stdout)["problem_count"] == 12


# -- prepare's raw text rows ---------------------------------------------------------------------
def test_raw_text_rows_are_prepares_input_not_bad_cleaned_rows(tmp_path: Path) -> None:
    texts = [{"text": f"document {i}", "url": f"u{i}"} for i in range(12)]
    path = _jsonl(tmp_path / "raw" / "docs.jsonl", [json.dumps(t) for t in texts])
    pq.write_table(pa.Table.from_pylist(texts[:4]), tmp_path / "raw" / "more.parquet")
    report = inspect_path(tmp_path / "raw", documents=2)
    assert report.ok, report.problems
    assert report.kind == "raw text rows (prepare's input, field 'text')"
    assert report.facts["rows"] == 16
    assert report.samples == ["document 0", "document 1"]
    assert report.notes == []  # the url column is no "column beyond the cleaned fields"
    _jsonl(path, [json.dumps(texts[0]), json.dumps({"text": None}), json.dumps({"title": "x"})])
    pq.write_table(pa.table({"text": ["a", None]}), tmp_path / "raw" / "more.parquet")
    report = inspect_path(tmp_path / "raw")
    assert report.problems == [
        f"{tmp_path}/raw/docs.jsonl: line 2: no string 'text' field (the file's first row has "
        "one); prepare fails on it: fix or drop the row",
        f"{tmp_path}/raw/docs.jsonl: line 3: no string 'text' field (the file's first row has "
        "one); prepare fails on it: fix or drop the row",
        f"{tmp_path}/raw/more.parquet: 1 null text value; prepare fails on a null text: "
        "drop those rows",
    ]


@pytest.mark.parametrize("first", ["{broken", '{"text": null}', "[1, 2]"])
def test_raw_text_is_known_by_its_first_object_row_whatever_the_first_line(
    tmp_path: Path, first: str
) -> None:
    rows = [json.dumps({"text": f"document {i}"}) for i in range(20)]
    report = inspect_path(_jsonl(tmp_path / "docs.jsonl", [first, *rows]))
    assert report.kind == "raw text rows (prepare's input, field 'text')"
    assert report.problem_count == 1, report.problems  # the first line alone


def test_a_finalized_scaled_run_is_not_called_unfinished(tmp_path: Path) -> None:
    plan = tmp_path / "out" / ".data_io_scale"
    plan.mkdir(parents=True)
    (plan / "manifest.json").write_text(json.dumps({"stage": "train-tokenizer"}))
    (plan / "finalized.json").write_text("{}")
    (tmp_path / "out" / "notes.txt").write_text("x")
    report = inspect_path(tmp_path / "out")
    assert "unfinished" not in report.kind and "data_io resume" not in " ".join(report.problems)


def test_raw_text_beside_cleaned_rows_is_one_problem_naming_the_text_files(
    tmp_path: Path,
) -> None:
    _jsonl(tmp_path / "a.jsonl", [json.dumps(_row(0))])
    _jsonl(tmp_path / "b.jsonl", [json.dumps({"text": "raw"})])
    report = inspect_path(tmp_path)
    assert report.kind == "cleaned rows"
    assert len(report.problems) == 1
    assert report.problems[0].startswith(f"{tmp_path} mixes raw text rows (b.jsonl) with cleaned")


# -- unfinished runs and empty folders -----------------------------------------------------------
def test_a_prepare_run_stopped_before_its_metadata_is_named_with_how_to_go_on(
    tmp_path: Path,
) -> None:
    import fcntl
    import os

    out = tmp_path / "out"
    (out / ".prepare" / "work_00000").mkdir(parents=True)
    (out / ".prepare" / "journal.json").write_text(
        json.dumps({"run": 0, "started": 1.0e9, "pid": 4321})
    )
    (out / "train").mkdir()
    (out / "train" / ".shard_00000.bin.tmp").write_bytes(b"\0" * 8)
    report = inspect_path(out)
    assert report.kind == "unfinished data_io prepare run"
    assert report.facts["run"] == 0 and report.facts["pid"] == 4321
    assert report.facts["temporary shards"] == 1
    assert len(report.problems) == 1
    assert "was stopped before it finished" in report.problems[0]
    assert "run the same data_io prepare command again" in report.problems[0]
    fd = os.open(out, os.O_RDONLY)  # a live run holds the folder's lock (state.exclusive)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        problems = inspect_path(out).problems
    finally:
        os.close(fd)
    assert len(problems) == 1 and "is writing into this folder now" in problems[0]


def test_a_scaled_run_not_finalized_points_at_status_and_resume(tmp_path: Path) -> None:
    plan = tmp_path / "tok" / ".data_io_scale"
    plan.mkdir(parents=True)
    (plan / "manifest.json").write_text(json.dumps({"stage": "tokenize"}))
    report = inspect_path(tmp_path / "tok")
    assert report.kind == "unfinished scaled-out tokenize run"
    assert len(report.problems) == 1
    assert f"data_io status {tmp_path / 'tok'}" in report.problems[0]
    assert f"data_io resume {tmp_path / 'tok'}" in report.problems[0]


def test_an_empty_folder_is_called_empty(tmp_path: Path) -> None:
    report = inspect_path(tmp_path)
    assert report.kind == "empty folder"
    assert len(report.problems) == 1 and "the folder is empty" in report.problems[0]


def test_bad_parquet_columns_and_files(tmp_path: Path) -> None:
    table = pa.table({"condition": ["direct", None], "instruction": [1, 2]})
    pq.write_table(table, tmp_path / "cols.parquet")
    problems = "\n".join(inspect_path(tmp_path / "cols.parquet").problems)
    assert "no column response" in problems
    assert "column instruction is int64, not a string column" in problems
    assert "1 null condition value" in problems
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 not really")
    problems = inspect_path(tmp_path / "broken.parquet").problems
    assert problems and "not a readable Parquet file" in problems[0]


def test_tokenized_rows_are_recognised_and_decoded_with_a_tokenizer(tmp_path: Path) -> None:
    from tokenizers import Tokenizer

    ids = Tokenizer.from_file(str(BPE)).encode("hello world").ids
    write_rows(tmp_path / "sft.jsonl", [{"input_ids": ids, "labels": ids}])
    report = inspect_path(tmp_path / "sft.jsonl")
    assert report.ok and report.kind == "tokenized rows"
    assert report.samples == [f"{len(ids)} token ids (pass --tokenizer to decode)"]
    report = inspect_path(tmp_path / "sft.jsonl", tokenizer=str(BPE))
    assert report.samples == ["hello world"]


# -- tokenized folders ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tokenized(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from data_io.tokenize import tokenize
    from tests.conftest import EXAMPLE_ROWS

    out = tmp_path_factory.mktemp("inspect") / "tok"
    tokenize([EXAMPLE_ROWS], out, tokenizer_path=BPE, progress=False)
    return out


def test_tokenized_rows_show_boq_conditions_eoq_and_eoa(tokenized: Path) -> None:
    info = json.loads((tokenized / "tokenizer_info.json").read_text())
    assert (info["boq"], info["eoq"], info["eoa"]) == ("<|im_start|>", "<|im_end|>", "<|box_end|>")
    tags = tuple(f"<|im_start|>{tag}" for tag in info["condition_mapping"].values())
    report = inspect_path(tokenized, documents=3)
    assert report.ok, report.problems
    assert len(report.samples) == 3
    for sample in report.samples:
        assert sample.startswith(tags), sample  # BOQ, then a condition tag
        assert "<|im_end|>" in sample, sample  # EOQ
        assert sample.endswith("<|box_end|>"), sample  # EOA, kept from a long row's tail


def test_non_task_folders_of_a_tokenized_folder(tokenized: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "tok"
    shutil.copytree(tokenized, copy)
    (copy / "notes").mkdir()
    report = inspect_path(copy)
    assert report.ok and report.facts["tasks"] == 6
    assert any("notes (it has no metadata.json)" in note for note in report.notes)
    shutil.copytree(copy / "data__arithmetic.jsonl", copy / "stray")
    (copy / "stray" / "metadata.json").unlink()
    report = inspect_path(copy)
    assert report.facts["tasks"] == 6
    assert any(p.startswith(f"{copy / 'stray'}: task arrays, but") for p in report.problems)
    # A sample's output left inside (an older version, or the original tool, allowed it):
    # moved out, not re-tokenized.
    sampled = copy / "sampled"
    (sampled / "epoch_0").mkdir(parents=True)
    shutil.copy(copy / "data__arithmetic.jsonl" / "tokens.npy", sampled / "tokens.npy")
    (sampled / "metadata.json").write_text(json.dumps({"tokenizer_info": {}, "total_length": 9}))
    said = [p for p in inspect_path(copy).problems if p.startswith(f"{sampled}: ")]
    assert said == [
        f"{sampled}: a sampled folder (`data_io sample`'s output), not a task, inside the "
        "tokenized folder, whose sub-folders `data_io sample` reads as tasks (it refuses this "
        f"one); move it out of {copy} (a sample's output_path must lie outside tokenized_path)"
    ]


# -- packing caches ------------------------------------------------------------------------------
@pytest.fixture()
def packed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``data_io pack`` without a dataset_prepared_path: the plan goes to the cache folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    write_rows(tmp_path / "sft.jsonl", random_rows(1, 40, longest=50))
    config = {
        "data": {
            "datasets": [{"path": "sft.jsonl", "type": "tokenized", "max_seq_len": 32}],
            "sample_packing_method": "multipack",
            "sample_packing_sequence_len": 64,
        }
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    assert main(["pack", "config.yaml"]) == 0
    return tmp_path / "cache" / "data_io" / "prepared_rows"


def test_pack_writes_its_default_cache_beside_nothing_in_the_current_folder(
    packed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "config.yaml", "sft.jsonl"]
    plans = list(packed.iterdir())
    assert len(plans) == 1 and (plans[0] / "plan.json").is_file()
    assert main(["pack", "config.yaml"]) == 0
    assert f"cache: {plans[0]} (reused)" in capsys.readouterr().out
    # An explicit path still wins: the flag, then the config's own key.
    assert main(["pack", "config.yaml", "--dataset-prepared-path", "here"]) == 0
    assert (tmp_path / "here" / plans[0].name / "plan.json").is_file()
    config = yaml.safe_load((tmp_path / "config.yaml").read_text())
    config["data"]["dataset_prepared_path"] = "from_config"
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    assert main(["pack", "config.yaml"]) == 0
    assert (tmp_path / "from_config" / plans[0].name / "plan.json").is_file()


def test_a_packing_cache_is_recognised(packed: Path) -> None:
    report = inspect_path(packed)
    assert report.ok, report.problems
    assert report.kind.startswith("packing cache")
    [plan] = report.tables["plans"]
    assert plan["rows"] == 40 and plan["bins"] > 0 and plan["sources"] == "sft.jsonl"
    assert any("not tokens" in note for note in report.notes)
    folder = packed / plan["plan"]
    one = inspect_path(folder)
    assert one.ok and one.kind.startswith("packing plan") and one.facts["rows"] == 40
    np.save(folder / "bin_offsets.npy", np.array([0, 5, 3], dtype=np.int64))
    for report in (inspect_path(folder), inspect_path(packed)):
        assert any("arrays disagree with each other" in p for p in report.problems)
    (folder / "plan.json").write_text("{")
    assert "cached bin plan is unusable (plan.json: Expecting" in inspect_path(folder).problems[0]


def test_a_plan_the_loader_would_refuse_is_a_problem(packed: Path) -> None:
    """inspect said ok of a plan listing a row twice, or whose plan.json lost its counts;
    the loader refuses both (row_bins.read_cached_plan, which inspect now calls)."""
    [folder] = list(packed.iterdir())
    rows = np.load(folder / "bin_rows.npy")
    rows[0] = rows[1]
    np.save(folder / "bin_rows.npy", rows)
    (problem,) = inspect_path(folder).problems
    assert problem.startswith(f"{folder}: cached bin plan is unusable (bin_rows.npy does not ")
    assert "exactly once); delete the folder and it is rebuilt by the next" in problem
    (folder / "plan.json").write_text('{"version": 1}')
    problems = inspect_path(packed).problems
    assert any("plan.json lacks its longest, tokens, bins or sources" in p for p in problems)
    # What the loader refuses beyond what inspect checked before: counts below 0.
    (folder / "plan.json").write_text('{"version": 1, "longest": 3, "tokens": -5, "bins": 7}')
    assert not inspect_path(folder).ok


# -- flat shard folders --------------------------------------------------------------------------
def test_a_mixed_dtype_folder_is_reported_per_shard(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.arange(10, dtype=np.uint16))
    np.save(tmp_path / "b.npy", np.arange(7, dtype=np.uint32))
    np.save(tmp_path / "c.npy", np.arange(5, dtype=np.uint16))
    report = inspect_path(tmp_path)
    assert report.facts["dtype"] == "mixed"
    assert report.facts["dtypes"] == "uint16: 2 shards (a.npy, c.npy), uint32: 1 shard (b.npy)"
    assert [(row["shard"], row["dtype"]) for row in report.tables["shards"]] == [
        ("a.npy", "uint16"),
        ("b.npy", "uint32"),
        ("c.npy", "uint16"),
    ]
    assert report.facts["tokens"] == 22
    assert any("2 dtypes (uint16, uint32)" in note for note in report.notes)
    np.save(tmp_path / "b.npy", np.arange(7, dtype=np.uint16))
    assert inspect_path(tmp_path).facts["dtype"] == "uint16"


def test_one_bad_shard_hides_no_other(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.arange(10, dtype=np.uint16))
    (tmp_path / "b.npy").write_bytes(b"junk")
    np.save(tmp_path / "c.npy", np.zeros((2, 2), dtype=np.uint16))
    report = inspect_path(tmp_path)
    assert report.facts["shards"] == 1 and len(report.problems) == 2
    assert "b.npy" in report.problems[0] and "c.npy" in report.problems[1]


def test_unknown_folders_get_an_error_naming_only_inspects_own_options(tmp_path: Path) -> None:
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "notes.txt").write_text("x")
    report = inspect_path(tmp_path / "text")
    assert report.kind == "unknown folder" and len(report.problems) == 1
    assert "no .npy or .bin shard here" in report.problems[0]
    assert "file_pattern" not in report.problems[0]
    for path in (tmp_path / "nope", tmp_path / "text" / "notes.txt"):
        with pytest.raises(InputError, match="not a folder or a rows file") as info:
            inspect_path(path)
        assert "file_pattern" not in str(info.value)


def test_cli_prints_notes_and_json_carries_them(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.arange(10, dtype=np.uint16))
    np.save(tmp_path / "b.npy", np.arange(7, dtype=np.uint32))

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "data_io", "inspect", *args], cwd=REPO,
                              capture_output=True, text=True, check=False)  # fmt: skip

    shown = cli(str(tmp_path))
    assert shown.returncode == 0, shown.stderr
    assert "dtype: mixed" in shown.stdout and "note: " in shown.stdout
    data = json.loads(cli(str(tmp_path), "--json").stdout)
    assert data["ok"] and data["notes"] and data["facts"]["dtype"] == "mixed"
    rows = _jsonl(tmp_path / "r" / "x.jsonl", [json.dumps(_row(0, "direct,cot"))])
    shown = cli(str(rows))
    assert shown.returncode == 0 and "[direct,cot] question 0 → answer 0" in shown.stdout
