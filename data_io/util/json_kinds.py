"""A JSON value's kind in JSON's own words, as messages about rows and saved plans name it
(light: the scale layer and the command line import it at start-up)."""

from __future__ import annotations

# A value's kind in JSON's words, as the rows reader of tokenize names them.
_JSON_KINDS: dict[type, str] = {
    type(None): "null",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    str: "a string",
    list: "an array",
    dict: "an object",
}


def json_kind(value: object) -> str:
    """``value``'s kind as a message names it: "a number", "an array", "null", ..."""
    return _JSON_KINDS.get(type(value), f"a {type(value).__name__}")
