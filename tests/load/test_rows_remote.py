"""Remote tokenized-row sources against real servers on 127.0.0.1 (no other network).

An S3-compatible server (moto in server mode) for ``s3://`` paths through s3fs, and a plain
``http.server`` for the ``https://``-style path (``http://`` here: no certificate to make).
"""

from __future__ import annotations

import functools
import http.server
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import moto.server as moto_server
import pytest
import s3fs

from data_io.errors import InputError
from data_io.load.datasets.row_checks import check_rows
from data_io.load.datasets.row_sources import RowSource, open_source
from data_io.load.datasets.tokenized_rows import TokenizedRowsDataset
from tests.load.rows_fixture import random_rows, write_rows


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def s3() -> Iterator[dict]:
    """A moto S3 server and the storage_options that reach it."""
    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    options = {"key": "testing", "secret": "testing", "endpoint_url": f"http://127.0.0.1:{port}"}
    try:
        yield options
    finally:
        server.stop()


@pytest.fixture()
def bucket(s3: dict, request: pytest.FixtureRequest) -> str:
    fs = s3fs.S3FileSystem(**s3)
    plain = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())  # test[param] too
    name = "rows-" + plain[:40].strip("-")
    fs.mkdir(name)
    return name


def upload(s3: dict, local: Path, remote: str) -> None:
    s3fs.S3FileSystem(**s3).put(str(local), remote)


def test_s3_parquet_file_and_jsonl_folder(tmp_path: Path, s3: dict, bucket: str) -> None:
    a, b = random_rows(1, 30), random_rows(2, 12)
    upload(s3, write_rows(tmp_path / "a.parquet", a), f"{bucket}/train/a.parquet")
    upload(s3, write_rows(tmp_path / "b.jsonl", b), f"{bucket}/sft/part-0.jsonl")
    cache = str(tmp_path / "hf")
    one = open_source(
        RowSource(f"s3://{bucket}/train/a.parquet", storage_options=s3), cache_dir=cache
    )
    assert one["input_ids"] == [r["input_ids"] for r in a]
    source = RowSource(f"s3://{bucket}/sft/", storage_options=s3, max_seq_len=10)
    folder = open_source(source, cache_dir=cache)
    _, stats = check_rows(source, folder)
    assert stats.rows == 12 and stats.tokens == sum(min(len(r["input_ids"]), 10) for r in b)
    ds = TokenizedRowsDataset(
        [{"path": f"s3://{bucket}/train/a.parquet", "storage_options": s3}, source],
        sample_packing_method="multipack",
        sample_packing_sequence_len=64,
        dataset_prepared_path=tmp_path / "prepared",
        cache_dir=cache,
    )
    assert ds.summary()["rows"] == 42 and ds[0]["input_ids"].shape == (64,)
    # Credentials are not part of the fingerprint: they say how to reach the data, not what it is.
    other_keys = RowSource(source.path, storage_options={"anon": True}, max_seq_len=10)
    assert other_keys.options() == source.options()
    assert "secret" not in str(ds.summary())


def test_s3_missing_object_and_empty_prefix(tmp_path: Path, s3: dict, bucket: str) -> None:
    cache = str(tmp_path / "hf")
    with pytest.raises(InputError, match=r"cannot read s3://.*/absent\.jsonl"):
        open_source(RowSource(f"s3://{bucket}/absent.jsonl", storage_options=s3), cache_dir=cache)
    with pytest.raises(InputError, match=r"holds no \.jsonl"):
        open_source(RowSource(f"s3://{bucket}/nothing/", storage_options=s3), cache_dir=cache)


@pytest.mark.parametrize("where", ["train/a.parquet", "train/"], ids=["file", "folder"])
def test_s3_no_credentials(
    tmp_path: Path, s3: dict, bucket: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Says which variables to set. botocore's NoCredentialsError is none of the OSError family:
    # it was a traceback.
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    upload(s3, write_rows(tmp_path / "a.parquet", random_rows(1, 3)), f"{bucket}/train/a.parquet")
    no_keys = {"endpoint_url": s3["endpoint_url"]}
    with pytest.raises(
        InputError,
        match=rf"cannot read s3://{bucket}/{where} \(NoCredentialsError: .*\); set "
        r"AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY .*\{anon: true\}",
    ):
        open_source(
            RowSource(f"s3://{bucket}/{where}", storage_options=no_keys),
            cache_dir=str(tmp_path / "hf"),
        )


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def http_root(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_http_jsonl(tmp_path: Path, http_root: tuple[Path, str]) -> None:
    root, url = http_root
    rows = random_rows(3, 20)
    write_rows(root / "train.jsonl", rows)
    ds = TokenizedRowsDataset(
        [f"{url}/train.jsonl"],
        shuffle=False,
        dataset_prepared_path=None,
        cache_dir=str(tmp_path / "hf"),
    )
    for i, row in enumerate(rows):
        n = len(row["input_ids"])
        assert ds[i]["input_ids"][:n].tolist() == row["input_ids"]
        assert ds[i]["labels"][:n].tolist() == row["labels"]
    with pytest.raises(
        InputError, match=r"cannot read http://127\.0\.0\.1:\d+/missing\.jsonl: FileNotFoundError"
    ):
        open_source(RowSource(f"{url}/missing.jsonl"), cache_dir=str(tmp_path / "hf"))


def test_a_host_that_does_not_answer_is_named_as_such(tmp_path: Path) -> None:
    # datasets says "Unable to find" for a file missing on a live host and for a dead host
    # alike; the message tells the two apart (a port nothing listens on stands for offline).
    url = f"http://127.0.0.1:{free_port()}/train.jsonl"
    with pytest.raises(
        InputError,
        match=r"cannot read http://.*: the host does not answer .*"
        r"check the network and the URL",
    ):
        open_source(RowSource(url), cache_dir=str(tmp_path / "hf"))
