"""``TokenizeOptions``: what a ``tokenize`` run is asked to do, declared once on the Python side.

It mirrors the Rust core's ``TokenizeOptions`` (``rust/tokenize/options.rs``), which is built
from this dataclass's JSON (``to_json``), and it is what a scale-out plan records
(``to_dict``) and reads back (``from_dict``, which checks a plan's fields and their types).
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Mapping
from typing import Any

from data_io.errors import ConfigError
from data_io.stage import check_fields
from data_io.util.threads import checked_threads

DEFAULT_TOKENIZER = "trained_tokenizers/bpe/tokenizer.json"
DEFAULT_BOQ = "<|im_start|>"
DEFAULT_EOQ = "<|im_end|>"
DEFAULT_EOA = "<|box_end|>"
DEFAULT_CONDITIONS: dict[str, str] = {
    "direct": "<|object_ref_start|>",
    "cot": "<|object_ref_end|>",
    "noisy": "<|quad_start|>",
    "synth": "<|quad_end|>",
}
DEFAULT_BATCH_ROWS = 4096


@dataclasses.dataclass(frozen=True)
class TokenizeOptions:
    """A ``tokenize`` run's options in the plain form the Rust core and a plan's JSON hold:
    paths as strings, ``conditions`` as (tag, token) pairs in their order. The values are
    checked when it is made (a bad one raises ``ConfigError`` naming it)."""

    inputs: tuple[str, ...]
    output: str
    tokenizer_path: str = DEFAULT_TOKENIZER
    boq: str = DEFAULT_BOQ
    eoq: str = DEFAULT_EOQ
    eoa: str = DEFAULT_EOA
    conditions: tuple[tuple[str, str], ...] = tuple(DEFAULT_CONDITIONS.items())
    on_error: str = "fail"
    # Worker threads; None uses every core.
    threads: int | None = None
    token_dtype: str = "uint32"
    progress: bool = False
    batch_rows: int = DEFAULT_BATCH_ROWS
    # Where `data_io.scale` units left encoded parts of files (assembled instead of encoded).
    parts: str | None = None

    def __post_init__(self) -> None:
        if self.on_error not in ("fail", "skip"):
            raise ConfigError(f"on_error must be 'fail' or 'skip', not {self.on_error!r}")
        if self.token_dtype not in ("uint32", "auto"):
            raise ConfigError(f"token_dtype must be 'uint32' or 'auto', not {self.token_dtype!r}")
        checked_threads(self.threads)
        if self.batch_rows < 1:
            raise ConfigError(f"batch_rows must be at least 1, not {self.batch_rows}")
        if any(len(pair) != 2 for pair in self.conditions):
            raise ConfigError("conditions holds a pair that is not a tag and a token")

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form (lists for tuples): what a plan records."""
        plain = dataclasses.asdict(self)
        plain["inputs"] = list(self.inputs)
        plain["conditions"] = [list(pair) for pair in self.conditions]
        return plain

    def to_json(self) -> str:
        """What ``data_io._core.tokenize`` takes."""
        return json.dumps(self.to_dict())

    def keywords(self) -> dict[str, Any]:
        """``data_io.tokenize.tokenize``'s keyword arguments for these options (``conditions``
        as a mapping; ``parts`` left out, a run finds its own)."""
        kwargs = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("inputs", "output", "parts")
        }
        kwargs["conditions"] = dict(self.conditions)
        return kwargs

    @classmethod
    def from_dict(cls, options: object, *, stage: str = "tokenize") -> TokenizeOptions:
        """The options a plan's JSON holds, checked: an object of this class's fields (each of
        its type; ``inputs`` and ``output`` required, one left out takes its default, as in a
        plan written before it existed) and values."""
        hints = typing.get_type_hints(cls)
        required = {f.name: hints[f.name] for f in dataclasses.fields(cls) if _required(f)}
        optional = {f.name: hints[f.name] for f in dataclasses.fields(cls) if not _required(f)}
        checked = check_fields(options, required, stage=stage, optional=optional)
        values = dict(checked)
        values["inputs"] = tuple(checked["inputs"])
        if "conditions" in checked:
            values["conditions"] = tuple(tuple(pair) for pair in checked["conditions"])
        return cls(**values)


def conditions_pairs(conditions: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    """``conditions`` (tag -> token; None for the defaults) as the options' ordered pairs."""
    mapping = DEFAULT_CONDITIONS if conditions is None else conditions
    return tuple((tag, token) for tag, token in mapping.items())


def _required(field: dataclasses.Field) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
