"""data_io.errors: the one map from the Rust core's error kinds to exception classes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from data_io.errors import (
    ConfigError,
    InputError,
    OutputError,
    TokenizerError,
    error_class,
)

RUST_ERROR = Path(__file__).resolve().parents[1] / "rust" / "error.rs"


def test_every_kind_the_rust_core_names_has_its_class() -> None:
    # The names come from ErrorKind::name in rust/error.rs, read from the source so that a
    # kind added there without a class here fails.
    names = re.findall(r'ErrorKind::\w+ => "(\w+)"', RUST_ERROR.read_text())
    assert sorted(names) == ["config", "input", "output", "tokenizer"]
    classes = {name: error_class(name) for name in names}
    assert classes == {
        "input": InputError,
        "config": ConfigError,
        "tokenizer": TokenizerError,
        "output": OutputError,
    }


def test_an_unknown_or_missing_kind_is_an_input_error() -> None:
    assert error_class(None) is InputError
    assert error_class("something new") is InputError


def test_the_extension_raises_the_class_of_its_kind(tmp_path: Path) -> None:
    # Raised in Rust (rust/bindings/call.rs::to_py_err asks error_class for the class of the kind).
    from data_io import _core

    damaged = tmp_path / "tokenizer.json"
    damaged.write_text('{"model": ')
    with pytest.raises(TokenizerError, match="tokenizer"):
        _core.Encoder(str(damaged))
