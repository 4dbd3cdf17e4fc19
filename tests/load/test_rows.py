"""Tokenized-row sources and TokenizedRowsDataset (unpacked), export-rows and the pack CLI.

Items are compared with rows re-derived by hand from what the fixture wrote; bad input is
checked for the error class and for the source, row and fix the message names.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import datasets
import huggingface_hub.constants
import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
import yaml
from torch.utils.data import DataLoader

from data_io.cli import main
from data_io.errors import ConfigError, InputError, OutputError
from data_io.load.build import rows_dataset_from_config
from data_io.load.datasets.row_checks import check_rows
from data_io.load.datasets.row_sources import RowSource, open_source
from data_io.load.datasets.rows_stream import StreamingTokenizedRowsDataset
from data_io.load.datasets.tokenized_rows import TokenizedRowsDataset
from data_io.load.export_rows import export_sampled_rows
from tests.conftest import logged_by_datasets
from tests.load.rows_fixture import random_rows, write_rows
from tests.sampled_fixture import write_sampled


@pytest.fixture()
def hf_cache(tmp_path: Path) -> str:
    return str(tmp_path / "hf_cache")


def build(tmp_path: Path, hf_cache: str, sources, **options) -> TokenizedRowsDataset:
    options.setdefault("dataset_prepared_path", tmp_path / "prepared")
    return TokenizedRowsDataset(sources, cache_dir=hf_cache, **options)


def unpacked_oracle(row: dict, width: int, limit: int | None = None) -> dict[str, list[int]]:
    ids, labels = row["input_ids"][:limit], row["labels"][:limit]
    n = len(ids)
    pad = width - n
    return {
        "input_ids": ids + [0] * pad,
        "labels": labels + [-100] * pad,
        "position_ids": list(range(n)) + list(range(pad)),
        "cu_seqlens": [0, n] + ([width] if pad else []),
    }


def as_lists(item: dict[str, torch.Tensor]) -> dict[str, list]:
    return {k: v.tolist() for k, v in item.items()}


# -- formats and locations --------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet", ".csv", ".arrow"])
def test_every_format_gives_the_rows_in_order(tmp_path: Path, hf_cache: str, suffix: str) -> None:
    rows = random_rows(1, 25)
    path = write_rows(tmp_path / f"rows{suffix}", rows)
    ds = build(tmp_path, hf_cache, [{"path": str(path)}], shuffle=False)
    width = max(len(r["input_ids"]) for r in rows)
    assert len(ds) == 25 and ds.item_length == width
    for i, row in enumerate(rows):
        assert as_lists(ds[i]) == unpacked_oracle(row, width)
    assert ds[0]["cu_seqlens"].dtype == torch.int32
    assert all(ds[3][k].dtype == torch.int64 for k in ("input_ids", "labels", "position_ids"))


def test_saved_dataset_and_dataset_dict_split(tmp_path: Path, hf_cache: str) -> None:
    train, test = random_rows(2, 7), random_rows(3, 4)
    datasets.Dataset.from_list(train).save_to_disk(str(tmp_path / "saved"))
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(train), "test": datasets.Dataset.from_list(test)}
    ).save_to_disk(str(tmp_path / "dict"))
    one = open_source(RowSource(str(tmp_path / "saved")))
    assert one["input_ids"] == [r["input_ids"] for r in train]
    split = open_source(RowSource(str(tmp_path / "dict"), split="test"))
    assert split["labels"] == [r["labels"] for r in test]
    with pytest.raises(InputError, match=r"no split 'validation' \(splits: train, test\)"):
        open_source(RowSource(str(tmp_path / "dict"), split="validation"))


def test_damaged_saved_dataset_is_reported_not_read_as_loose_files(tmp_path: Path) -> None:
    folder = tmp_path / "saved"
    datasets.Dataset.from_list(random_rows(2, 5)).save_to_disk(str(folder))
    (folder / "state.json").write_text("{not json")
    with pytest.raises(InputError, match=r"save_to_disk.*cannot be opened"):
        open_source(RowSource(str(folder)))


def test_folder_discovery_and_data_files(tmp_path: Path, hf_cache: str) -> None:
    a, b = random_rows(4, 6), random_rows(5, 3)
    write_rows(tmp_path / "dir" / "part_b.parquet", b)
    write_rows(tmp_path / "dir" / "sub" / "part_a.parquet", a)
    (tmp_path / "dir" / "README.md").write_text("not data")
    every = open_source(RowSource(str(tmp_path / "dir")), cache_dir=hf_cache)
    assert sorted(every["input_ids"]) == sorted(r["input_ids"] for r in a + b)
    only = open_source(
        RowSource(str(tmp_path / "dir"), data_files=["part_b.parquet"]), cache_dir=hf_cache
    )
    assert only["input_ids"] == [r["input_ids"] for r in b]
    with pytest.raises(InputError, match=r"data_files not found.*nope\.parquet"):
        open_source(RowSource(str(tmp_path / "dir"), data_files=["nope.parquet"]))


def test_folder_problems(tmp_path: Path, hf_cache: str) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"holds no \.jsonl, \.json, \.parquet, \.csv, \.arrow"):
        open_source(RowSource(str(tmp_path / "empty")))
    write_rows(tmp_path / "mixed" / "a.jsonl", random_rows(1, 2))
    write_rows(tmp_path / "mixed" / "b.parquet", random_rows(2, 2))
    with pytest.raises(InputError, match="files of different formats"):
        open_source(RowSource(str(tmp_path / "mixed")), cache_dir=hf_cache)


def test_offline_hub_id_says_how_to_use_a_local_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(InputError) as err:
        open_source(RowSource("someorg/some-rows", split="train_sft", revision="abc123"))
    message = str(err.value)
    assert "'someorg/some-rows'" in message and "hf download someorg/some-rows" in message


# -- bad input --------------------------------------------------------------------------------
def bad(tmp_path: Path, rows: list[dict], suffix: str = ".jsonl") -> RowSource:
    path = write_rows(tmp_path / f"bad{suffix}", rows)
    return RowSource(str(path), metrics_name="bad")


def check(source: RowSource, cache: str):
    return check_rows(source, open_source(source, cache_dir=cache))


@pytest.mark.parametrize(
    ("rows", "pattern"),
    [
        (
            [{"input_ids": [1, 2], "labels": [1, 2]}, {"input_ids": [1, 2, 3], "labels": [1, 2]}],
            r"source 'bad' row 1: 3 input_ids but 2 labels",
        ),
        (
            [{"input_ids": [1], "labels": [1]}] * 3 + [{"input_ids": [1, -4], "labels": [1, 1]}],
            r"row 3: a negative token id",
        ),
        (
            [{"input_ids": [1, 2], "labels": [-100, 2]}, {"input_ids": [5], "labels": [-1]}],
            r"row 1: a negative label other than -100",
        ),
        ([{"input_ids": [1], "labels": [1]}, {"input_ids": [], "labels": []}], r"row 1: .*empty"),
        ([{"input_ids": [1.5, 2.0], "labels": [1, 2]}], r"holds double values, not integers"),
        (  # one float makes the whole column double: the row is the one holding it
            [{"input_ids": [1, 2], "labels": [1, 2]}] * 4
            + [{"input_ids": [1, 3.5], "labels": [1, 2]}],
            r"row 4: column 'input_ids' holds double values, not integers",
        ),
        (  # one string makes it JSON text
            [{"input_ids": [1, 2], "labels": [1, 2]}] * 3
            + [{"input_ids": [1, "x"], "labels": [1, 2]}],
            r"row 3: column 'input_ids' holds .*json.* values, not integers",
        ),
        (
            [{"input_ids": 5, "labels": [1]}],
            r"row 0: column 'input_ids' has type int64, not a list",
        ),
        (
            [{"input_ids": "1 2 3", "labels": [1]}],
            r"row 0: column 'input_ids' holds '1 2 3', not a JSON",
        ),
        (
            [{"input_ids": [1], "labels": [1]}, {"input_ids": None, "labels": [1]}],
            r"row 1: column 'input_ids' is null",
        ),
        (
            [{"input_ids": [1, 2], "labels": [1, 2]}, {"input_ids": [1, None], "labels": [1, 2]}],
            r"row 1: column 'input_ids' holds a null",
        ),
    ],
)
def test_bad_rows_name_source_and_row(tmp_path: Path, hf_cache: str, rows, pattern) -> None:
    with pytest.raises(InputError, match=pattern):
        check(bad(tmp_path, rows), hf_cache)


def test_bad_row_in_a_later_record_batch_names_the_absolute_row(
    tmp_path: Path, hf_cache: str
) -> None:
    rows = [{"input_ids": [1, 2], "labels": [1, 2]}] * 70_000
    rows[68_123] = {"input_ids": [1, 2], "labels": [2]}
    with pytest.raises(InputError, match=r"row 68123: 2 input_ids but 1 labels"):
        check(bad(tmp_path, rows, ".parquet"), hf_cache)


def test_missing_column_unknown_extension_empty_and_missing(tmp_path: Path, hf_cache: str) -> None:
    with pytest.raises(InputError, match=r"no column 'labels' \(columns: input_ids, text\)"):
        check(bad(tmp_path, [{"input_ids": [1], "text": "x"}]), hf_cache)
    with pytest.raises(InputError, match=r"unknown file extension '\.txt'; accepted: \.jsonl"):
        open_source(RowSource(str(write_rows(tmp_path / "rows.txt", random_rows(1, 2)))))
    empty = tmp_path / "empty.parquet"
    pq.write_table(datasets.Dataset.from_list(random_rows(1, 2)).data.table.slice(0, 0), empty)
    with pytest.raises(InputError, match="holds no rows"):
        open_source(RowSource(str(empty)), cache_dir=hf_cache)
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(InputError, match=r"empty\.jsonl holds no rows"):
        open_source(RowSource(str(tmp_path / "empty.jsonl")), cache_dir=hf_cache)
    (tmp_path / "blank.jsonl").write_text("\n\n")
    with pytest.raises(InputError, match=r"cannot read .*blank\.jsonl.*corresponds to no data"):
        open_source(RowSource(str(tmp_path / "blank.jsonl")), cache_dir=hf_cache)
    with pytest.raises(InputError, match=r"does not exist"):
        open_source(RowSource(str(tmp_path / "absent.jsonl")))
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"input_ids": [1], "labels": [1]}\n{"input_ids": [\n')
    with (
        logged_by_datasets() as logged,
        pytest.raises(InputError, match=r"cannot read .*broken\.jsonl"),
    ):
        open_source(RowSource(str(broken)), cache_dir=hf_cache)
    # Said once, in the error: not also as datasets' own "Failed to load JSON" log line.
    assert logged == []
    with pytest.raises(InputError, match="unsupported URL scheme"):
        open_source(RowSource("ftp://host/rows.jsonl"))


def test_csv_cell_that_is_not_a_list(tmp_path: Path, hf_cache: str) -> None:
    path = tmp_path / "rows.csv"
    path.write_text('input_ids,labels\n"[1, 2]","[1, 2]"\n"[3, oops]","[3, 4]"\n')
    with pytest.raises(InputError, match=r"row 1: column 'input_ids' holds '\[3, oops\]'"):
        open_source(RowSource(str(path)), cache_dir=hf_cache)


@pytest.mark.parametrize(
    ("fields", "pattern"),
    [
        ({"path": "x.jsonl", "type": "text"}, "type 'text' is not supported; only 'tokenized'"),
        ({"path": "x.jsonl", "max_seq_len": 0}, "'max_seq_len' must be a positive integer"),
        ({"path": "x.jsonl", "select_columns": ["input_ids"]}, "must include labels"),
        ({"path": "x.jsonl", "trust_remote_cod": True}, r"unknown key\(s\) 'trust_remote_cod'"),
        (
            {"path": "x.jsonl", "trust_remote_code": "yes"},
            "'trust_remote_code' must be true or false",
        ),
        ({"path": "x.jsonl", "name": ""}, "'name' must be a non-empty string"),
        ({"split": "train"}, "missing 'path'"),
        ({"path": ""}, "'path' must be a non-empty string"),
        ({"path": "x.jsonl", "storage_options": "anon"}, "'storage_options' must be a mapping"),
    ],
)
def test_bad_source_options(fields: dict, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        RowSource.from_mapping(fields, "datasets[0]")


def test_split_other_than_train_for_files(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "rows.jsonl", random_rows(1, 3))
    with pytest.raises(ConfigError, match="split 'test' applies to Hub datasets"):
        open_source(RowSource(str(path), split="test"))


# -- the dataset --------------------------------------------------------------------------------
def test_truncation_is_applied_and_counted(tmp_path: Path, hf_cache: str) -> None:
    rows = random_rows(7, 40, longest=30)
    path = write_rows(tmp_path / "rows.parquet", rows)
    ds = build(tmp_path, hf_cache, [{"path": str(path), "max_seq_len": 12}], shuffle=False)
    lengths = [len(r["input_ids"]) for r in rows]
    summary = ds.summary()
    assert summary["truncated_rows"] == sum(n > 12 for n in lengths)
    assert summary["truncated_tokens"] == sum(max(0, n - 12) for n in lengths)
    assert summary["tokens"] == sum(min(n, 12) for n in lengths)
    assert ds.item_length == min(12, max(lengths))
    for i, row in enumerate(rows):
        assert as_lists(ds[i]) == unpacked_oracle(row, ds.item_length, 12)
    json.dumps(summary)  # plain JSON-able values


def test_sources_are_concatenated_and_shuffled_with_the_seed(tmp_path: Path, hf_cache: str) -> None:
    a = write_rows(tmp_path / "a.jsonl", random_rows(1, 20))
    b = write_rows(tmp_path / "b.parquet", random_rows(2, 15))
    sources = [{"path": str(a)}, {"path": str(b), "metrics_name": "second"}]
    first = build(tmp_path, hf_cache, sources, seed=3)
    tags = [first[i]["input_ids"][0].item() for i in range(len(first))]
    expected = [r["input_ids"][0] for r in random_rows(1, 20) + random_rows(2, 15)]
    assert sorted(tags) == sorted(expected) and tags != expected
    again = build(tmp_path, hf_cache, sources, seed=3)
    assert [again[i]["input_ids"][0].item() for i in range(len(again))] == tags
    other = build(tmp_path, hf_cache, sources, seed=4)
    assert [other[i]["input_ids"][0].item() for i in range(len(other))] != tags
    assert [s["name"] for s in first.summary()["sources"]] == [str(a), "second"]


def test_fingerprint_follows_data_and_options(tmp_path: Path, hf_cache: str) -> None:
    path = write_rows(tmp_path / "a.jsonl", random_rows(1, 10))
    base = build(tmp_path, hf_cache, [{"path": str(path)}]).fingerprint()
    assert build(tmp_path, hf_cache, [{"path": str(path)}]).fingerprint() == base
    assert build(tmp_path, hf_cache, [{"path": str(path)}], seed=1).fingerprint() != base
    capped = [{"path": str(path), "max_seq_len": 5}]
    assert build(tmp_path, hf_cache, capped).fingerprint() != base
    write_rows(path, random_rows(1, 11))
    assert build(tmp_path, hf_cache, [{"path": str(path)}]).fingerprint() != base


def test_extra_columns_travel_with_the_rows(tmp_path: Path, hf_cache: str) -> None:
    rows = random_rows(3, 12)
    for r in rows:
        r["advantages"] = [0.25 * k for k in range(len(r["input_ids"]))]
    path = write_rows(tmp_path / "rl.parquet", rows)
    columns = ["input_ids", "labels", "advantages"]
    ds = build(tmp_path, hf_cache, [{"path": str(path), "select_columns": columns}], shuffle=False)
    for i, r in enumerate(rows):
        item = ds[i]
        assert item["advantages"].dtype == torch.float32
        n = len(r["input_ids"])
        assert item["advantages"][:n].tolist() == r["advantages"]
        assert not item["advantages"][n:].any()
    rows[5]["advantages"] = [*rows[5]["advantages"][:-1], 0.0, 1.0]
    write_rows(path, rows)
    with pytest.raises(InputError, match=r"row 5: selected column 'advantages' has"):
        build(tmp_path, hf_cache, [{"path": str(path), "select_columns": columns}])
    plain = write_rows(tmp_path / "plain.jsonl", random_rows(4, 3))
    with pytest.raises(ConfigError, match="select_columns differ between sources"):
        build(tmp_path, hf_cache, [{"path": str(path), "select_columns": columns}, str(plain)])


def test_pickles_small_and_works_in_dataloader_workers(tmp_path: Path, hf_cache: str) -> None:
    path = write_rows(tmp_path / "a.parquet", random_rows(9, 3000, longest=60))
    ds = build(tmp_path, hf_cache, [{"path": str(path)}])
    blob = pickle.dumps(ds)
    assert len(blob) < 20_000  # neither the rows nor the plan travel
    clone = pickle.loads(blob)
    assert all(torch.equal(clone[i]["input_ids"], ds[i]["input_ids"]) for i in (0, 17, 2999))
    # cu_seqlens varies in length, so items are collated by the caller (here: kept as a list).
    loader = DataLoader(ds, batch_size=100, num_workers=2, collate_fn=list)
    batches = list(loader)
    assert sum(len(b) for b in batches) == 3000
    assert torch.equal(batches[3][7]["labels"], ds[307]["labels"])


@pytest.mark.parametrize(
    ("options", "pattern"),
    [
        ({"sample_packing_method": "greedy", "sample_packing_sequence_len": 8}, "must be one of"),
        ({"sample_packing_method": "multipack"}, "needs sample_packing_sequence_len"),
        ({"sample_packing_sequence_len": 8}, "sample_packing_method is null"),
        ({"sample_packing_method": "sequential", "sample_packing_sequence_len": 0}, "positive"),
        (
            {"sample_packing_method": "sequential", "sample_packing_sequence_len": 10**12},
            r"sample_packing_sequence_len=1000000000000 is more than 2147483647 \(2\*\*31 - 1\)",
        ),
        (
            {"sample_packing_method": "multipack", "sample_packing_sequence_len": 2**31},
            r"sample_packing_sequence_len=2147483648 is more than 2147483647 .* context length",
        ),
        ({"seed": -1}, "seed must be a non-negative integer"),
    ],
)
def test_bad_dataset_options(tmp_path: Path, options: dict, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        TokenizedRowsDataset([{"path": str(tmp_path / "x.jsonl")}], **options)


def test_the_longest_bin_is_accepted_one_more_is_refused(tmp_path: Path, hf_cache: str) -> None:
    """The limit itself passes the option check (only a plan is made, no item of that size);
    the streaming dataset refuses past it too, before it opens any source."""
    path = write_rows(tmp_path / "a.jsonl", random_rows(1, 4))
    ds = TokenizedRowsDataset(
        [{"path": str(path)}],
        sample_packing_method="sequential",
        sample_packing_sequence_len=2**31 - 1,
        cache_dir=hf_cache,
        dataset_prepared_path=None,
    )
    assert ds.summary()["sample_packing_sequence_len"] == 2**31 - 1
    with pytest.raises(ConfigError, match=r"sample_packing_sequence_len=2147483648 is more than"):
        StreamingTokenizedRowsDataset(
            [{"path": str(tmp_path / "missing.jsonl")}], sample_packing_sequence_len=2**31
        )


def test_index_checks(tmp_path: Path, hf_cache: str) -> None:
    ds = build(tmp_path, hf_cache, [str(write_rows(tmp_path / "a.jsonl", random_rows(1, 4)))])
    assert torch.equal(ds[-1]["input_ids"], ds[3]["input_ids"])
    with pytest.raises(IndexError, match="out of range for 4 items"):
        ds[4]
    with pytest.raises(TypeError):
        ds["0"]


# -- export of a sampled folder -----------------------------------------------------------------
@pytest.mark.parametrize("split_response", [False, True])
def test_export_matches_a_numpy_rederivation(tmp_path: Path, split_response: bool) -> None:
    sampled = write_sampled(
        tmp_path / "sampled", n_rows=60, epochs=2, split_response=split_response
    )
    out = tmp_path / "out" / "rows.parquet"
    done = export_sampled_rows(sampled.path, out, epoch=1)
    table = pq.read_table(out).to_pylist()
    # Oracle from the epoch arrays on disk, numpy slices of the pool, one row at a time.
    edir = sampled.path / "epoch_1"
    ist, il, rst, rl = (
        np.load(edir / f"{n}.npy") for n in ("inst_start", "inst_len", "resp_start", "resp_len")
    )
    pool = np.load(sampled.path / "tokens.npy").astype(np.int64)
    assert len(table) == len(il) == done["rows"]
    for k, got in enumerate(table):
        inst = pool[ist[k] : ist[k] + il[k]].tolist()
        resp = pool[rst[k] : rst[k] + rl[k]].tolist()
        assert got["input_ids"] == inst + resp
        assert got["labels"] == [-100] * len(inst) + resp
        # and the fixture's own record of which pool row this is
        r = int(sampled.epochs[1][k])
        assert inst == sampled.inst[r] and resp == sampled.resp[r]
    assert done["supervised_tokens"] == int(rl.sum())
    assert not list(out.parent.glob(".*tmp"))


def test_exported_rows_load_as_a_source(tmp_path: Path, hf_cache: str) -> None:
    sampled = write_sampled(tmp_path / "sampled", n_rows=30, epochs=1)
    out = export_sampled_rows(sampled.path, tmp_path / "rows.parquet")["output"]
    ds = build(tmp_path, hf_cache, [out], shuffle=False)
    r = int(sampled.epochs[0][0])
    n = len(sampled.inst[r]) + len(sampled.resp[r])
    assert ds[0]["input_ids"][:n].tolist() == sampled.inst[r] + sampled.resp[r]


def test_export_bad_input(tmp_path: Path) -> None:
    sampled = write_sampled(tmp_path / "sampled", n_rows=10, epochs=1)
    with pytest.raises(InputError, match=r"epoch 3 was not sampled"):
        export_sampled_rows(sampled.path, tmp_path / "x.parquet", epoch=3)
    with pytest.raises(ConfigError, match=r"ending in \.parquet"):
        export_sampled_rows(sampled.path, tmp_path / "x.jsonl")
    with pytest.raises(InputError, match="no such sampled folder"):
        export_sampled_rows(tmp_path / "nothing", tmp_path / "x.parquet")
    assert not (tmp_path / "x.parquet").exists()


def test_export_errors_name_the_folder_and_the_right_fix(tmp_path: Path) -> None:
    """A folder in the way of the output was reported as "check the space"; an id outside the
    vocabulary named "tokens.npy" without its folder or epoch."""
    sampled = write_sampled(tmp_path / "sampled", n_rows=10, epochs=1, vocab_size=4096)
    (tmp_path / "dir.parquet").mkdir()
    with pytest.raises(OutputError, match=r"EISDIR\]; the path is a folder where a file was"):
        export_sampled_rows(sampled.path, tmp_path / "dir.parquet")
    pool = np.load(sampled.path / "tokens.npy")
    pool[0] = 4095 + 1  # the fixture's vocabulary is 4096 ids
    np.save(sampled.path / "tokens.npy", pool)
    with pytest.raises(InputError, match=rf"^{sampled.path / 'epoch_0'}: tokens.npy: epoch row"):
        export_sampled_rows(sampled.path, tmp_path / "x.parquet")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.parquet", "sampled"]


def test_export_rows_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sampled = write_sampled(tmp_path / "sampled", n_rows=10, epochs=1)
    out = tmp_path / "rows.parquet"
    assert main(["export-rows", str(sampled.path), "-o", str(out)]) == 0
    assert "10 rows of epoch 0" in capsys.readouterr().out
    assert pq.read_metadata(out).num_rows == 10
    assert main(["export-rows", str(sampled.path), "-o", str(out), "--epoch", "5"]) == 1
    assert "epoch 5 was not sampled" in capsys.readouterr().err


# -- data_io pack ---------------------------------------------------------------------------------
def test_pack_cli_writes_then_reuses_the_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_rows(tmp_path / "sft.jsonl", random_rows(1, 40, longest=50))
    write_rows(tmp_path / "more.parquet", random_rows(2, 25))
    config = {
        "model": {"name": "ignored"},
        "data": {
            "datasets": [
                {"path": "sft.jsonl", "type": "tokenized", "max_seq_len": 32},
                {"path": "more.parquet", "type": "tokenized", "max_seq_len": 16},
            ],
            "select_columns": ["input_ids", "labels"],
            "sample_packing_method": "multipack",
            "sample_packing_sequence_len": 64,
            "dataset_prepared_path": "prep",
        },
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    assert main(["pack", "config.yaml"]) == 0
    out = capsys.readouterr().out
    assert "rows: 65" in out and "(written)" in out and "fill ratio" in out
    folder = next((tmp_path / "prep").iterdir())
    assert (folder / "bin_rows.npy").is_file() and (folder / "plan.json").is_file()
    assert main(["pack", "config.yaml", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["cache_reused"] and summary["cache"] == f"prep/{folder.name}"
    ds = rows_dataset_from_config(config["data"])
    assert ds.cache_reused and ds.cache_key == folder.name


def test_pack_cli_bad_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"data": {"datasets": [{"path": "x"}], "sample_pack": 1}}))
    assert main(["pack", str(path)]) == 1
    assert "'sample_pack' not in 'DataConfig'" in capsys.readouterr().err
    path.write_text("datasets: []\n")
    assert main(["pack", str(path)]) == 1
    assert "no data.datasets" in capsys.readouterr().err
    path.write_text(yaml.safe_dump({"data": {"datasets": []}}))
    assert main(["pack", str(path)]) == 1
    assert "no data.datasets" in capsys.readouterr().err


def test_fingerprint_survives_a_cleared_datasets_cache(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "a.jsonl", random_rows(1, 10))
    one = build(tmp_path, str(tmp_path / "cache_one"), [str(path)])
    two = build(tmp_path, str(tmp_path / "cache_two"), [str(path)])
    assert one.fingerprint() == two.fingerprint() and two.cache_reused


def test_hub_id_fails_at_once_when_the_hub_does_not_answer(monkeypatch: pytest.MonkeyPatch):
    from data_io.util import hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(hub, "_probe", lambda url: f"{url} does not answer")
    with pytest.raises(InputError, match=r"Hub is not reachable .*does not answer") as err:
        open_source(RowSource("someorg/some-rows", split="train"))
    assert "HF_HUB_OFFLINE=1" in str(err.value)


# -- the vocabulary the config declares is honoured -------------------------------------------
def test_vocab_size_refuses_out_of_vocabulary_ids(tmp_path: Path, hf_cache: str) -> None:
    rows = random_rows(2, 30, vocab=900)  # row tags are 12,000 + r: above any small vocabulary
    path = write_rows(tmp_path / "rows.jsonl", rows)
    with pytest.raises(
        InputError, match=r"row 0: input_ids holds id 12000, not below vocab_size=1000"
    ):
        build(tmp_path, hf_cache, [str(path)], vocab_size=1000)
    clean = [
        {"input_ids": r["input_ids"][1:] or [1], "labels": r["labels"][1:] or [1]} for r in rows
    ]
    ok = build(tmp_path, hf_cache, [str(write_rows(tmp_path / "ok.jsonl", clean))], vocab_size=1000)
    assert ok.summary()["vocab_size"] == 1000 and len(ok) == 30
    bad_label = [{"input_ids": [1, 2], "labels": [-100, 5000]}]
    with pytest.raises(InputError, match=r"row 0: labels holds id 5000"):
        build(
            tmp_path,
            hf_cache,
            [str(write_rows(tmp_path / "lab.jsonl", bad_label))],
            vocab_size=1000,
        )


def test_config_vocab_size_reaches_tokenized_rows(tmp_path: Path, hf_cache: str) -> None:
    """data.vocab_size was accepted and ignored for tokenized-row sources."""
    path = write_rows(tmp_path / "rows.jsonl", random_rows(3, 10))
    data = {"datasets": [{"path": str(path), "type": "tokenized"}], "vocab_size": 64,
            "dataset_prepared_path": str(tmp_path / "prep")}  # fmt: skip
    with pytest.raises(InputError, match=r"not below vocab_size=64"):
        rows_dataset_from_config(data)


@pytest.mark.parametrize(
    ("url", "package", "extra"),
    [("gs://bucket/rows.jsonl", "gcsfs", "gcs"), ("abfs://box/rows/", "adlfs", "azure")],
)
def test_missing_remote_backend_names_the_extra(tmp_path, hf_cache, url, package, extra) -> None:
    """Not a bare ImportError from deep inside datasets: the package and the extra to install."""
    import importlib.util

    if importlib.util.find_spec(package) is not None:  # installed here: the message cannot show
        pytest.skip(f"{package} is installed")
    with pytest.raises(ConfigError, match=rf"needs {package} .*pip install 'data_io\[{extra}\]'"):
        build(tmp_path, hf_cache, [url])


def test_no_datasets_progress_or_logs_off_a_terminal(tmp_path: Path) -> None:
    """Run with stderr to a pipe (a log file, CI): datasets' bars and "Generating ..." lines
    would only fill the log."""
    import subprocess
    import sys

    path = write_rows(tmp_path / "rows.jsonl", random_rows(4, 50))
    script = (
        "import sys\n"
        "from data_io.load.datasets.tokenized_rows import TokenizedRowsDataset\n"
        "ds = TokenizedRowsDataset([sys.argv[1]], dataset_prepared_path=sys.argv[2],\n"
        "                          cache_dir=sys.argv[3])\n"
        "print(len(ds))\n"
    )
    argv = [str(path), str(tmp_path / "prep"), str(tmp_path / "hf")]
    done = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True,
                          check=True, cwd=Path(__file__).resolve().parents[2])  # fmt: skip
    assert done.stdout.strip() == "50"
    assert "Generating" not in done.stderr and "it/s" not in done.stderr, done.stderr


def test_resume_identity_is_content_not_place(tmp_path: Path, hf_cache: str) -> None:
    """A byte-identical copy elsewhere resumes; rows with the same lengths but other ids do not
    (the cache key still covers paths and times, so each copy is planned once)."""
    from data_io.load import StatefulLoader
    from data_io.load.order.samplers import ShuffledOrder

    rows = random_rows(5, 40)
    first = write_rows(tmp_path / "node1" / "rows.jsonl", rows)
    copy = write_rows(tmp_path / "node2" / "rows.jsonl", rows)
    other = [{"input_ids": [i + 1 for i in r["input_ids"]], "labels": r["labels"]} for r in rows]
    changed = write_rows(tmp_path / "node3" / "rows.jsonl", other)

    def loader(path: Path) -> StatefulLoader:
        ds = build(tmp_path, hf_cache, [str(path)])
        return StatefulLoader(ds, ShuffledOrder(len(ds), seed=2), batch_size=4)

    saved = loader(first)
    it = iter(saved)
    next(it)
    state = saved.state_dict()
    resumed = loader(copy)
    resumed.load_state_dict(state)
    reference = list(loader(first))
    got = list(resumed)
    assert len(got) == len(reference) - 1
    assert all(
        torch.equal(a["input_ids"], b["input_ids"]) for a, b in zip(got, reference[1:], strict=True)
    )
    with pytest.raises(ConfigError, match=r"saved for other data"):
        loader(changed).load_state_dict(state)


def test_options_without_the_pass_through_keys_are_those_of_earlier_versions() -> None:
    # The fingerprint (loader states, plan caches) of an entry that sets none of the keys added
    # for xorl's load_dataset pass-through is what it was before they existed.
    assert set(RowSource(path="rows.jsonl").options()) == {
        "path", "split", "data_files", "revision", "select_columns", "max_seq_len", "name", "type",
    }  # fmt: skip
    assert (
        RowSource(path="rows.jsonl", metrics_name="a").options()
        == RowSource(path="rows.jsonl").options()
    )
    assert RowSource(path="d", data_dir="sub").options()["data_dir"] == "sub"
