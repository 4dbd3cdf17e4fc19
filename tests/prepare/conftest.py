"""Fixtures of the prepare tests: tiny word-level tokenizers with chosen vocabularies."""

from __future__ import annotations

from pathlib import Path

import pytest


def word_tokenizer(path: Path, words: list[str], specials: list[str]) -> Path:
    """A word-level tokenizers JSON: ``specials`` first, then ``words``, then [UNK]."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    vocab = {token: i for i, token in enumerate([*specials, *words, "[UNK]"])}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    if specials:
        tokenizer.add_special_tokens(specials)
    path.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(path))
    return path


@pytest.fixture(scope="session")
def no_eos_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("no_eos")
    return word_tokenizer(folder / "tokenizer.json", ["hello", "world"], ["<pad>", "</s>"])


@pytest.fixture(scope="session")
def huge_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """70,000 tokens: more than uint16 holds."""
    folder = tmp_path_factory.mktemp("huge")
    words = [f"w{i}" for i in range(70_000)]
    return word_tokenizer(folder / "tokenizer.json", words, ["<|endoftext|>"])
