"""The sampler's key=value configuration: defaults, overrides, and every rejection."""

from __future__ import annotations

from pathlib import Path

import pytest

from data_io.errors import ConfigError
from data_io.sampling.config import CONFIG_KEYS, SampleConfig, parse_overrides


@pytest.fixture
def inputs(tmp_path: Path) -> list[str]:
    (tmp_path / "tok").mkdir()
    rules = tmp_path / "rules.yaml"
    rules.write_text("- prefix: a\n")
    return [f"tokenized_path={tmp_path / 'tok'}", f"prefix_config_path={rules}"]


def test_defaults_are_the_originals() -> None:
    config = SampleConfig()
    assert config.tokenized_path == "data_tokenized_bpe_65k"
    assert config.output_path == "/dev/shm/sampled"
    assert config.prefix_config_path == "prefix_config.yaml"
    assert (config.seed, config.epochs, config.context_size, config.min_resp_length) == (
        0,
        10,
        4097,
        2,
    )
    assert config.short_truncated == "drop"
    assert config.reuse is True


def test_overrides_are_typed(inputs: list[str]) -> None:
    config = parse_overrides(
        [*inputs, "epochs=3", "seed=42", "context_size=1025", "short_truncated=keep", "reuse=false"]
    )
    assert (config.epochs, config.seed, config.context_size) == (3, 42, 1025)
    assert config.short_truncated == "keep" and config.reuse is False
    # Every word OmegaConf reads as a switch still is one.
    for word, expected in [("Yes", True), ("n", False), ("ON", True), ("0", False), ("1", True)]:
        assert parse_overrides([*inputs, f"plot={word}"]).plot is expected


@pytest.mark.parametrize(
    ("override", "fragments"),
    [
        ("epoch=3", ["'epoch'", "valid keys", "epochs"]),
        ("epochs=ten", ["'epochs'", "ten"]),
        ("epochs=1.5", ["'epochs'"]),
        ("seed=abc", ["'seed'"]),
        ("reuse=maybe", ["'reuse'"]),
        ("plot=2", ["'plot'", "true or false", "'2'"]),
        ("allow_empty=-1", ["'allow_empty'", "true or false"]),
        ("epochs=0", ["'epochs'", ">= 1"]),
        ("epochs=-2", ["'epochs'"]),
        ("context_size=1", ["'context_size'", ">= 2"]),
        ("min_resp_length=0", ["'min_resp_length'"]),
        ("seed=-1", ["'seed'"]),
        ("short_truncated=truncate", ["'short_truncated'", "drop", "keep"]),
        ("epochs", ["'epochs'", "key=value"]),
        ("--epochs=3", ["key=value"]),
    ],
)
def test_bad_values_name_the_key(inputs: list[str], override: str, fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        parse_overrides([*inputs, override])
    for fragment in fragments:
        assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("typed", "fix"),
    [
        (["epochs", "=", "10"], "write epochs=10 as one argument, without spaces around '='"),
        (["epochs", "=10"], "write epochs=10 as one argument"),
        (["seed", "=", "x=1"], "write seed=VALUE as one argument"),
        (["epochs"], "write epochs=VALUE;"),
    ],
)
def test_a_key_split_from_its_value_says_how_to_write_it(
    inputs: list[str], typed: list[str], fix: str
) -> None:
    # The shell makes three arguments of `epochs = 10`.
    with pytest.raises(ConfigError) as info:
        parse_overrides([*inputs, *typed])
    assert str(info.value).startswith(f"argument {typed[0]!r} is not key=value")
    assert fix in str(info.value)


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ("+epochs=10", "write epochs=10"),
        ("++seed=3", "write seed=3"),
        ("+epochs", "write epochs=VALUE"),
        ("~plot", "leave plot out to keep its default"),
        ("~plot=true", "leave plot out to keep its default"),
        ("+epoch=10", "and 'epoch' is not a key either; valid keys: tokenized_path,"),
    ],
)
def test_hydra_prefixes_say_how_to_write_the_setting(
    inputs: list[str], typed: str, message: str
) -> None:
    # Users of Hydra configs type +key=value; the original (OmegaConf) never read it either.
    with pytest.raises(ConfigError) as info:
        parse_overrides([*inputs, "epochs=2", typed])
    said = str(info.value)
    assert said.startswith(f"argument {typed!r}: settings are key=value, without Hydra's '+'")
    assert message in said


def test_a_key_given_twice_takes_the_last_value_with_a_note(
    inputs: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # As the original's OmegaConf.from_cli: a wrapper appending overrides to a base command.
    assert parse_overrides([*inputs, "epochs=2", "seed=1", "epochs=3"]).epochs == 3
    assert capsys.readouterr().err == (
        "sample: note: epochs is given 2 times (epochs=2, then epochs=3); the last is used\n"
    )
    assert parse_overrides([*inputs, "seed=1", "seed=4", "seed=1"]).seed == 1
    assert "seed is given 3 times (seed=1, then seed=4, then seed=1)" in capsys.readouterr().err
    # A key given once, next to others, is not a duplicate: no note.
    assert parse_overrides([*inputs, "epochs=3", "seed=1"]).epochs == 3
    assert capsys.readouterr().err == ""


def test_missing_tokenized_path_names_the_key(
    tmp_path: Path, inputs: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match=r"'tokenized_path'.*not a directory") as caught:
        parse_overrides([inputs[1], f"tokenized_path={tmp_path / 'nope'}"])
    assert "relative to" not in str(caught.value)
    # The default is relative to the repository's root: run elsewhere, the message says where.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=rf"'nope' \(relative to the current folder {tmp_path}\)"):
        parse_overrides([inputs[1], "tokenized_path=nope"])


def test_missing_prefix_config_names_the_key(tmp_path: Path, inputs: list[str]) -> None:
    with pytest.raises(ConfigError, match=r"'prefix_config_path'.*does not exist"):
        parse_overrides([inputs[0], f"prefix_config_path={tmp_path / 'nope.yaml'}"])


def test_every_key_is_documented_in_help() -> None:
    from data_io.sampling.config import config_help

    text = config_help()
    lines = text.splitlines()
    for key in CONFIG_KEYS:
        (line,) = [index for index, line in enumerate(lines) if line.startswith(f"  {key}=")]
        # The default as typed, then a description indented below it.
        assert lines[line + 1].startswith("      ") and lines[line + 1].strip()
    for shown in ("  reuse=true\n", "  plot_path=null\n", "  short_truncated=drop\n"):
        assert shown in text + "\n"
