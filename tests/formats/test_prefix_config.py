"""prefix_config.yaml: parsing, first-match semantics, validation errors, overlap summary."""

from __future__ import annotations

from pathlib import Path

import pytest

from data_io.errors import ConfigError
from data_io.formats.prefix_config import (
    PrefixConfig,
    PrefixRule,
    format_overlaps,
    load_prefix_config,
    parse_prefix_config,
)

REPO_CONFIG = Path(__file__).resolve().parents[2] / "prefix_config.yaml"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prefix_config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_repository_config_holds_the_original_rules() -> None:
    config = load_prefix_config(REPO_CONFIG)
    caps = {rule.prefix: rule.max_per_file for rule in config.rules}
    assert caps["SYNTH__"] == 20_000
    assert caps["flan__"] == 5_000
    assert caps["dmmath__"] == 100_000
    assert caps["ampsmathematica__"] == 10_000
    assert caps["tasksource__"] == 10_000
    assert caps["openmathinstruct2__"] == 2_000_000
    assert caps["acereason__"] == 2_000_000
    assert caps["openthoughts2__"] == 500_000
    assert caps["sudoku_extreme__"] == 1_000_000
    for name in (
        "Platypus__arb_math.jsonl",
        "omnimath.jsonl",
        "gsm8k_train.jsonl",
        "math_train.jsonl",
        "webinstruct_verified.jsonl",
        "no_robots.jsonl",
    ):
        rule = config.match(name)
        assert rule is not None and rule.repeat == 10 and rule.max_per_file is None
    # flan__cot_ comes first, so FLAN chain-of-thought files are uncapped.
    assert config.match("flan__cot_fsopt_data__x.parquet") == PrefixRule("flan__cot_")
    assert config.match("flan__niv2_fsopt_data__y.parquet").max_per_file == 5_000
    for name in (
        "amps_khan.jsonl",
        "natural_reasoning.jsonl",
        "numinamath.jsonl",
        "principia_collection.jsonl",
        "textbookreasoning__cot.parquet",
    ):
        assert config.match(name) is None
    assert all(rule.long_context == "truncate" for rule in config.rules)


def test_defaults_and_all_fields(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "- prefix: a__\n"
        "- prefix: b__\n  max_per_file: 0\n  long_context: drop\n  repeat: 3\n"
        "- prefix: c__\n  max_per_file: null\n",
    )
    config = load_prefix_config(path)
    assert config.rules == [
        PrefixRule("a__", None, "truncate", 1),
        PrefixRule("b__", 0, "drop", 3),
        PrefixRule("c__", None, "truncate", 1),
    ]
    assert config.source == str(path)


def test_first_matching_prefix_wins_and_no_match_is_none() -> None:
    config = parse_prefix_config(
        [{"prefix": "x__long", "repeat": 2}, {"prefix": "x__", "max_per_file": 7}]
    )
    assert config.match("x__longer").repeat == 2
    assert config.match("x__other").max_per_file == 7
    assert config.match("y__x__") is None
    assert [rule.prefix for rule in config.matching("x__longer")] == ["x__long", "x__"]


def test_rule_is_frozen() -> None:
    rule = PrefixRule("a")
    with pytest.raises(AttributeError):
        rule.repeat = 5  # type: ignore[misc]


@pytest.mark.parametrize("text", ["", "# only a comment\n", "null\n"])
def test_empty_file_means_no_rules(tmp_path: Path, text: str) -> None:
    assert load_prefix_config(_write(tmp_path, text)).rules == []


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("- prefix: a\n  max_per_fil: 3\n", ["item 1", "'a'", "max_per_fil"]),
        ("- prefix: a\n- prefix: b\n  max_per_file: -1\n", ["item 2", "'b'", "max_per_file"]),
        ("- prefix: a\n  max_per_file: 2.5\n", ["item 1", "max_per_file", "2.5"]),
        ("- prefix: a\n  max_per_file: true\n", ["item 1", "max_per_file"]),
        ("- prefix: a\n  repeat: 0\n", ["item 1", "repeat", ">= 1"]),
        ("- prefix: a\n  repeat: '2'\n", ["item 1", "repeat"]),
        ("- prefix: a\n  long_context: cut\n", ["item 1", "long_context", "'cut'"]),
        ("- max_per_file: 3\n", ["item 1", "prefix"]),
        ("- prefix: ''\n", ["item 1", "prefix"]),
        ("- prefix: 12\n", ["item 1", "prefix"]),
        ("- just_a_string\n", ["item 1", "mapping"]),
        ("prefix: a\n", ["top level", "list"]),
        ("- prefix: [unclosed\n", ["not valid YAML"]),
        # A later rule that an earlier one always shadows is an ordering mistake.
        ("- prefix: flan__\n- prefix: flan__cot_\n", ["item 2", "never apply", "item 1"]),
        ("- prefix: a\n- prefix: a\n  repeat: 2\n", ["item 2", "never apply"]),
    ],
)
def test_invalid_config_names_the_item(tmp_path: Path, text: str, fragments: list[str]) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_prefix_config(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="prefix_config_path"):
        load_prefix_config(tmp_path / "nope.yaml")


def test_overlaps_are_grouped_once_per_rule_set() -> None:
    config = PrefixConfig(
        rules=[PrefixRule("flan__cot_"), PrefixRule("flan__", 5), PrefixRule("f")]
    )
    names = [f"flan__cot_{i}" for i in range(50)] + ["flan__niv2", "fox", "other"]
    overlaps = config.overlaps(names)
    assert len(overlaps) == 2
    first, second = overlaps
    assert first.winner.prefix == "flan__cot_"
    assert [rule.prefix for rule in first.shadowed] == ["flan__", "f"]
    assert len(first.tasks) == 50
    assert second.winner.prefix == "flan__" and second.tasks == ("flan__niv2",)
    lines = format_overlaps(overlaps)
    assert len(lines) == 2  # one line per group, not one per task
    assert lines[0].startswith("50 tasks")
    assert config.overlaps(["fox", "other"]) == []
