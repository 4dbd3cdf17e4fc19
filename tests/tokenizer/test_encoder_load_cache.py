"""The encoder's load cache (``DATA_IO_ENCODER_CACHE``): what a load derives from the merges,
kept on disk by the tokenizer file's hash. A process that reads it encodes exactly as one that
built it; a damaged file is built again; a folder that cannot be written only costs time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from data_io.tokenizer.encoder import TextEncoder
from tests.tokenizer.test_encoder import TEXTS, expected_ids

# A fresh process per load: an encoder is kept per process once loaded.
_LOAD = """
import json, sys
from data_io.tokenizer.encoder import TextEncoder
encoder = TextEncoder(sys.argv[1], tables="process")
ids = encoder.encode_batch(json.loads(sys.argv[2])).ids.tolist()
print(json.dumps({"load_cache": encoder.load_cache, "ids": ids}))
"""


def load(tokenizer: Path, cache: str) -> dict:
    env = {**os.environ, "DATA_IO_ENCODER_CACHE": cache}
    done = subprocess.run(
        [sys.executable, "-c", _LOAD, str(tokenizer), json.dumps(TEXTS)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(done.stdout)


def oracle_ids(tokenizer: Path) -> list[int]:
    return [i for ids in expected_ids(tokenizer, TEXTS) for i in ids]


def test_read_back_it_encodes_as_built(small_tokenizer: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    expected = oracle_ids(small_tokenizer)
    built = load(small_tokenizer, str(cache))
    (kept,) = cache.iterdir()
    assert kept.suffix == ".tables"
    assert built == {"load_cache": f"written {kept}", "ids": expected}
    assert load(small_tokenizer, str(cache)) == {"load_cache": f"read {kept}", "ids": expected}
    # Damaged: built again, and the file written whole once more.
    good = kept.read_bytes()
    kept.write_bytes(good[:-10])
    assert load(small_tokenizer, str(cache)) == {"load_cache": f"written {kept}", "ids": expected}
    assert kept.read_bytes() == good
    assert sorted(p.name for p in cache.iterdir()) == [kept.name], "no temporary file left"


def test_another_tokenizer_file_is_another_entry(small_tokenizer: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    load(small_tokenizer, str(cache))
    other = tmp_path / "tokenizer.json"
    other.write_text(small_tokenizer.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    said = load(other, str(cache))["load_cache"]
    assert said.startswith("written "), said
    assert len(list(cache.iterdir())) == 2


def test_off_and_unwritable(small_tokenizer: Path, tmp_path: Path) -> None:
    expected = oracle_ids(small_tokenizer)
    assert load(small_tokenizer, "off") == {"load_cache": "off", "ids": expected}
    blocked = tmp_path / "file"
    blocked.write_text("not a folder", encoding="utf-8")
    said = load(small_tokenizer, str(blocked / "cache"))
    assert said["ids"] == expected
    assert said["load_cache"].startswith(f"not kept ({blocked / 'cache'}/"), said


def test_the_hf_engine_has_none(small_tokenizer: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATA_IO_ENCODER", "hf")
    assert TextEncoder(small_tokenizer).load_cache is None
