"""``TokenizeOptions``: the one Python declaration of what the Rust core's tokenize takes.

The Rust side (``rust/bindings/tokenize.rs``) refuses unknown and missing fields, so a field
added or renamed on one side only fails here, not in a user's run."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from data_io import _core
from data_io.errors import ConfigError
from data_io.tokenize import DEFAULT_CONDITIONS, TokenizeOptions, tokenize_options


def _options(rows: Path, out: Path, tokenizer: Path) -> TokenizeOptions:
    return TokenizeOptions(inputs=(str(rows),), output=str(out), tokenizer_path=str(tokenizer))


def test_the_rust_core_takes_exactly_its_fields(rows_dir, small_tokenizer, tmp_path):
    options = _options(rows_dir, tmp_path / "out", small_tokenizer)
    stale = json.loads(_core.tokenize_stale(options.to_json()))
    assert {task["reason"] for task in stale} == {"new"} and stale
    plain = options.to_dict()
    # The optional fields (None when left out, as serde reads an `Option`) on both sides.
    for name in set(plain) - {"parts", "threads"}:
        without = {k: v for k, v in plain.items() if k != name}
        with pytest.raises(ConfigError, match=f"missing field `{name}`"):
            _core.tokenize_stale(json.dumps(without))
    with pytest.raises(ConfigError, match="unknown field `typo`"):
        _core.tokenize_stale(json.dumps({**plain, "typo": 1}))


def test_a_plan_reads_back_what_it_recorded(rows_dir, small_tokenizer, tmp_path):
    recorded = tokenize_options([rows_dir], tmp_path / "out", tokenizer_path=small_tokenizer)
    assert json.loads(json.dumps(recorded)) == recorded  # JSON-ready as it is
    options = TokenizeOptions.from_dict(recorded)
    assert options.to_dict() == recorded
    assert options.conditions == tuple(DEFAULT_CONDITIONS.items())
    assert options.keywords()["conditions"] == DEFAULT_CONDITIONS


def test_an_option_a_plan_left_out_takes_its_default(tmp_path):
    options = TokenizeOptions.from_dict({"inputs": ["rows"], "output": "out"})
    defaults = TokenizeOptions(inputs=("rows",), output="out")
    assert options == defaults and options.batch_rows == 4096 and options.threads is None


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"on_error": "ignore"}, "on_error must be 'fail' or 'skip', not 'ignore'"),
        ({"token_dtype": "uint16"}, "token_dtype must be 'uint32' or 'auto'"),
        ({"batch_rows": 0}, "batch_rows must be at least 1, not 0"),
        ({"threads": 0}, "threads"),
        ({"conditions": (("direct",),)}, "conditions holds a pair that is not a tag and a token"),
    ],
)
def test_a_bad_value_is_refused_when_made(change, said):
    base = TokenizeOptions(inputs=("rows",), output="out")
    with pytest.raises(ConfigError, match=said):
        dataclasses.replace(base, **change)


def test_a_plan_of_another_type_is_refused_naming_the_field():
    with pytest.raises(ConfigError, match=r"tokenize's option conditions is an array"):
        TokenizeOptions.from_dict({"inputs": ["a"], "output": "o", "conditions": [["direct", 1]]})
    with pytest.raises(ConfigError, match="tokenize's options lack output"):
        TokenizeOptions.from_dict({"inputs": ["a"]})
