"""``data_io.stage``'s check of a saved plan's option types: JSON's values against the hints of a
stage's signature (a path is a string in JSON, an integer is not a boolean)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from data_io.errors import ConfigError
from data_io.stage import check_fields, check_option_type

ACCEPTED = [
    (int, 3),
    (float, 3),
    (float, 0.5),
    (str | Path, "a/b"),
    (str | os.PathLike[str], "a/b"),
    (int | None, None),
    (Sequence[str] | None, ["a", "b"]),
    (list[list[str]], [["direct", "<x>"]]),
    (Mapping[str, str] | None, {"a": "b"}),
    (bool | str, "near"),
    (Any, object()),
]
REFUSED = [
    (int, True, "is a boolean (True), not an integer"),
    (int, 1.5, "is a number (1.5), not an integer"),
    (float, "0.1", "is a string ('0.1'), not a number"),
    (str | Path, 3, "is a number (3), not a string"),
    (int | None, "4", "is a string ('4'), not an integer or null"),
    (Sequence[str] | None, "abc", "is a string ('abc'), not a list of strings or null"),
    (Sequence[str], ["a", 1], "is an array (['a', 1]), not a list of strings"),
    (dict[str, str], {"a": 1}, "is an object ({'a': 1}), not an object of strings"),
    (list[list[str]], [["a"], "b"], "not a list of lists of strings"),
    (bool, 1, "is a number (1), not true or false"),
]


@pytest.mark.parametrize(("hint", "value"), ACCEPTED)
def test_a_value_of_the_hinted_type_is_taken(hint: Any, value: object) -> None:
    check_option_type("stage", "option", value, hint)


@pytest.mark.parametrize(("hint", "value", "said"), REFUSED)
def test_a_value_of_another_type_is_named(hint: Any, value: object, said: str) -> None:
    with pytest.raises(ConfigError, match=r"^stage's option option ") as refused:
        check_option_type("stage", "option", value, hint)
    assert said in str(refused.value)


def test_fields_are_required_optional_ones_may_be_absent_and_others_are_refused() -> None:
    fields, optional = {"inputs": list[str]}, {"seed": int}
    assert check_fields({"inputs": ["a"]}, fields, stage="s", optional=optional)
    with pytest.raises(ConfigError, match="s's options lack inputs"):
        check_fields({"seed": 1}, fields, stage="s", optional=optional)
    with pytest.raises(ConfigError, match="s has no option sede"):
        check_fields({"inputs": [], "sede": 1}, fields, stage="s", optional=optional)
    with pytest.raises(ConfigError, match="s's options are an array, not an object"):
        check_fields([], fields, stage="s")
