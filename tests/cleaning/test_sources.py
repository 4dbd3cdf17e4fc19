"""data_io.cleaning.sources: readers, listings, Hub copies, the Hub fallback."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pyarrow as pa
import pytest

from data_io.cleaning import (
    HubDataset,
    LocalFiles,
    parquet_batches,
    parquet_rows,
    read_csv_rows,
    read_json_object,
    read_text_lines,
    sources,
    tar_members,
)
from data_io.errors import InputError

from .upstream import REPO_ROOT, write_hub_copy, write_json, write_parquet


def _all(source, override=None) -> list:
    return [(record.file, record.index, record.data) for record in source.records(override)]


def test_listing_is_sorted_and_recursive(tmp_path: Path) -> None:
    for name in ("b/2.json", "a/z/3.json", "a/1.json", "c.json", "a/skip.txt"):
        write_json(tmp_path / name, {"name": name})
    source = LocalFiles("unused", reader=read_json_object, include=("**/*.json",))
    assert [file for file, _, _ in _all(source, tmp_path)] == [
        "a/1.json",
        "a/z/3.json",
        "b/2.json",
        "c.json",
    ]
    top = LocalFiles("unused", reader=read_json_object, include=("*.json",))
    assert [file for file, _, _ in _all(top, tmp_path)] == ["c.json"]


def test_text_csv_and_parquet_readers(tmp_path: Path) -> None:
    (tmp_path / "t.txt").write_bytes("q1\r\na1\nq2 é\na2".encode())
    text = LocalFiles("unused", reader=read_text_lines, include=("t.txt",))
    assert _all(text, tmp_path) == [
        ("t.txt", 1, "q1"),
        ("t.txt", 2, "a1"),
        ("t.txt", 3, "q2 é"),
        ("t.txt", 4, "a2"),
    ]
    (tmp_path / "s.csv").write_text('source,question,answer\nx,"a,b",1\ny,c,2\n')
    csv_source = LocalFiles("unused", reader=read_csv_rows, include=("s.csv",))
    assert [data for _, _, data in _all(csv_source, tmp_path)] == [
        {"source": "x", "question": "a,b", "answer": "1"},
        {"source": "y", "question": "c", "answer": "2"},
    ]
    write_parquet(tmp_path / "p.parquet", {"a": ["1", "2", "3"], "b": [1, 2, 3]})
    rows = LocalFiles("unused", reader=parquet_rows, include=("p.parquet",))
    assert _all(rows, tmp_path) == [
        ("p.parquet", i, {"a": str(i + 1), "b": i + 1}) for i in range(3)
    ]
    batches = LocalFiles("unused", reader=parquet_batches(2), include=("p.parquet",))
    got = list(batches.records(tmp_path))
    assert [(r.index, r.rows) for r in got] == [(0, 2), (2, 1)]
    assert got[0].where().endswith("p.parquet rows 0-1")


def test_bad_text_and_parquet_are_named(tmp_path: Path) -> None:
    (tmp_path / "t.txt").write_bytes(b"ok\n\xff\n")
    with pytest.raises(InputError, match=r"t\.txt: not valid UTF-8"):
        _all(LocalFiles("unused", reader=read_text_lines, include=("t.txt",)), tmp_path)
    (tmp_path / "p.parquet").write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(InputError, match=r"p\.parquet: not a readable Parquet file"):
        _all(LocalFiles("unused", reader=parquet_rows, include=("p.parquet",)), tmp_path)


LFS_POINTER = (
    b"version https://git-lfs.github.com/spec/v1\n"
    b"oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n"
)


@pytest.mark.parametrize(
    ("name", "reader"),
    [("t.txt", read_text_lines), ("o.json", read_json_object), ("p.parquet", parquet_rows)],
)
def test_a_git_lfs_pointer_is_named_as_one_in_every_format(tmp_path: Path, name, reader) -> None:
    # Read as text it would have given two rows of the pointer's lines.
    (tmp_path / name).write_bytes(LFS_POINTER)
    with pytest.raises(InputError, match=rf"{name}: it is a Git LFS pointer.*`git lfs pull`"):
        _all(LocalFiles("unused", reader=reader, include=(name,)), tmp_path)


def test_an_empty_file_is_no_rows_where_its_format_allows_and_named_where_not(
    tmp_path: Path,
) -> None:
    (tmp_path / "t.txt").write_bytes(b"")
    assert _all(LocalFiles("unused", reader=read_text_lines, include=("t.txt",)), tmp_path) == []
    for name, reader in (("o.json", read_json_object), ("p.parquet", parquet_rows)):
        (tmp_path / name).write_bytes(b"")
        with pytest.raises(InputError, match=rf"{name}: it is empty .*; re-download it$"):
            _all(LocalFiles("unused", reader=reader, include=(name,)), tmp_path)


@pytest.mark.parametrize("compress", [None, gzip.compress, bz2.compress, lzma.compress])
def test_tar_members_any_compression(tmp_path: Path, compress) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in (("a/keep.txt", b"one"), ("a/skip.json", b"{}"), ("b/keep.txt", b"two")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    raw = buffer.getvalue()
    path = tmp_path / "x.tar"
    path.write_bytes(compress(raw) if compress else raw)
    source = LocalFiles(str(path), reader=tar_members(keep=lambda name: name.endswith(".txt")))
    records = list(source.records())
    assert [(r.file, r.index, r.data.data) for r in records] == [
        ("a/keep.txt", 0, b"one"),
        ("b/keep.txt", 1, b"two"),
    ]
    assert records[1].where() == f"{path} member 1"


def test_single_file_and_folder_mismatch(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a folder; this source is a single file"):
        LocalFiles("x.tar.gz", reader=tar_members()).files(tmp_path)
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError, match="is not a folder; this source is a folder"):
        LocalFiles("dir", reader=read_text_lines, include=("*",)).files(tmp_path / "f")
    with pytest.raises(InputError, match=r"raw input not found: .*absent"):
        LocalFiles("dir", reader=read_text_lines, include=("*",)).files(tmp_path / "absent")


def test_hub_copy_all_splits_configs_and_batches(tmp_path: Path) -> None:
    root = write_hub_copy(
        tmp_path / "copy",
        {
            ("alpha", "train"): [{"x": "a0"}, {"x": "a1"}],
            ("alpha", "test"): [{"x": "a2"}],
            ("beta", "train"): [{"x": "b0"}],
        },
    )
    every = HubDataset("owner/name", splits=None, all_configs=True)
    assert _all(every, root) == [
        ("alpha/train", 0, {"x": "a0"}),
        ("alpha/train", 1, {"x": "a1"}),
        ("alpha/test", 0, {"x": "a2"}),
        ("beta/train", 0, {"x": "b0"}),
    ]
    batches = list(HubDataset("owner/name", config="alpha", batch_rows=5).records(root))
    assert len(batches) == 1 and isinstance(batches[0].data, pa.Table)
    assert batches[0].data.column("x").to_pylist() == ["a0", "a1"]
    missing_split = HubDataset("owner/name", config="alpha", splits=("validation",))
    with pytest.raises(
        InputError, match=r"cannot load config alpha, split validation of Hub dataset owner/name"
    ):
        _all(missing_split, root)


def test_arrow_batches_come_with_plain_string_columns(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    wide = pa.table({"x": pa.array(["a0", "a1"], pa.large_string()), "n": [1, 2]})
    pq.write_table(wide, tmp_path / "p.parquet")
    batches = LocalFiles("unused", reader=parquet_batches(5), include=("p.parquet",))
    (record,) = batches.records(tmp_path)
    assert record.data.schema == pa.schema([("x", pa.string()), ("n", pa.int64())])
    assert record.data.column("x").to_pylist() == ["a0", "a1"]
    # A local Hub copy that polars saved: datasets keeps its large_string.
    root = write_hub_copy(tmp_path / "copy", {("alpha", "train"): [{"x": "a0"}]})
    shard = root / "alpha" / "train-00000-of-00001.parquet"
    pq.write_table(pq.read_table(shard).cast(pa.schema([("x", pa.large_string())])), shard)
    (table,) = HubDataset("owner/name", config="alpha", batch_rows=5).records(root)
    assert table.data.schema.field("x").type == pa.string()


def _not_utf8(texts: list[bytes]) -> pa.Array:
    """A ``string`` array holding ``texts`` unchecked (as a Parquet writer that does not
    validate stores them)."""
    offsets = [0]
    for text in texts:
        offsets.append(offsets[-1] + len(text))
    return pa.Array.from_buffers(
        pa.string(),
        len(texts),
        [None, pa.array(offsets, pa.int32()).buffers()[1], pa.py_buffer(b"".join(texts))],
    )


def test_text_that_is_not_utf8_is_named_with_its_row(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    texts = _not_utf8([b"ok", b"fine", b"bad \xff\xfe"])
    pq.write_table(pa.table({"n": [1, 2, 3], "x": texts}), tmp_path / "p.parquet")
    batches = LocalFiles("unused", reader=parquet_batches(2), include=("p.parquet",))
    records = batches.records(tmp_path)
    assert next(records).rows == 2  # the first batch is clean
    with pytest.raises(InputError) as caught:
        next(records)
    assert str(caught.value).startswith(
        f"{tmp_path / 'p.parquet'} row 2: column 'x' holds text that is not valid UTF-8"
    )
    # A local Hub copy read record by record: an error naming the row, not a traceback.
    root = write_hub_copy(tmp_path / "copy", {("main", "train"): [{"question": "q"}]})
    shard = root / "main" / "train-00000-of-00001.parquet"
    pq.write_table(pa.table({"question": _not_utf8([b"q0", b"q\xc3"])}), shard)
    with pytest.raises(InputError, match=r"main/train row 1: column 'question' holds text that"):
        _all(HubDataset("openai/gsm8k", config="main"), root)


def test_text_inside_a_struct_or_list_column_is_checked_too(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from data_io.cleaning.sources import check_utf8

    bad = _not_utf8([b"ok", b"ok\xff\xfe"])
    meta = pa.StructArray.from_arrays([bad], names=["title"])
    tags = pa.ListArray.from_arrays(pa.array([0, 1, 2], pa.int32()), bad)
    for column in (meta, tags):
        with pytest.raises(InputError, match=r"f\.parquet row 11: column 'c' holds text that"):
            check_utf8(pa.table({"c": column}), "f.parquet", 10)
    check_utf8(pa.table({"n": [1, 2], "b": [b"\xff", b"\xfe"]}), "f.parquet", 0)  # no text
    # Read row by row, the struct's bad text is the same error, not a UnicodeDecodeError.
    pq.write_table(pa.table({"meta": meta}), tmp_path / "s.parquet")
    rows = LocalFiles("unused", reader=parquet_rows, include=("s.parquet",))
    with pytest.raises(InputError, match=r"s\.parquet row 1: column 'meta' holds text"):
        list(rows.records(tmp_path))


def test_hub_error_without_a_config_calls_it_default(tmp_path: Path) -> None:
    root = write_hub_copy(tmp_path / "copy", {("default", "train"): [{"x": "a"}]})
    with pytest.raises(InputError) as caught:
        _all(HubDataset("owner/name", splits=("validation",)), root)
    message = str(caught.value)
    assert "cannot load config default, split validation of Hub dataset owner/name" in message
    assert "None" not in message.split("\n", 1)[0]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError) as caught:
        _all(HubDataset("owner/name", splits=None), empty)
    message = str(caught.value)
    assert "cannot load config default of Hub dataset owner/name" in message
    assert "config None" not in message


def test_hub_without_copy_or_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    source = HubDataset("owner/absent", config="main")
    assert not source.present()
    with pytest.raises(InputError) as caught:
        _all(source)
    assert (
        "hf download owner/absent --repo-type dataset --local-dir raw_data/hub/owner/absent"
        in str(caught.value)
    )


def test_local_files_fetched_from_a_hub_repo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub

    calls = []

    def fake_download(repo_id, *, repo_type, allow_patterns, local_dir):
        calls.append((repo_id, repo_type, allow_patterns))
        Path(local_dir).mkdir(parents=True)
        (Path(local_dir) / "train.csv").write_text("q,a\n1,2\n")

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(sources, "hub_unreachable", lambda: None)  # a Hub that answers
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_download)
    source = LocalFiles(
        "raw_data/hub/o/r", reader=read_csv_rows, include=("train.csv",), hub_repo="o/r"
    )
    assert [data for _, _, data in _all(source)] == [{"q": "1", "a": "2"}]
    assert calls == [("o/r", "dataset", ["train.csv"])]
    assert _all(source) and len(calls) == 1  # the local copy is reused

    def offline(*args, **kwargs):
        raise OSError("offline")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    other = LocalFiles(
        "raw_data/hub/o/s",
        reader=read_csv_rows,
        include=("train.csv",),
        hub_repo="o/s",
        how_to_get="hf download o/s",
    )
    with pytest.raises(
        InputError, match=r"(?s)Hub repository o/s unreachable: offline.*hf download o/s"
    ):
        _all(other)
    assert not (tmp_path / "raw_data" / "hub" / "o" / "s").exists()
    # An unreachable Hub: no download is tried at all, and HF_HUB_OFFLINE=1 is suggested.
    monkeypatch.setattr(sources, "hub_unreachable", lambda: "http://hub does not answer")
    with pytest.raises(InputError) as caught:
        _all(other)
    message = str(caught.value)
    assert (
        "Hub repository o/s unreachable: http://hub does not answer; without network, set "
        in message
    )
    assert "HF_HUB_OFFLINE=1" in message and "hf download o/s" in message
    assert len(calls) == 1


def test_parquet_damaged_after_the_first_row_group(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    path = tmp_path / "p.parquet"
    table = pa.table({"a": [f"text {i} " * 50 for i in range(4)]})
    pq.write_table(table, path, row_group_size=2, compression="snappy", use_dictionary=False)
    column = pq.ParquetFile(path).metadata.row_group(1).column(0)
    start, size = column.data_page_offset, column.total_compressed_size
    data = bytearray(path.read_bytes())
    data[start + 40 : start + size - 1] = b"\xff" * (size - 41)  # the page body, not its header
    path.write_bytes(bytes(data))
    source = LocalFiles("unused", reader=parquet_batches(2), include=("p.parquet",))
    records = source.records(tmp_path)
    assert next(records).rows == 2
    with pytest.raises(InputError, match=r"p\.parquet: unreadable after row 2"):
        next(records)


# A damaged file in a local `hf download` copy: the error names that file and says what is wrong
# with it, and does not tell the user to download a copy that is already there.


def _gsm8k_copy(root: Path, rows: int = 3) -> Path:
    items = [{"question": f"q{i}", "answer": f"a #### {i}"} for i in range(rows)]
    return write_hub_copy(root, {("main", "train"): items})


def _local_copy_error(source: HubDataset, root: Path) -> str:
    with pytest.raises(InputError) as caught:
        _all(source, root)
    message = str(caught.value)
    assert "download it first" not in message and "To work without network" not in message
    return message


@pytest.mark.parametrize(
    ("damage", "diagnosis"),
    [
        (lambda data: data[: len(data) // 2], "truncated: its Parquet footer is missing"),
        (lambda data: b"", "it is empty"),
        (lambda data: b"version https://git-lfs.github.com/spec/v1\noid x\n", "Git LFS pointer"),
        (lambda data: b"<html>not found</html>", "not a Parquet file"),
    ],
)
def test_damaged_parquet_in_a_local_copy_is_named(tmp_path: Path, damage, diagnosis: str) -> None:
    root = _gsm8k_copy(tmp_path / "copy")
    bad = root / "main" / "train-00000-of-00001.parquet"
    bad.write_bytes(damage(bad.read_bytes()))
    message = _local_copy_error(HubDataset("openai/gsm8k", config="main"), root)
    assert message.startswith(
        f"{bad}: cannot read this file of the local copy of openai/gsm8k (config main, split train"
    )
    assert diagnosis in message
    assert (
        "hf download openai/gsm8k main/train-00000-of-00001.parquet --repo-type dataset "
        f"--local-dir {root}` fetches only that file"
    ) in message


def test_an_intact_parquet_file_of_no_rows_is_not_called_damaged(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    root = _gsm8k_copy(tmp_path / "copy")
    empty = root / "main" / "train-00000-of-00001.parquet"
    schema = pq.read_schema(empty)
    pq.write_table(schema.empty_table(), empty)
    message = _local_copy_error(HubDataset("openai/gsm8k", config="main"), root)
    assert message.startswith(f"{empty}: cannot read this file of the local copy")
    assert "an intact Parquet file of 0 rows" in message
    assert "If the split is meant to be empty, remove the file from the copy." in message
    assert "damaged" not in message and "Replace it" not in message


def test_damaged_second_shard_is_named_not_the_first(tmp_path: Path) -> None:
    root = _gsm8k_copy(tmp_path / "copy", rows=5)
    good = root / "main" / "train-00000-of-00001.parquet"
    second = root / "main" / "train-00001-of-00001.parquet"
    second.write_bytes(good.read_bytes()[:-10])
    message = _local_copy_error(HubDataset("openai/gsm8k", config="main"), root)
    assert message.startswith(f"{second}: cannot read this file")
    assert str(good) not in message


def test_malformed_json_lines_in_a_local_copy_name_the_file(tmp_path: Path) -> None:
    root = tmp_path / "copy"
    root.mkdir()
    (root / "README.md").write_text("---\nlicense: mit\n---\n")
    (root / "test.jsonl").write_text('{"q": "a"}\n{"q": broken\n', encoding="utf-8")
    message = _local_copy_error(HubDataset("o/r", splits=("test",)), root)
    assert message.startswith(f"{root / 'test.jsonl'}: cannot read this file of the local copy")
    assert "(config default, split test, after 0 rows)" in message
    assert "not valid JSONL" in message


def test_local_copy_without_the_split_says_to_check_the_copy(tmp_path: Path) -> None:
    root = _gsm8k_copy(tmp_path / "copy")
    message = _local_copy_error(
        HubDataset("openai/gsm8k", config="main", splits=("validation",)), root
    )
    assert "cannot load config main, split validation of Hub dataset openai/gsm8k" in message
    assert f"from the local copy {root}" in message
    assert f"Check that {root} is a complete copy of openai/gsm8k" in message


# Offline: one quick check, then the message; never the retry loop of datasets/huggingface_hub.


def _offline_run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipe.clean_gsm8k_train", "--quiet"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_unreachable_hub_fails_at_once_and_mentions_hf_hub_offline(tmp_path: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    }
    # Port 9 (discard) on this machine: refused at once, whatever network the test machine has.
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pipe.clean_gsm8k_train", "--quiet"],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(REPO_ROOT), "HF_ENDPOINT": "http://127.0.0.1:9"},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert time.monotonic() - started < 15  # generous: the retry loop alone takes ~20 s
    assert done.returncode == 1, done.stderr
    assert "Retrying" not in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.startswith(
        "clean gsm8k_train: error: Hub dataset openai/gsm8k: no local copy at "
        "raw_data/hub/openai/gsm8k, and the Hub cannot be used (http://127.0.0.1:9 does not answer"
    )
    assert "hf download openai/gsm8k --repo-type dataset --local-dir raw_data/hub/openai/gsm8k" in (
        done.stderr
    )
    assert "set HF_HUB_OFFLINE=1" in done.stderr
    assert not (tmp_path / "data").exists()


def test_hf_hub_offline_fails_without_any_request(tmp_path: Path) -> None:
    done = _offline_run(tmp_path, HF_HUB_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9")
    assert done.returncode == 1
    assert "the Hub cannot be used (HF_HUB_OFFLINE is set)" in done.stderr
    assert "does not answer" not in done.stderr  # no probe was made
    assert "set HF_HUB_OFFLINE=1" not in done.stderr  # it is set already


def test_local_copy_needs_no_hub(tmp_path: Path) -> None:
    _gsm8k_copy(tmp_path / "raw_data" / "hub" / "openai" / "gsm8k")
    env = {
        k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    }
    done = subprocess.run(
        [sys.executable, "-m", "pipe.clean_gsm8k_train"],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(REPO_ROOT), "HF_ENDPOINT": "http://127.0.0.1:9"},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "gsm8k_train: 3 records read, 3 rows written" in done.stdout
    assert "Retrying" not in done.stderr
