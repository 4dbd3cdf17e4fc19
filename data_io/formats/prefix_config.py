"""``prefix_config.yaml``: per-file sampling rules chosen by task-name prefix.

The file is an ordered YAML list; each item names a ``prefix`` and optional settings. A task
(a tokenized folder such as ``flan__cot_fsopt_data__foo.parquet``) takes the settings of the
FIRST item whose prefix starts its name; tasks that match no item are taken in full, once per
epoch. The sampler and tokenizer training both read this file, so it is parsed and validated
in one place and every mistake names the item (its 1-based position and prefix) and the field.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from data_io.errors import ConfigError
from data_io.util.words import counted

LongContext = Literal["truncate", "drop"]
LONG_CONTEXT_MODES: tuple[str, ...] = ("truncate", "drop")
_FIELDS = ("prefix", "max_per_file", "long_context", "repeat")


@dataclass(frozen=True)
class PrefixRule:
    """The settings for the tasks whose name starts with ``prefix``.

    ``max_per_file``: rows taken from one task per epoch (before ``repeat``); ``None`` means
    every row. ``long_context``: what happens to a row longer than the context — ``truncate``
    its response, or ``drop`` it. ``repeat``: per-epoch multiplier used to upsample small sets.
    """

    prefix: str
    max_per_file: int | None = None
    long_context: LongContext = "truncate"
    repeat: int = 1


@dataclass(frozen=True)
class PrefixOverlap:
    """Tasks that several rules match; ``winner`` (the first) applies, ``shadowed`` do not."""

    winner: PrefixRule
    shadowed: tuple[PrefixRule, ...]
    tasks: tuple[str, ...]


@dataclass(frozen=True)
class PrefixConfig:
    """The ordered rules of one ``prefix_config.yaml`` (``source`` is its path, for messages)."""

    rules: list[PrefixRule] = field(default_factory=list)
    source: str = "<memory>"

    def match(self, task_name: str) -> PrefixRule | None:
        """The first rule whose prefix starts ``task_name``, or ``None`` (take all, once)."""
        for rule in self.rules:
            if task_name.startswith(rule.prefix):
                return rule
        return None

    def matching(self, task_name: str) -> list[PrefixRule]:
        """Every rule that matches ``task_name``, in file order (the first one applies)."""
        return [rule for rule in self.rules if task_name.startswith(rule.prefix)]

    def overlaps(self, task_names: Iterable[str]) -> list[PrefixOverlap]:
        """Group the tasks matched by more than one rule, once per distinct set of rules.

        The original printed a warning for every such task (thousands of lines for FLAN);
        callers print this summary instead: one line per group with a count and an example.
        """
        groups: dict[tuple[int, ...], list[str]] = {}
        for name in task_names:
            hits = tuple(i for i, rule in enumerate(self.rules) if name.startswith(rule.prefix))
            if len(hits) > 1:
                groups.setdefault(hits, []).append(name)
        return [
            PrefixOverlap(
                winner=self.rules[hits[0]],
                shadowed=tuple(self.rules[i] for i in hits[1:]),
                tasks=tuple(sorted(names)),
            )
            for hits, names in sorted(groups.items())
        ]


def format_overlaps(overlaps: list[PrefixOverlap]) -> list[str]:
    """Human-readable lines for :meth:`PrefixConfig.overlaps`, one per group."""
    lines = []
    for group in overlaps:
        others = ", ".join(repr(rule.prefix) for rule in group.shadowed)
        lines.append(
            f"{counted(len(group.tasks), 'task')} {'matches' if len(group.tasks) == 1 else 'match'} "
            f"{group.winner.prefix!r} and also {others}; "
            f"the first ({group.winner.prefix!r}) applies (e.g. {group.tasks[0]})"
        )
    return lines


def _is_int(value: Any) -> bool:
    # YAML ``true`` loads as bool, which is an int subclass: reject it explicitly.
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_rule(item: Any, position: int, source: str) -> PrefixRule:
    where = f"{source}: item {position}"
    if not isinstance(item, dict):
        raise ConfigError(
            f"{where} is {type(item).__name__} {item!r}; every item must be a mapping such as "
            f"'- prefix: flan__' with optional max_per_file, long_context, repeat"
        )
    prefix = item.get("prefix")
    if not isinstance(prefix, str) or not prefix:
        raise ConfigError(f"{where}: 'prefix' is missing or not a non-empty string ({prefix!r})")
    where = f"{source}: item {position} (prefix {prefix!r})"
    unknown = sorted(str(key) for key in item if key not in _FIELDS)
    if unknown:
        raise ConfigError(
            f"{where}: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(_FIELDS)}"
        )
    max_per_file = item.get("max_per_file")
    if max_per_file is not None and (not _is_int(max_per_file) or max_per_file < 0):
        raise ConfigError(
            f"{where}: max_per_file must be a non-negative integer or null (no cap), "
            f"got {max_per_file!r}"
        )
    long_context = item.get("long_context", "truncate")
    if long_context not in LONG_CONTEXT_MODES:
        raise ConfigError(
            f"{where}: long_context must be 'truncate' or 'drop', got {long_context!r}"
        )
    repeat = item.get("repeat", 1)
    if not _is_int(repeat) or repeat < 1:
        raise ConfigError(f"{where}: repeat must be an integer >= 1, got {repeat!r}")
    return PrefixRule(
        prefix=prefix, max_per_file=max_per_file, long_context=long_context, repeat=repeat
    )


def parse_prefix_config(data: Any, source: str = "<memory>") -> PrefixConfig:
    """Validate already-loaded YAML data (``None`` or a list of mappings)."""
    if data is None:
        return PrefixConfig(rules=[], source=source)
    if not isinstance(data, list):
        raise ConfigError(
            f"{source}: the top level must be a list of rules ('- prefix: ...'), "
            f"got {type(data).__name__}"
        )
    rules = [_parse_rule(item, position, source) for position, item in enumerate(data, 1)]
    # A rule listed after one whose prefix is a prefix of its own can never apply: almost
    # certainly an ordering mistake (e.g. 'flan__' above 'flan__cot_'), so say so now.
    for later_pos, later in enumerate(rules, 1):
        for earlier_pos, earlier in enumerate(rules[: later_pos - 1], 1):
            if later.prefix.startswith(earlier.prefix):
                raise ConfigError(
                    f"{source}: item {later_pos} (prefix {later.prefix!r}) can never apply: "
                    f"item {earlier_pos} (prefix {earlier.prefix!r}) comes first and matches "
                    f"every name it matches; move item {later_pos} above item {earlier_pos} "
                    f"or remove it"
                )
    return PrefixConfig(rules=rules, source=source)


def load_prefix_config(path: str | os.PathLike[str]) -> PrefixConfig:
    """Read and validate ``prefix_config.yaml``; raise :class:`ConfigError` naming the item."""
    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8")
    except FileNotFoundError:
        relative = (
            "" if os.path.isabs(source) else f" (relative to the current folder {Path.cwd()})"
        )
        raise ConfigError(
            f"prefix config {source!r} does not exist{relative}; pass an existing file: "
            "--prefix-config FILE to `data_io train-tokenizer` (--prefix-config none uses "
            "every text), prefix_config_path=FILE to sample_tokenized.py / `data_io sample`; "
            "the repository ships prefix_config.yaml at its root"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"prefix config {source!r} cannot be read: {exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from exc
    return parse_prefix_config(data, source)
