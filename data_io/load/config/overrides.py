"""``section.key=value`` overrides (OmegaConf's dotlist, KempnerForge's ``--section.key=value``)
applied to a config: each key's path walked first, so that a typo or a list position past the
end is named, then the whole config validated again."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import Any

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from data_io.errors import ConfigError
from data_io.load.config.loader_config import LoaderConfig
from data_io.load.config.messages import in_file, omegaconf_error
from data_io.load.config.sections import DataConfig, EvalConfig, EvalSet, TrainSection
from data_io.load.config.trainer_keys import OVERRIDE_KEY, TRAINER_SECTIONS, trainers_key

_SOURCE_FILES = re.compile(r"data\.datasets\.\d+\.data_files")


def apply_overrides(
    config: LoaderConfig, overrides: Sequence[str], where: str = "config"
) -> LoaderConfig:
    """``config`` with ``section.key=value`` overrides applied, validated again."""
    if isinstance(overrides, str):
        overrides = [overrides]  # one override, not its characters
    try:
        base = OmegaConf.merge(OmegaConf.structured(LoaderConfig), OmegaConf.structured(config))
        for item in overrides:
            key, sep, value = str(item).partition("=")
            key = key.strip().removeprefix("--")
            if not sep or not OVERRIDE_KEY.fullmatch(key):
                raise ConfigError(
                    f"override {item!r} is not KEY=VALUE with a dotted key (e.g. data.num_workers=2, "
                    "--data.num_workers=2 or data.datasets.0.weight=2)"
                )
            if trainers_key(key):
                continue  # as in a job file: the trainer's, not the loader's
            _new_eval_set(base, key)
            _check_override_path(base, item, key, f"{where} with overrides")
            try:
                parsed = yaml.safe_load(value)
            except yaml.YAMLError:
                # Not YAML (`*.bin` reads as an alias, control characters are refused): the
                # text itself, which the typed config then accepts or names as wrong.
                parsed = value
            if parsed is None and not value.strip() and isinstance(_current(base, key), str):
                # `--data.dataset_path=`: KempnerForge's unset text key is "" (its defaults),
                # not the null that YAML reads, which a text key does not take.
                parsed = ""
            try:
                OmegaConf.update(base, key, parsed, merge=True)
            except (ConfigKeyError, ConfigAttributeError) as err:
                raise _unknown_override(item, key) from err
            if _SOURCE_FILES.fullmatch(key):
                # data_files given here replace a table of splits the file gave.
                OmegaConf.update(base, key.rpartition(".")[0] + ".split_files", None)
        merged = OmegaConf.to_object(base)
    except OmegaConfBaseException as err:
        raise omegaconf_error(f"{where} with overrides", err) from err
    assert isinstance(merged, LoaderConfig)
    with in_file(f"{where} with overrides"):
        return merged.validate()


def _current(base: Any, key: str) -> Any:
    """The value ``key`` has before an override (None where there is none yet)."""
    try:
        return OmegaConf.select(base, key, default=None)
    except OmegaConfBaseException:
        return None


def _unknown_override(item: str, key: str) -> ConfigError:
    """An override naming a key the config does not have: say which, and what there is."""
    section, _, rest = key.partition(".")
    kinds = {"data": DataConfig, "eval": EvalConfig, "train": TrainSection}
    if section not in kinds:
        known = (
            f"sections are {', '.join(kinds)}, and KempnerForge's trainer's "
            f"{', '.join(TRAINER_SECTIONS)} are skipped"
        )
    elif "." in rest:
        known = "see the keys of that table"
    else:
        fields = list(kinds[section].__dataclass_fields__)
        known = f"[{section}] keys are {', '.join(fields)}"
        close = difflib.get_close_matches(rest, fields, n=1, cutoff=0.6)
        if close:
            key = f"{key} (close to {close[0]!r}: a typo?)"
    return ConfigError(f"override {item!r}: unknown key {key}; {known}")


# What an override's list position counts, for its message.
_ITEMS = {"data.datasets": "source", "data.phases": "phase"}


def _check_override_path(base: Any, item: str, key: str, where: str) -> None:
    """Walk ``key`` (``data.datasets.0.weight``) through the config before OmegaConf sets it:
    it names a list position that is not a number or is past the end ("dict is not a subclass
    of DatasetSource. value: {}"), or a typo in a source, phase or eval set ("see the keys of
    that table"), without saying which. Sections and [data]/[eval]/[train] keys are left to
    ``_unknown_override``; a plain table's new key (``dataset_weights.web``) is allowed."""
    parts = key.split(".")
    if parts[0] not in base:
        return
    node = base[parts[0]]
    shown = parts[0]  # the path as the messages write it: data.datasets[0].weight
    for depth, part in enumerate(parts[1:], start=1):
        if OmegaConf.is_list(node):
            noun = _ITEMS.get(shown, "item")
            count = len(node)
            has = (
                f"{shown} is empty"
                if not count
                else f"{shown} has 1 {noun} (position 0)"
                if count == 1
                else f"{shown} has {count} {noun}s (positions 0 to {count - 1})"
            )
            whole = (
                f"give the whole list ({shown}=[{{path: a}}, {{path: b}}])"
                if shown == "data.datasets"
                else f"give the whole list ({shown}=[...])"
            )
            if not part.isdigit():
                raise ConfigError(
                    f"{where}: override {item!r}: {shown} is a list and {part!r} is not a "
                    f"position in it; {has}: write {'.'.join(parts[:depth])}.0"
                    f"{'.' + '.'.join(parts[depth + 1 :]) if depth + 1 < len(parts) else ''}"
                )
            if int(part) >= count:
                raise ConfigError(
                    f"{where}: override {item!r}: position {part} is past the end of {shown}: "
                    f"{has}. An override sets a key of a {noun} the file has: add the {noun} "
                    f"to the file, or {whole}"
                )
            node = node[int(part)]
            shown = f"{shown}[{part}]"
        elif OmegaConf.is_dict(node):
            kind = OmegaConf.get_type(node)
            if part not in node:
                if depth < 2 or kind is dict or kind is None:
                    return  # a section or its key (_unknown_override), or a plain table's
                known = list(kind.__dataclass_fields__)
                close = difflib.get_close_matches(part, known, n=1, cutoff=0.6)
                near = f" (close to {close[0]!r}: a typo?)" if close else ""
                raise ConfigError(
                    f"{where}: override {item!r}: {shown} has no key {part!r}{near}; its keys "
                    f"are {', '.join(known)}"
                )
            node = node[part]
            shown = f"{shown}.{part}"
        else:
            return  # a value, or None: OmegaConf names what follows


def _new_eval_set(base: Any, key: str) -> None:
    """Add the named eval set an override like ``eval.sets.general.dataset_path=…`` is the
    first to mention (OmegaConf would make it a plain dict, refused as not an ``EvalSet``)."""
    parts = key.split(".")
    if len(parts) > 3 and parts[:2] == ["eval", "sets"] and parts[2] not in base.eval.sets:
        base.eval.sets[parts[2]] = OmegaConf.structured(EvalSet)
