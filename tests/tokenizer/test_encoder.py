"""TextEncoder (the Rust encoder binding) against the Python ``tokenizers`` package."""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tokenizers import Tokenizer

from data_io.errors import ConfigError, TokenizerError
from data_io.tokenizer.encoder import TextEncoder

TEXTS = [
    "Hello world",
    "",
    "  leading and trailing spaces  ",
    "naïve café, Größe, ﬁ ligature",
    "日本語のテキスト、中文，한국어",
    "emoji 🙂👍🏽 and combining e\u0301",
    "line one\nline two\r\n\ttabbed",
    "special strings stay text: <|endoftext|> <|im_start|>",
    "digits 1234567890 and punctuation !?.,;:'\"()[]{}",
    "x" * 3000,
]


def oracle(path: Path) -> Tokenizer:
    """The reference: the same file through the Python package, special strings as text."""
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.encode_special_tokens = True
    return tokenizer


def expected_ids(path: Path, texts: list[str]) -> list[list[int]]:
    tokenizer = oracle(path)
    return [tokenizer.encode(text, add_special_tokens=False).ids for text in texts]


def test_ids_match_the_tokenizers_package(small_tokenizer: Path) -> None:
    encoder = TextEncoder.from_file(small_tokenizer)
    ids, offsets = encoder.encode_batch(TEXTS)
    assert ids.dtype == np.uint32 and offsets.dtype == np.int64
    assert offsets.shape == (len(TEXTS) + 1,) and offsets[0] == 0 and offsets[-1] == len(ids)
    for i, want in enumerate(expected_ids(small_tokenizer, TEXTS)):
        assert ids[offsets[i] : offsets[i + 1]].tolist() == want, TEXTS[i]


def test_eos_follows_every_text_including_empty_ones(small_tokenizer: Path) -> None:
    encoder = TextEncoder(small_tokenizer)
    eos = encoder.eos_id_for("<|endoftext|>")
    ids, offsets = encoder.encode_batch(TEXTS, eos)
    expected: list[int] = []
    for i, want in enumerate(expected_ids(small_tokenizer, TEXTS)):
        assert ids[offsets[i] : offsets[i + 1]].tolist() == [*want, eos]
        expected += [*want, eos]
    assert ids.tolist() == expected
    # The literal "<|endoftext|>" inside a text is not the EOS id: only appended EOS are.
    assert int(np.count_nonzero(ids == eos)) == len(TEXTS)


def test_empty_batch_and_all_empty_texts(small_tokenizer: Path) -> None:
    encoder = TextEncoder(small_tokenizer)
    ids, offsets = encoder.encode_batch([])
    assert ids.tolist() == [] and offsets.tolist() == [0]
    ids, offsets = encoder.encode_batch(["", ""], 5)
    assert ids.tolist() == [5, 5] and offsets.tolist() == [0, 1, 2]


def test_large_batch_keeps_order(small_tokenizer: Path) -> None:
    texts = [f"row {i} " + "abc " * (i % 13) for i in range(3000)]
    ids, offsets = TextEncoder(small_tokenizer).encode_batch(texts, 0)
    tokenizer = oracle(small_tokenizer)
    batch = tokenizer.encode_batch(texts, add_special_tokens=False)
    assert ids.tolist() == [t for enc in batch for t in [*enc.ids, 0]]
    assert np.diff(offsets).tolist() == [len(enc.ids) + 1 for enc in batch]


def test_vocab_size_and_token_ids(small_tokenizer: Path) -> None:
    encoder = TextEncoder(small_tokenizer)
    tokenizer = oracle(small_tokenizer)
    assert encoder.vocab_size == tokenizer.get_vocab_size(with_added_tokens=True)
    for token in ("<|endoftext|>", "<|PAD|>", "<think>"):
        assert encoder.token_id(token) == tokenizer.token_to_id(token)
    assert encoder.token_id("<|no such token|>") is None


def test_eos_id_for_resolves_names_and_checks_ids(small_tokenizer: Path) -> None:
    encoder = TextEncoder(small_tokenizer)
    eot = encoder.token_id("<|endoftext|>")
    assert encoder.eos_id_for("<|endoftext|>") == eot
    assert encoder.eos_id_for(np.int64(3)) == 3
    with pytest.raises(ConfigError, match=r"'<\|nope\|>' is not in the vocabulary"):
        encoder.eos_id_for("<|nope|>")
    with pytest.raises(ConfigError, match="outside the vocabulary"):
        encoder.eos_id_for(encoder.vocab_size)
    with pytest.raises(ConfigError, match="outside the vocabulary"):
        encoder.eos_id_for(-1)
    with pytest.raises(ConfigError, match="token string or an integer"):
        encoder.eos_id_for(True)
    with pytest.raises(ConfigError, match="outside the vocabulary"):
        encoder.encode_batch(["a"], encoder.vocab_size)


