"""The sampler's configuration: an OmegaConf schema over ``key=value`` arguments.

The keys and defaults of the original ``sample_tokenized.py`` are kept (formats.md §4) so that
existing command lines keep working; the keys added here only switch on behaviour the original
lacked. Unknown keys, wrong types and impossible values raise :class:`ConfigError` naming the key.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from data_io.errors import ConfigError

SHORT_TRUNCATED_POLICIES = ("drop", "keep")
# compat=original: every .npy written is byte for byte what the original sampler writes for the
# same input and seed (docs/compat/hrm-text.md); "none" keeps this project's choices.
COMPAT_MODES = ("none", "original")


@dataclass
class SampleConfig:
    """Options of ``sample_tokenized.py`` / ``data_io sample`` (``key=value`` on the command line)."""

    # The original's keys, same names, same defaults.
    tokenized_path: str = "data_tokenized_bpe_65k"
    output_path: str = "/dev/shm/sampled"
    prefix_config_path: str = "prefix_config.yaml"
    seed: int = 0
    epochs: int = 10
    context_size: int = 4096 + 1  # +1 for the autoregressive shift
    min_resp_length: int = 2  # one content token + EOA
    # What to do with a row whose truncated response keeps a single token: the trainer sees
    # zero causal tokens for it, and a batch of such rows crashes FlashAttention's backward.
    # "drop" (default) removes them and counts them; "keep" reproduces the original exactly.
    # Unset (None): "drop", or "keep" with compat=original (settled in __post_init__).
    short_truncated: str | None = None
    # Reuse a complete output built from the same inputs, config and code (false: rebuild).
    reuse: bool = True
    # The PNG with length distributions and tokens per category (plot=false: none).
    plot: bool = True
    # Where it goes; null = <output_path>/analytics.png, inside the output.
    plot_path: str | None = None
    # An empty sample (no task, or every row dropped) is refused; true publishes it anyway.
    allow_empty: bool = False
    # "original": the original sampler's token-pool dtype rule and short_truncated=keep, so
    # that its users' SHA-256 checks of the .npy files keep passing. "none": this project's.
    compat: str = "none"

    def __post_init__(self) -> None:
        # Settled here, not only on the command line: a SampleConfig made in Python with
        # compat="original" must keep these rows too, or its .npy files silently differ.
        if self.short_truncated is None:
            self.short_truncated = "keep" if self.compat == "original" else "drop"


CONFIG_KEYS: tuple[str, ...] = tuple(f.name for f in fields(SampleConfig))

# What each key does, for --help (every key must have one: tests/sampling/test_config.py).
KEY_HELP: dict[str, str] = {
    "tokenized_path": "the tokenizer's output folder (data_io tokenize -o); read only",
    "output_path": "where the sample is written (a RAM disk on training nodes); a previous "
    "sample there is kept until the new one is complete (when space is short it is deleted "
    "first, after every check, and that is said); must not be tokenized_path, be inside "
    "it, contain it, or be a mount point itself",
    "prefix_config_path": "YAML list of rules per task-name prefix: max_per_file, "
    "long_context (truncate/drop), repeat",
    "seed": "seed of the Philox generator (same inputs and seed: same epochs)",
    "epochs": "number of epoch_<k> folders to write",
    "context_size": "longest row in tokens (4096 + 1 for the autoregressive shift); longer "
    "rows are truncated or dropped as the prefix rule says",
    "min_resp_length": "rows whose response is shorter are dropped (2 = one content token + EOA)",
    "short_truncated": "'drop' removes rows that truncation leaves with a 1-token response "
    "(they crash FlashAttention's backward when a batch holds only such rows); 'keep' "
    "reproduces the original sampler",
    "reuse": "reuse a complete output built from the same inputs, config and code; false rebuilds",
    "plot": "write a PNG of length distributions and tokens per category",
    "plot_path": "where the PNG goes; null = <output_path>/analytics.png",
    "allow_empty": "publish an empty sample (no task, or every row dropped) instead of failing",
    "compat": "'original' writes every .npy byte-identical to the original sampler's for the "
    "same input and seed (its token-pool dtype rule: int32 for a 65,536-token vocabulary, "
    "where 'none' uses uint16; and short_truncated=keep); see docs/compat/hrm-text.md",
}


def dashed_settings_hint(unknown: Sequence[str], argv: Sequence[str]) -> str:
    """``--epochs=10`` or ``--seed 3`` (``argv``'s next argument) for ``epochs=10``/``seed=3``:
    the key=value spelling of the settings among the ``unknown`` options; ``""`` when none is
    a setting (``--verbose`` is not)."""
    pairs = []
    for option in (a for a in unknown if a.startswith("--")):
        key, _, value = option.lstrip("-").partition("=")
        key = key.replace("-", "_")
        if key not in CONFIG_KEYS:
            continue
        if not value and option in argv:
            after = list(argv)[list(argv).index(option) + 1 :][:1]
            value = (
                after[0] if after and not after[0].startswith("-") and "=" not in after[0] else ""
            )
        pairs.append(f"{key}={value or 'VALUE'}")
    return f"; settings are key=value arguments without dashes: {' '.join(pairs)}" if pairs else ""


def parse_overrides(overrides: Sequence[str]) -> SampleConfig:
    """Build a validated :class:`SampleConfig` from ``key=value`` strings."""
    _check_hydra_prefixes(overrides)
    for index, item in enumerate(overrides):
        if item.startswith("-") or "=" not in item:
            # `epochs = 10` or `epochs =10`: the shell made separate arguments of them.
            rest = [*overrides[index + 1 : index + 3], "", ""]
            value = rest[1] if rest[0] == "=" else rest[0][1:]
            value = "VALUE" if not value or "=" in value else value
            hint = ""
            if item in CONFIG_KEYS and rest[0].startswith("="):
                hint = f"; write {item}={value} as one argument, without spaces around '='"
            elif item in CONFIG_KEYS:
                hint = f"; write {item}=VALUE"
            raise ConfigError(
                f"argument {item!r} is not key=value{hint}; valid keys: {', '.join(CONFIG_KEYS)}"
            )
    _check_switches(overrides)
    _note_duplicates(overrides)
    try:
        merged = OmegaConf.merge(OmegaConf.structured(SampleConfig), OmegaConf.from_cli(overrides))
        config = OmegaConf.to_object(merged)
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or getattr(exc, "key", None) or "?"
        detail = str(exc).splitlines()[0]
        if key not in CONFIG_KEYS:
            detail += f"; valid keys: {', '.join(CONFIG_KEYS)}"
        raise ConfigError(f"config key {key!r}: {detail}") from None
    assert isinstance(config, SampleConfig)
    validate(config)
    return config


def _check_hydra_prefixes(overrides: Sequence[str]) -> None:
    """Hydra's ``+key=value`` (add a key), ``++key=value`` (add or override) and ``~key``
    (delete a key): the original read its settings with OmegaConf, which has none of them, and
    every key here exists with a default, so there is nothing to add or delete."""
    for item in overrides:
        if not item.startswith(("+", "~")):
            continue
        typed = item.lstrip("+~")
        key, sep, value = typed.partition("=")
        if key not in CONFIG_KEYS:
            raise ConfigError(
                f"argument {item!r}: settings are key=value, without Hydra's '+', '++' or '~', "
                f"and {key!r} is not a key either; valid keys: {', '.join(CONFIG_KEYS)}"
            )
        if item.startswith("~"):
            fix = f"leave {key} out to keep its default"
        else:
            fix = f"write {key}={value if sep and value else 'VALUE'}"
        raise ConfigError(
            f"argument {item!r}: settings are key=value, without Hydra's '+', '++' or '~' "
            f"(every key exists, with a default): {fix}"
        )


def _note_duplicates(overrides: Sequence[str]) -> None:
    """A key given twice (``epochs=2 ... epochs=3``): the last one is used, as the original's
    ``OmegaConf.from_cli`` does (a wrapper that appends overrides to a base command line relies
    on it), and said on stderr, since in a long command line it may also be a slip."""
    seen: dict[str, list[str]] = {}
    for item in overrides:
        key, _, value = item.partition("=")
        seen.setdefault(key, []).append(value)
    for key, values in seen.items():
        if len(values) > 1:
            given = ", then ".join(f"{key}={value}" for value in values)
            print(
                f"sample: note: {key} is given {len(values)} times ({given}); the last is used",
                file=sys.stderr,
                flush=True,
            )


# The keys that switch something on or off, and the words OmegaConf reads as a switch. It
# also reads any other integer as true (plot=2), which is more likely a slip than a wish.
_SWITCHES = tuple(f.name for f in fields(SampleConfig) if f.type in (bool, "bool"))
_SWITCH_WORDS = ("true", "false", "yes", "no", "on", "off", "y", "n", "1", "0")


def _check_switches(overrides: Sequence[str]) -> None:
    for item in overrides:
        key, _, value = item.partition("=")
        if key in _SWITCHES and value.strip().lower() not in _SWITCH_WORDS:
            raise ConfigError(f"config key {key!r} is true or false, got {value!r}")


def validate(config: SampleConfig) -> None:
    """Reject impossible values, naming the key and how to fix it."""
    if config.epochs < 1:
        raise ConfigError(f"config key 'epochs' must be >= 1, got {config.epochs}")
    if config.context_size < 2:
        raise ConfigError(
            f"config key 'context_size' must be >= 2 (one instruction token and one response "
            f"token), got {config.context_size}"
        )
    if config.min_resp_length < 1:
        raise ConfigError(
            f"config key 'min_resp_length' must be >= 1 (every response ends with EOA), "
            f"got {config.min_resp_length}"
        )
    if config.seed < 0:
        raise ConfigError(f"config key 'seed' must be >= 0 (numpy Philox), got {config.seed}")
    if config.short_truncated not in SHORT_TRUNCATED_POLICIES:
        raise ConfigError(
            f"config key 'short_truncated' must be 'drop' or 'keep', got {config.short_truncated!r}"
        )
    if config.compat not in COMPAT_MODES:
        raise ConfigError(
            f"config key 'compat' must be 'none' or 'original', got {config.compat!r}"
        )
    if config.compat == "original" and config.short_truncated != "keep":
        raise ConfigError(
            "config key 'short_truncated' must be 'keep' with compat=original: the original "
            "sampler keeps rows that truncation leaves with a 1-token response, so dropping "
            "them changes the epoch arrays; leave short_truncated out (compat=original sets "
            "keep) or leave compat out"
        )
    for key in ("tokenized_path", "output_path", "prefix_config_path"):
        if not getattr(config, key):
            raise ConfigError(f"config key {key!r} is empty")
    tokenized = Path(config.tokenized_path)
    if not tokenized.is_dir():
        raise ConfigError(
            f"config key 'tokenized_path': {str(tokenized)!r}{_relative(tokenized)} is not a "
            f"directory; point it at the tokenizer's output (tokenized_path=<dir>)"
        )
    prefix = Path(config.prefix_config_path)
    if not prefix.is_file():
        raise ConfigError(
            f"config key 'prefix_config_path': {str(prefix)!r}{_relative(prefix)} does not "
            f"exist; pass prefix_config_path=<file> (the repository has prefix_config.yaml)"
        )


def _relative(path: Path) -> str:
    """Where a relative path was looked for: the defaults are relative to the repository's
    root, and the command may run elsewhere."""
    return "" if path.is_absolute() else f" (relative to the current folder {Path.cwd()})"


def _cli_value(value: object) -> str:
    """A default as it is typed on the command line (true, null, plain strings)."""
    if isinstance(value, bool):
        return str(value).lower()
    return "null" if value is None else str(value)


def config_help() -> str:
    """Each key with its default, as typed on the command line, and what it does."""
    defaults = SampleConfig()
    return "\n".join(
        f"  {key}={_cli_value(getattr(defaults, key))}\n"
        + textwrap.fill(KEY_HELP[key], width=92, initial_indent=" " * 6, subsequent_indent=" " * 6)
        for key in CONFIG_KEYS
    )
