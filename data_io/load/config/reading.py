"""A job file (TOML or YAML) or a dict of its sections read into a validated ``LoaderConfig``:
the loader's sections picked, the trainer's left, each table checked against its dataclass so
that an error names the file and the key's full path."""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from data_io.errors import ConfigError
from data_io.load.config.loader_config import LoaderConfig
from data_io.load.config.messages import in_file, omegaconf_error
from data_io.load.config.overrides import apply_overrides
from data_io.load.config.sections import (
    DataConfig,
    DatasetSource,
    EvalConfig,
    TrainingPhase,
    TrainSection,
)
from data_io.load.config.trainer_keys import TRAINER_SECTIONS, near_miss, trainers_key
from data_io.load.config.xorl_sources import xorl_sources


def config_from_dict(raw: Mapping[str, Any], where: str = "config") -> LoaderConfig:
    """A validated ``LoaderConfig`` from the sections of a parsed job file."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: the top level must be a table of sections")
    train = _section(raw, "train", where)
    for key in train:
        mine = key in TrainSection.__dataclass_fields__
        if isinstance(key, str) and not mine and not trainers_key(f"train.{key}"):
            raise near_miss(where, key)
    with in_file(where):
        data = xorl_sources(_section(raw, "data", where))
    picked = {
        "data": data,
        "eval": _section(raw, "eval", where),
        # The trainer's [train] has many keys; the loader reads these.
        "train": {k: train[k] for k in TrainSection.__dataclass_fields__ if k in train},
    }
    _check_containers(picked, where)
    _check_entries(data, where)
    try:
        merged = OmegaConf.merge(OmegaConf.structured(LoaderConfig), picked)
        config = OmegaConf.to_object(merged)
    except OmegaConfBaseException as err:
        raise omegaconf_error(where, err) from err
    assert isinstance(config, LoaderConfig)
    with in_file(where):
        return config.validate()


def _section(raw: Mapping[str, Any], name: str, where: str) -> dict[str, Any]:
    value = raw.get(name, {})
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: [{name}] must be a table, got {type(value).__name__}")
    return dict(value)


def _check_containers(picked: Mapping[str, Mapping[str, Any]], where: str) -> None:
    """A list where the config has a list, a table where it has a table: OmegaConf's merge
    raises a bare TypeError otherwise ("Cannot merge incompatible container types")."""
    kinds = {"data": DataConfig, "eval": EvalConfig, "train": TrainSection}
    for section, values in picked.items():
        defaults = kinds[section]()
        for key, value in values.items():
            if not isinstance(key, str):  # YAML allows null, numbers or lists as keys
                raise ConfigError(f"{where}: [{section}] has a key {key!r}; keys are names")
            default = getattr(defaults, key, None)
            for shape, name in ((list, "a list"), (dict, "a table")):
                if isinstance(default, shape) and not isinstance(
                    value, (list, tuple) if shape is list else Mapping
                ):
                    raise ConfigError(
                        f"{where}: {section}.{key} must be {name}, got {type(value).__name__} "
                        f"{value!r}"
                    )


def _check_entries(data: Mapping[str, Any], where: str) -> None:
    """Each table of ``data.datasets`` and ``data.phases`` against its dataclass, one by one:
    merged in the whole config, OmegaConf names a wrong key without its list and position
    (``key weight``, not ``data.datasets[0].weight``)."""
    for name, kind in (("datasets", DatasetSource), ("phases", TrainingPhase)):
        entries = data.get(name)
        if not isinstance(entries, list):
            continue
        for i, entry in enumerate(entries):
            if not isinstance(entry, Mapping):
                continue  # the whole merge names it (int is not a subclass of DatasetSource)
            try:
                OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(kind), dict(entry)))
            except OmegaConfBaseException as err:
                raise omegaconf_error(where, err, f"data.{name}[{i}]", kind) from err


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the config ({err.strerror})") from err
    except UnicodeDecodeError as err:  # a binary file, or text in another encoding
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {err.start}: {err.reason}); a config is a TOML or "
            "YAML file saved as UTF-8"
        ) from err
    try:
        if path.suffix == ".toml":
            return tomllib.loads(text)
        if path.suffix in (".yaml", ".yml"):
            return yaml.load(text, Loader=_UniqueKeyLoader) or {}  # a SafeLoader
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as err:
        raise ConfigError(f"{path}: not valid {path.suffix[1:].upper()} ({err})") from err
    raise ConfigError(f"{path}: a config is a .toml, .yaml or .yml file")


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping: PyYAML keeps the last
    silently (a second ``datasets:`` would drop the first list's sources), TOML refuses it."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                continue  # `<<: *base` merges: its keys may be overridden, as YAML intends
            key = self.construct_object(key_node)
            line = key_node.start_mark.line + 1
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {key!r} given twice (lines {seen[key]} and {line}); keep one",
                    key_node.start_mark,
                )
            if isinstance(key, (str, int, float, bool)):
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def as_loader_config(
    config: LoaderConfig | str | Path | Mapping[str, Any], overrides: Sequence[str] = ()
) -> LoaderConfig:
    """``config`` as the builders take it (a ``LoaderConfig``, the path of a TOML or YAML job
    file, or a dict of its sections) made a ``LoaderConfig``, with ``overrides`` applied."""
    if isinstance(config, Mapping):
        config = config_from_dict(config, "the config dict")
    elif not isinstance(config, (LoaderConfig, str, Path)):
        raise ConfigError(
            f"config must be a LoaderConfig, the path of a TOML or YAML job file, or a dict of "
            f"its sections, got {type(config).__name__}"
        )
    if not isinstance(config, LoaderConfig):
        return load_config(config, overrides)
    return apply_overrides(config, overrides) if overrides else config


def load_config(path: str | Path | None = None, overrides: Sequence[str] = ()) -> LoaderConfig:
    """Read ``path`` (TOML/YAML; None: defaults) and apply ``key=value`` overrides (also
    KempnerForge's ``--section.key=value`` spelling)."""
    where = str(path) if path is not None else "defaults"
    raw = _read(Path(path)) if path is not None else {}
    if path is not None and Path(path).suffix == ".toml":
        _check_section_names(raw, where)
    config = config_from_dict(raw, where)
    return apply_overrides(config, overrides, where) if overrides else config


def _check_section_names(raw: Mapping[str, Any], where: str) -> None:
    """A KempnerForge job file's ``[dat]`` or ``[evl]``: KempnerForge's loader refuses any
    section its JobConfig lacks; skipped here, the loader would read no data, or no eval,
    without a word. (An xorl YAML's other sections are many and unknown here: not checked.)"""
    ours = ("data", "eval", "train")
    for name in raw:
        if not isinstance(name, str) or name in ours or name in TRAINER_SECTIONS:
            continue
        close = difflib.get_close_matches(name.lower(), ours, n=1, cutoff=0.75)
        if close and close[0] not in raw:
            raise ConfigError(
                f"{where}: section [{name}] is not one KempnerForge has, and is close to "
                f"[{close[0]}] (a typo?), which the file lacks: rename it [{close[0]}]"
            )
