"""data_io.train_tokenizer: the trained file loads in tokenizers and transformers, has the
formats.md §2 pipeline and special tokens, round-trips text, and honours per-file limits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from data_io import _core
from data_io.errors import ConfigError, InputError
from data_io.train_tokenizer import train_tokenizer
from tests.conftest import EXAMPLE_ROWS

SAMPLES = [
    "Translate into Japanese: おはようございます、お元気ですか？",
    "def f(x):\n    return x ** 2  # square\n",
    "Доброе утро — l'eau bout à cent degrés. 早上好",
    "The marker <|im_end|> is plain text here.",
    "   leading spaces and trailing\t\n",
]


def test_pipeline_and_special_tokens_follow_the_spec(small_tokenizer: Path):
    spec = json.loads(small_tokenizer.read_text())
    assert spec["normalizer"]["type"] == "NFC"
    split, byte_level = spec["pre_tokenizer"]["pretokenizers"]
    assert split["type"] == "Split" and split["behavior"] == "Isolated"
    assert split["pattern"]["Regex"] == _core.SPLIT_REGEX
    assert byte_level == {
        **byte_level,
        "type": "ByteLevel",
        "add_prefix_space": False,
        "use_regex": False,
    }
    assert spec["post_processor"]["type"] == "ByteLevel"
    assert spec["decoder"]["type"] == "ByteLevel"
    added = spec["added_tokens"]
    assert [t["content"] for t in added] == list(_core.DEFAULT_SPECIAL_TOKENS)
    assert [t["id"] for t in added] == list(range(len(added)))
    assert all(t["special"] for t in added)
    assert json.loads((small_tokenizer.parent / "config.json").read_text()) == {
        "model_type": "qwen3"
    }


def test_round_trips_text_in_tokenizers(small_tokenizer: Path):
    tok = Tokenizer.from_file(str(small_tokenizer))
    assert tok.get_vocab_size() == 600
    for text in SAMPLES:
        ids = tok.encode(text, add_special_tokens=False).ids
        assert tok.decode(ids, skip_special_tokens=False) == text


def test_loads_and_round_trips_in_transformers(small_tokenizer: Path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(small_tokenizer.parent))
    for text in SAMPLES[:3]:
        assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
    assert tok.convert_tokens_to_ids("<|im_start|>") == 6


def test_training_is_deterministic(tmp_path: Path, small_tokenizer: Path):
    again = tmp_path / "again" / "tokenizer.json"
    train_tokenizer([EXAMPLE_ROWS], again, vocab_size=600, prefix_config=None, progress=False)
    assert again.read_bytes() == small_tokenizer.read_bytes()


def test_prefix_config_limits_texts_per_file_by_seeded_choice(tmp_path: Path):
    config = tmp_path / "prefix_config.yaml"
    config.write_text("- prefix: data__arithmetic\n  max_per_file: 2\n")
    runs = []
    for seed in (0, 0, 1):
        out = tmp_path / f"s{len(runs)}" / "tokenizer.json"
        result = train_tokenizer(
            [EXAMPLE_ROWS],
            out,
            vocab_size=400,
            seed=seed,
            prefix_config=config,
            limit_mul_factor=5,
            progress=False,
        )
        per_file = {f.task: f for f in result.files}
        arithmetic = per_file["data__arithmetic.jsonl"]
        assert arithmetic.texts_available == 180 and arithmetic.texts_used == 10
        translations = per_file["data__translations.jsonl"]
        assert translations.texts_used == translations.texts_available == 96
        runs.append(out.read_bytes())
    assert runs[0] == runs[1]


def test_texts_are_truncated_to_truncate_len_characters(tmp_path: Path):
    rows = tmp_path / "rows"
    rows.mkdir()
    long_word = "abcdefghij" * 50
    (rows / "a.jsonl").write_text(
        "".join(
            json.dumps({"condition": "", "instruction": long_word, "response": long_word}) + "\n"
            for _ in range(5)
        )
    )
    out = tmp_path / "tok" / "tokenizer.json"
    train_tokenizer([rows], out, vocab_size=400, truncate_len=4, prefix_config=None, progress=False)
    vocab = json.loads(out.read_text())["model"]["vocab"]
    # Only the first four characters were seen, so no merge reaches past "abcd".
    assert "abcd" in vocab and not any("abcde" in token for token in vocab)


def test_unigram_trains_and_round_trips(tmp_path: Path):
    out = tmp_path / "uni" / "tokenizer.json"
    result = train_tokenizer(
        [EXAMPLE_ROWS],
        out,
        tokenizer_type="unigram",
        vocab_size=800,
        prefix_config=None,
        progress=False,
    )
    assert result.vocab_size <= 800
    tok = Tokenizer.from_file(str(out))
    assert json.loads(out.read_text())["model"]["type"] == "Unigram"
    for text in SAMPLES[:3]:
        assert tok.decode(tok.encode(text, add_special_tokens=False).ids) == text


def test_bad_options_and_bad_rows(tmp_path: Path):
    out = tmp_path / "t" / "tokenizer.json"
    with pytest.raises(ConfigError, match="too small"):
        train_tokenizer([EXAMPLE_ROWS], out, vocab_size=100, prefix_config=None, progress=False)
    with pytest.raises(ConfigError, match=r"\.json file"):
        train_tokenizer(
            [EXAMPLE_ROWS], tmp_path / "t" / "tok.txt", prefix_config=None, progress=False
        )
    with pytest.raises(ConfigError, match="twice"):
        train_tokenizer(
            [EXAMPLE_ROWS], out, special_tokens=["<a>", "<a>"], prefix_config=None, progress=False
        )
    rows = tmp_path / "rows"
    rows.mkdir()
    (rows / "bad.jsonl").write_text(
        '{"condition": "", "instruction": "a", "response": "b"}\n{oops\n'
    )
    with pytest.raises(InputError, match=r"bad.jsonl:line 2: malformed JSON"):
        train_tokenizer([rows], out, vocab_size=300, prefix_config=None, progress=False)
    assert not out.exists()
    result = train_tokenizer(
        [rows], out, vocab_size=300, prefix_config=None, on_error="skip", progress=False
    )
    assert result.files[0].bad_rows == 1