def test_default_eos_reads_tokenizer_config(small_tokenizer: Path, tmp_path: Path) -> None:
    folder = tmp_path / "tok"
    folder.mkdir()
    shutil.copy(small_tokenizer, folder / "tokenizer.json")
    encoder = TextEncoder(folder)  # a folder holding tokenizer.json is accepted
    # No tokenizer_config.json: the conventional <|endoftext|>.
    assert encoder.eos_id_for(None) == encoder.token_id("<|endoftext|>")
    config = folder / "tokenizer_config.json"
    config.write_text(json.dumps({"eos_token": "<|im_end|>"}))
    assert encoder.eos_id_for(None) == encoder.token_id("<|im_end|>")
    config.write_text(json.dumps({"eos_token": {"content": "<think>", "special": True}}))
    assert encoder.eos_id_for(None) == encoder.token_id("<think>")
    config.write_text("{not json")  # damaged optional file: falls back
    assert encoder.eos_id_for(None) == encoder.token_id("<|endoftext|>")


def test_default_eos_missing_is_a_config_error(tmp_path: Path) -> None:
    from tokenizers import models

    path = tmp_path / "tokenizer.json"
    Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]")).save(str(path))
    with pytest.raises(ConfigError, match="pass eos_token_id"):
        TextEncoder(path).eos_id_for(None)


def test_pickles_as_its_path(small_tokenizer: Path) -> None:
    encoder = TextEncoder(small_tokenizer)
    state = pickle.dumps(encoder)
    assert len(state) < 1000  # the path, not the vocabulary
    copy = pickle.loads(state)
    assert copy.encode_batch(TEXTS, 0).ids.tolist() == encoder.encode_batch(TEXTS, 0).ids.tolist()


def test_bad_tokenizer_and_bad_texts(tmp_path: Path, small_tokenizer: Path) -> None:
    with pytest.raises(TokenizerError, match="does not exist"):
        TextEncoder(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{}")
    with pytest.raises(TokenizerError, match=r"broken\.json"):
        TextEncoder(broken)
    encoder = TextEncoder(small_tokenizer)
    with pytest.raises(TypeError, match="not one str"):
        encoder.encode_batch("one text")
    with pytest.raises(TypeError):
        encoder.encode_batch(["ok", None])  # type: ignore[list-item]


# Over the 64 KiB a batch needs to be shared with the helper threads (smaller ones are encoded
# by the calling thread alone).
_SHARED_BATCH = TEXTS * 2000


def _encode_in_child(path: Path, queue: Any) -> None:
    queue.put(TextEncoder(path).encode_batch(_SHARED_BATCH, 0).ids.tolist())


def test_encodes_in_a_forked_child_after_the_parent_did(
    small_tokenizer: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DataLoader workers are forked: a child inherits the parent's helper threads' state
    without the threads, so the encoder must start its own there instead of waiting forever."""
    import multiprocessing

    assert sum(len(t.encode()) for t in _SHARED_BATCH) > 64 << 10
    monkeypatch.setenv("RAYON_NUM_THREADS", "2")  # helpers even on a one-core machine
    expected = TextEncoder(small_tokenizer).encode_batch(_SHARED_BATCH, 0).ids.tolist()  # parent
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_encode_in_child, args=(small_tokenizer, queue))
    child.start()
    try:
        got = queue.get(timeout=120)  # a guard against a hang, not a timing assertion
    finally:
        child.join(timeout=10)
        if child.is_alive():
            child.kill()
    assert got == expected
    assert child.exitcode == 0


def test_a_thread_count_that_is_no_number_uses_every_core_and_says_so(
    small_tokenizer: Path,
) -> None:
    """``RAYON_NUM_THREADS=two`` is every core, as rayon reads it, but said once on stderr
    (not at every batch): the user meant a number."""
    import subprocess
    import sys

    code = (
        "from data_io.tokenizer.encoder import TextEncoder; "
        f"e = TextEncoder({str(small_tokenizer)!r}); "
        "[e.encode_batch(['some text'] * 3, 0) for _ in range(3)]; print('ok')"
    )
    env = {**os.environ, "RAYON_NUM_THREADS": "two"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.strip() == "ok"
    assert done.stderr.count('RAYON_NUM_THREADS="two" is not a number of threads') == 1, done.stderr
    env["RAYON_NUM_THREADS"] = "1"
    quiet = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert "RAYON_NUM_THREADS" not in quiet.stderr
