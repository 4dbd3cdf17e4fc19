"""The loader's typed configuration: KempnerForge's ``[data]``/``[eval]``, xorl's ``datasets:``.

``LoaderConfig`` holds ``data`` (``DataConfig``), ``eval`` (``EvalConfig``) and ``train``
(``TrainSection``: the ``[train]`` fields a loader needs: ``batch_size``, ``seq_len``,
``seed``, and xorl's ``ringattn_parallel_size``/``ulysses_parallel_size``). Field names and
defaults are the seeds'; data_io's additions are marked below.
``load_config`` reads TOML or YAML and applies OmegaConf dotlist overrides
(``data.datasets.0.weight=2``). Inside ``data``/``eval`` an unknown key or a value of the wrong
type is an error naming the key; other sections of a job file (``[model]``, ``[optimizer]``...)
and the trainer's other ``[train]`` keys belong to the trainer and are ignored.
"""

from __future__ import annotations

import difflib
import math
import re
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from data_io.errors import ConfigError
from data_io.formats.shards import TOKEN_DTYPES
from data_io.load.datasets.row_sources import FORMATS
from data_io.load.order.mixing import resolve_phases  # checks KempnerForge's phase rules
from data_io.load.packing.row_bins import check_sequence_len

__all__ = [
    "EVAL_MAIN_SET",
    "DataConfig",
    "DatasetSource",
    "EvalConfig",
    "EvalSet",
    "LoaderConfig",
    "TrainSection",
    "TrainingPhase",
    "load_config",
]

PACKING_METHODS = ("sequential", "multipack")
# A dotted key: names, and list positions (data.datasets.0.weight); OmegaConf itself fails on
# other text with errors that do not name the override (an IndexError for "[6_m").
_OVERRIDE_KEY = re.compile(r"[A-Za-z_]\w*(\.(\w+))+")
_SOURCE_FILES = re.compile(r"data\.datasets\.\d+\.data_files")


@dataclass
class DatasetSource:
    """One source of a mixture (KempnerForge) or of a tokenized-row list (xorl)."""

    path: str = ""  # pre-tokenized shard directory; for type="tokenized", the rows
    weight: float = 1.0  # relative sampling weight, > 0
    # KempnerForge (token sources): the name for metrics and phase weights (derived from
    # path/hf_name if empty). xorl (type: tokenized): the Hub config name given to
    # datasets.load_dataset, as in xorl; such a source's metrics name is metrics_name.
    name: str = ""
    hf_name: str | None = None  # HF dataset id (eager, tokenized into the cache)
    hf_config: str | None = None
    # data_io additions
    file_pattern: str | None = None  # overrides data.file_pattern for this source
    hf_split: str | None = None  # overrides data.hf_dataset_split
    dtype: str | None = None  # token dtype of this source's raw .bin shards (overrides data.dtype)
    # xorl's tokenized rows ({input_ids, labels}); these follow datasets.load_dataset
    type: str = ""  # "" (shards or HF text) or "tokenized"
    metrics_name: str = ""  # a tokenized source's name in summaries and metrics (default: path)
    split: str = "train"
    data_dir: str | None = None
    data_files: list[str] | None = None
    # data_io's: data_files as given as a table of splits ({train: [...], test: [...]}); the
    # validated config's data_files are the files of its split (read as rows of the split
    # 'train', as load_dataset makes of a list), again after an override of split.
    split_files: dict[str, list[str]] | None = None
    revision: str | None = None
    trust_remote_code: bool | None = None
    streaming: bool = False
    token: str | None = None  # a Hub token (default: the one `hf auth login` saved)
    max_seq_len: int | None = None
    select_columns: list[str] | None = None
    storage_options: dict[str, Any] | None = None  # fsspec options for s3://, gs://, abfs://


@dataclass
class TrainingPhase:
    start_step: int = 0  # step at which the phase activates
    dataset_weights: dict[str, float] = field(default_factory=dict)
    lr_scale: float = 1.0  # multiplier applied to the scheduler's LR


@dataclass
class DataConfig:
    dataset_path: str = ""
    file_pattern: str = "*.npy"
    # data_io's: the token dtype of raw .bin shards (uint16, uint32...), when their folder's
    # metadata does not declare it: KempnerForge guesses it from the file size, data_io never.
    dtype: str | None = None
    tokenizer_path: str = ""
    num_workers: int = 4
    pin_memory: bool = True
    prefetch_factor: int = 2
    pack_sequences: bool = False
    hf_dataset_name: str | None = None
    hf_dataset_config: str | None = None
    hf_dataset_split: str = "train"
    hf_dataset_text_field: str = "text"
    # KempnerForge's VLM-only keys: its text runs read them not, nor does data_io (text only).
    hf_dataset_image_field: str = "image"
    hf_dataset_prompt_field: str = ""
    hf_image_size: int = 224
    hf_streaming: bool = False
    # KempnerForge's completion-masked SFT (paired *.tokens.npy/*.labels.npy): refused when on.
    masked_sft: bool = False
    datasets: list[DatasetSource] = field(default_factory=list)
    mix_temperature: float = 1.0
    phases: list[TrainingPhase] = field(default_factory=list)
    anneal_start_step: int = 0
    anneal_weights: dict[str, float] = field(default_factory=dict)
    # data_io additions
    eos_token_id: int | None = None  # default: the tokenizer's EOS (needed by pack_sequences)
    position_ids: bool = False  # packed samples: positions restarting per document
    cu_seqlens: bool = False  # packed samples: document boundaries for varlen attention
    vocab_size: int | None = None  # token ids are checked below it (default: the tokenizer's)
    shuffle: bool = True
    seed: int | None = None  # the data order's seed (xorl's data.seed); default: train.seed
    cache_dir: str = ""  # where eager HF sources are tokenized to (default: ~/.cache/data_io)
    # xorl's packing of tokenized rows
    sample_packing_method: str | None = None  # "sequential" | "multipack" | None
    sample_packing_sequence_len: int | None = None
    # "": the user's cache folder (tokenized_rows.default_prepared_path), never the current one
    dataset_prepared_path: str = ""
    select_columns: list[str] | None = None


# The name of [eval]'s own source among the eval sets (MyPT logs it as "val").
EVAL_MAIN_SET = "val"


@dataclass
class EvalSet:
    """A named eval set beside ``[eval]``'s own, read the same way (``[eval.sets.general]``):
    MyPT's dual eval, a domain's val loss and a general one to watch for forgetting."""

    dataset_path: str = ""
    file_pattern: str = "*.npy"
    hf_dataset_name: str | None = None
    hf_dataset_config: str | None = None
    hf_dataset_split: str = "validation"
    dtype: str | None = None  # of raw .bin shards (default: data.dtype)


@dataclass
class EvalConfig(EvalSet):
    """``[eval]``: its own source (the fields of ``EvalSet``, the set named ``val``), when and
    how long to evaluate, and more sets by name."""

    enabled: bool = False
    interval: int = 1000  # evaluate every N training steps
    steps: int = 50  # batches per evaluation
    # More eval sets by name; [eval]'s own source (if any) is the set named "val".
    sets: dict[str, EvalSet] = field(default_factory=dict)


@dataclass
class TrainSection:
    batch_size: int = 8  # per-device micro-batch
    seq_len: int = 2048  # tokens per sequence (windows of seq_len + 1 are read)
    seed: int = 42
    # xorl's train: keys that shape tokenized rows: above 1, every row of an item is padded to
    # a multiple of 2 x ringattn_parallel_size x ulysses_parallel_size (ring attention's split).
    ringattn_parallel_size: int = 1
    ulysses_parallel_size: int = 1


@dataclass
class LoaderConfig:
    data: DataConfig = field(default_factory=DataConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    train: TrainSection = field(default_factory=TrainSection)

    def validate(self) -> LoaderConfig:
        _validate(self)
        return self


def _omegaconf_error(
    where: str, err: OmegaConfBaseException, place: str = "", kind: type | None = None
) -> ConfigError:
    """OmegaConf's message with the key's full path: ``place`` is where the checked table sits
    (``data.datasets[1]``), ``kind`` its dataclass, whose field's type says what the key takes."""
    message = str(err).splitlines()[0]
    key = getattr(err, "full_key", None) or ""
    full = f"{place}.{key}" if place and key else place or key
    takes = ""
    if kind is not None and key:
        annotation = getattr(kind.__dataclass_fields__.get(key.split(".")[0]), "type", None)
        if isinstance(annotation, str):  # `from __future__ import annotations`: the text
            takes = f"; {full} takes {annotation}"
    return ConfigError(f"{where}: {message}" + (f" (key {full})" if full else "") + takes)


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
                raise _omegaconf_error(where, err, f"data.{name}[{i}]", kind) from err


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


def _section(raw: Mapping[str, Any], name: str, where: str) -> dict[str, Any]:
    value = raw.get(name, {})
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: [{name}] must be a table, got {type(value).__name__}")
    return dict(value)


def config_from_dict(raw: Mapping[str, Any], where: str = "config") -> LoaderConfig:
    """A validated ``LoaderConfig`` from the sections of a parsed job file."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: the top level must be a table of sections")
    train = _section(raw, "train", where)
    for key in train:
        mine = key in TrainSection.__dataclass_fields__
        if isinstance(key, str) and not mine and not _trainers_key(f"train.{key}"):
            raise _near_miss(where, key)
    with _in_file(where):
        data = _xorl_sources(_section(raw, "data", where))
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
        raise _omegaconf_error(where, err) from err
    assert isinstance(config, LoaderConfig)
    with _in_file(where):
        return config.validate()


@contextmanager
def _in_file(where: str) -> Iterator[None]:
    """Prefix a check's message with the file it read (``job.toml: train.batch_size must be
    >= 1``): the checks name the key, and a job may have several config files."""
    try:
        yield
    except ConfigError as err:
        message = str(err)
        if message.startswith(f"{where}:"):
            raise
        raise ConfigError(f"{where}: {message}") from err


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


def _looks_like_rows(path: str) -> bool:
    """A file of tokenized rows or a remote URI: what an xorl source without ``type`` is."""

    return "://" in path or Path(path.split("?", 1)[0]).suffix.lower() in FORMATS


# Keys of a source that only xorl's tokenized rows have (KempnerForge's are path, weight, name,
# hf_name, hf_config).
_XORL_ONLY = (
    "split",
    "data_dir",
    "data_files",
    "split_files",
    "revision",
    "trust_remote_code",
    "streaming",
    "token",
    "max_seq_len",
    "select_columns",
    "storage_options",
    "metrics_name",
)


def _xorl_sources(data: dict[str, Any]) -> dict[str, Any]:
    """xorl's shorthand, read as it is: a source given as a bare path, and a source without
    ``type`` that is a rows file or URI, sets a load_dataset keyword only xorl has
    (``data_files``, ``revision``...), or any source when ``sample_packing_method`` is set
    (only tokenized rows are packed), is ``type: tokenized``."""
    data = _one_name_as_list(data, ("select_columns",))
    sources = data.get("datasets")
    if not isinstance(sources, list):
        return data
    packing = data.get("sample_packing_method") is not None
    known = set(DatasetSource.__dataclass_fields__)
    normalised = []
    for i, entry in enumerate(sources):
        if isinstance(entry, str):
            entry = {"path": entry}
        unknown = sorted(set(entry) - known) if isinstance(entry, Mapping) else []
        if unknown:
            raise ConfigError(
                f"data.datasets[{i}]: unknown key(s) {', '.join(map(repr, unknown))}; a source "
                f"takes {', '.join(sorted(known))}"
            )
        if isinstance(entry, Mapping):
            entry = _one_name_as_list(_split_files(entry, i), ("data_files", "select_columns"))
        if isinstance(entry, Mapping) and "type" not in entry and not entry.get("hf_name"):
            path = str(entry.get("path", ""))
            # A load_dataset keyword (data_files, revision...) is xorl's: so is the source.
            xorl_keys = any(k in entry for k in _XORL_ONLY)
            if packing or xorl_keys or (path and _looks_like_rows(path)):
                entry = {**entry, "type": "tokenized"}
        normalised.append(entry)
    return {**data, "datasets": normalised}


def _split_files(entry: Mapping[str, Any], i: int) -> Mapping[str, Any]:
    """``data_files`` as a table of splits (``{train = [...], test = [...]}``), as
    datasets.load_dataset takes it, kept as ``split_files``: the source's ``split`` (default
    train, an override's too) picks its files when the config is validated."""
    files = entry.get("data_files")
    if not isinstance(files, Mapping):
        if isinstance(files, list) and any(not isinstance(f, str) for f in files):
            raise ConfigError(
                f"data.datasets[{i}].data_files must list file names, got {files!r}; a table of "
                "splits is given whole: data_files = {train = [...], test = [...]}"
            )
        return entry
    table = {k: [v] if isinstance(v, str) else v for k, v in files.items()}
    for split, names in table.items():
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise ConfigError(
                f"data.datasets[{i}].data_files.{split} must be a file name or a list of them, "
                f"got {names!r}"
            )
    rest = {k: v for k, v in entry.items() if k != "data_files"}
    return {**rest, "split_files": table}


def _one_name_as_list(table: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """``data_files: train.parquet`` as ``[train.parquet]``: xorl hands these keys to
    datasets.load_dataset / select_columns, which take one name as well as a list."""
    return {k: [v] if k in keys and isinstance(v, str) else v for k, v in table.items()}


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
        if not isinstance(name, str) or name in ours or name in _TRAINER_SECTIONS:
            continue
        close = difflib.get_close_matches(name.lower(), ours, n=1, cutoff=0.75)
        if close and close[0] not in raw:
            raise ConfigError(
                f"{where}: section [{name}] is not one KempnerForge has, and is close to "
                f"[{close[0]}] (a typo?), which the file lacks: rename it [{close[0]}]"
            )


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
            if not sep or not _OVERRIDE_KEY.fullmatch(key):
                raise ConfigError(
                    f"override {item!r} is not KEY=VALUE with a dotted key (e.g. data.num_workers=2, "
                    "--data.num_workers=2 or data.datasets.0.weight=2)"
                )
            if _trainers_key(key):
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
        raise _omegaconf_error(f"{where} with overrides", err) from err
    assert isinstance(merged, LoaderConfig)
    with _in_file(f"{where} with overrides"):
        return merged.validate()


def _current(base: Any, key: str) -> Any:
    """The value ``key`` has before an override (None where there is none yet)."""
    try:
        return OmegaConf.select(base, key, default=None)
    except OmegaConfBaseException:
        return None


# KempnerForge's job-file sections that are the trainer's alone (its JobConfig's other
# sub-configs); the [train] keys other than TrainSection's are the trainer's too.
_TRAINER_SECTIONS = (
    "model",
    "optimizer",
    "scheduler",
    "distributed",
    "checkpoint",
    "metrics",
    "profiling",
)


def _trainers_key(key: str) -> bool:
    """Whether ``key`` is the trainer's (skipped). A [train] key that is a near miss of one of
    the loader's (``train.batchsize``) is taken for a typo and refused, not skipped."""
    section, _, rest = key.partition(".")
    if section == "train":
        name = rest.split(".")[0]
        ours = list(TrainSection.__dataclass_fields__)
        return name not in ours and not difflib.get_close_matches(name, ours, n=1, cutoff=0.8)
    return section in _TRAINER_SECTIONS


def trainer_overrides(overrides: Sequence[str]) -> list[str]:
    """The keys of ``overrides`` that are the trainer's (KempnerForge's full override list,
    ``--train.max_steps=1000 --optimizer.lr=1e-4``, passed on as it is): skipped, as the same
    keys are in a job file; ``loader-check`` names them."""
    if isinstance(overrides, str):
        overrides = [overrides]
    keys = (str(item).partition("=")[0].strip().removeprefix("--") for item in overrides)
    return [key for key in keys if _OVERRIDE_KEY.fullmatch(key) and _trainers_key(key)]


def _near_miss(where: str, key: str) -> ConfigError:
    """A [train] key of the job file that is one letter or so from one the loader reads."""
    ours = list(TrainSection.__dataclass_fields__)
    (close,) = difflib.get_close_matches(key, ours, n=1, cutoff=0.8)
    return ConfigError(
        f"{where}: [train] key {key!r} is not one the loader reads, and is close to {close!r} "
        f"(a typo?); the loader's [train] keys are {', '.join(ours)}"
    )


def _unknown_override(item: str, key: str) -> ConfigError:
    """An override naming a key the config does not have: say which, and what there is."""
    section, _, rest = key.partition(".")
    kinds = {"data": DataConfig, "eval": EvalConfig, "train": TrainSection}
    if section not in kinds:
        known = (
            f"sections are {', '.join(kinds)}, and KempnerForge's trainer's "
            f"{', '.join(_TRAINER_SECTIONS)} are skipped"
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


def source_name(source: DatasetSource) -> str:
    """The source's name, or one derived from its path or HF id. A tokenized (xorl) source's
    ``name`` is its Hub config, as in xorl, so its own name is ``metrics_name``."""
    if source.type == "tokenized":
        if source.metrics_name:
            return source.metrics_name
        return f"{source.path} ({source.name})" if source.name else source.path
    if source.name:
        return source.name
    if source.path:
        return Path(source.path.rstrip("/")).name or source.path
    return str(source.hf_name).replace("/", "_")


def _positive(where: str, value: int | float | None, minimum: float = 1) -> None:
    # NaN compares False with everything, and inf passes any minimum: both refused by name.
    if value is None:
        return
    if not math.isfinite(value):
        raise ConfigError(f"{where} must be a finite number >= {minimum}, got {value}")
    if value < minimum:
        raise ConfigError(f"{where} must be >= {minimum}, got {value}")


def _validate(config: LoaderConfig) -> None:
    data, ev, train = config.data, config.eval, config.train
    _positive("train.batch_size", train.batch_size)
    _positive("train.seq_len", train.seq_len)
    _positive("data.num_workers", data.num_workers, 0)
    _positive("data.prefetch_factor", data.prefetch_factor)
    _positive("data.mix_temperature", data.mix_temperature, 1e-9)
    _positive("data.vocab_size", data.vocab_size)
    _positive("data.eos_token_id", data.eos_token_id, 0)
    _check_eos_in_vocab(data)
    _positive("data.sample_packing_sequence_len", data.sample_packing_sequence_len)
    check_sequence_len(data.sample_packing_sequence_len, "data.sample_packing_sequence_len")
    _positive("eval.interval", ev.interval)
    _positive("eval.steps", ev.steps)
    # As in KempnerForge, a non-empty data.datasets overrides the single-source fields, and
    # data.dataset_path overrides data.hf_dataset_name (its train.py tries the shards first):
    # overridden_sources() says so in loader-check.
    if data.sample_packing_method not in (None, *PACKING_METHODS):
        raise ConfigError(
            f"data.sample_packing_method must be one of {', '.join(PACKING_METHODS)} or unset, "
            f"got {data.sample_packing_method!r}"
        )
    if (data.position_ids or data.cu_seqlens) and not data.pack_sequences:
        raise ConfigError("data.position_ids/data.cu_seqlens need data.pack_sequences = true")
    if data.hf_streaming and not data.hf_dataset_name:
        raise ConfigError("data.hf_streaming needs data.hf_dataset_name")
    if data.masked_sft:
        raise ConfigError(
            "data.masked_sft = true (KempnerForge's completion-masked SFT over paired "
            "*.tokens.npy/*.labels.npy) is not served by data_io's loaders: set it to false, or "
            "train on tokenized rows ({input_ids, labels}): a [[data.datasets]] source with type = 'tokenized'"
        )
    _check_dtype("data.dtype", data.dtype)
    _validate_ring(config)
    _validate_sources(data)
    if ev.enabled and not (ev.dataset_path or ev.hf_dataset_name or ev.sets):
        raise ConfigError(
            "eval.enabled needs eval.dataset_path or eval.hf_dataset_name (or named sets in "
            "eval.sets)"
        )
    _check_dtype("eval.dtype", ev.dtype)
    for name, one in ev.sets.items():
        where = f"eval.sets.{name}"
        _check_dtype(f"{where}.dtype", one.dtype)
        if not name or name == EVAL_MAIN_SET:
            raise ConfigError(
                f"{where}: the name {EVAL_MAIN_SET!r} is [eval]'s own source; name the set "
                "otherwise (e.g. general)"
            )
        if bool(one.dataset_path) == bool(one.hf_dataset_name):
            raise ConfigError(f"{where} needs one of dataset_path or hf_dataset_name")


def _check_eos_in_vocab(data: DataConfig) -> None:
    """An EOS id is a token id, so below the vocabulary size: one at or above it is never in
    shards whose ids pass the vocab check (packing finds no document boundary, silently), and
    where it is, the read fails blaming the shard ("written with another tokenizer")."""
    eos, vocab = data.eos_token_id, data.vocab_size
    if eos is None or vocab is None or eos < vocab:
        return
    raise ConfigError(
        f"data.eos_token_id={eos} is not below data.vocab_size={vocab}: token ids, the EOS "
        f"included, go from 0 to {vocab - 1}, so this EOS would never be found as a document's "
        "end, or be refused in the shards as out of the vocabulary; set data.eos_token_id to "
        "the tokenizer's EOS id and data.vocab_size to its size (or leave one unset: the shards' "
        "metadata or data.tokenizer_path gives it)"
    )


def _check_dtype(key: str, value: str | None) -> None:
    if value is not None and value not in TOKEN_DTYPES:
        raise ConfigError(
            f"{key} must be one of {', '.join(TOKEN_DTYPES)} (the dtype the .bin shards were "
            f"written with), got {value!r}"
        )


def ring_multiple(train: TrainSection) -> int:
    """What every tokenized row is padded to a multiple of: 2 x ring x ulysses, or 1 (no ring
    attention: rows are not padded)."""
    ring, ulysses = train.ringattn_parallel_size, train.ulysses_parallel_size
    return 2 * ring * ulysses if ring > 1 else 1


def _validate_ring(config: LoaderConfig) -> None:
    train, data = config.train, config.data
    _positive("train.ringattn_parallel_size", train.ringattn_parallel_size)
    _positive("train.ulysses_parallel_size", train.ulysses_parallel_size)
    multiple = ring_multiple(train)
    capacity = data.sample_packing_sequence_len
    if multiple > 1 and capacity is not None and capacity % multiple:
        raise ConfigError(
            f"data.sample_packing_sequence_len={capacity} is not a multiple of "
            f"2 x train.ringattn_parallel_size x train.ulysses_parallel_size = {multiple}; ring "
            f"attention splits every document of a bin, and the bin, into {multiple} equal "
            f"chunks: use a multiple of {multiple} (e.g. {-(-capacity // multiple) * multiple})"
        )


# Keys that only a tokenized (xorl) source reads, and only a token (KempnerForge) source reads.
_ROWS_ONLY = ("metrics_name", "data_dir", "trust_remote_code", "streaming", "token")
# weight: tokenized rows are concatenated (xorl), so a weight would be silently unread.
_TOKENS_ONLY = ("dtype", "file_pattern", "hf_name", "hf_config", "hf_split", "weight")


def _validate_kind_keys(where: str, source: DatasetSource) -> None:
    defaults = DatasetSource()
    tokenized = source.type == "tokenized"
    wrong = [
        k
        for k in (_TOKENS_ONLY if tokenized else _ROWS_ONLY)
        if getattr(source, k) != getattr(defaults, k)
    ]
    if not wrong:
        return
    if tokenized:
        raise ConfigError(
            f"{where}: {', '.join(wrong)} belong(s) to shard/HF-text sources, and this source is "
            "type: tokenized (rows of input_ids and labels); remove the key(s)"
            + (
                "; tokenized sources are concatenated, as in xorl, not mixed by weight"
                if "weight" in wrong
                else ""
            )
        )
    hint = (
        "; a KempnerForge source is named by name"
        if "metrics_name" in wrong
        else "; KempnerForge streams HF text with data.hf_streaming"
        if "streaming" in wrong
        else ""
    )
    raise ConfigError(
        f"{where}: {', '.join(wrong)} belong(s) to tokenized-row sources (type: tokenized, "
        f"xorl's load_dataset keys), and this source is a token source{hint}"
    )


def _validate_streaming(data: DataConfig) -> None:
    flags = [s.streaming for s in data.datasets if s.type == "tokenized"]
    if not any(flags):
        return
    if not all(flags):
        raise ConfigError(
            "data.datasets: some tokenized sources have streaming: true and others not; a "
            "loader is either a stream or a map-style dataset: set streaming on every source "
            "or on none"
        )
    if data.sample_packing_method != "sequential":
        raise ConfigError(
            f"streaming: true needs data.sample_packing_method: sequential (got "
            f"{data.sample_packing_method!r}): a stream is packed in the order it is read; "
            "multipack needs every row's length up front, and unpacked items need the longest "
            "row's"
        )


def _pick_split_files(where: str, source: DatasetSource) -> None:
    """``data_files`` given as a table of splits: the files of the source's split."""
    table = source.split_files
    if table is None:
        return
    if source.split not in table:
        raise ConfigError(
            f"{where}.data_files names the splits {', '.join(map(repr, table))}, not this "
            f"source's split {source.split!r}: set {where}.split to one of them"
        )
    source.data_files = list(table[source.split])


def _validate_sources(data: DataConfig) -> None:
    kinds = {"tokenized" if s.type == "tokenized" else "tokens" for s in data.datasets}
    if len(kinds) > 1:
        raise ConfigError(
            "data.datasets mixes tokenized-row sources (type: tokenized) with token sources; "
            "use one kind per loader"
        )
    for i, source in enumerate(data.datasets):
        where = f"data.datasets[{i}]"
        if source.type not in ("", "tokenized"):
            raise ConfigError(f"{where}.type must be 'tokenized' or unset, got {source.type!r}")
        _validate_kind_keys(where, source)
        _check_dtype(f"{where}.dtype", source.dtype)
        _pick_split_files(where, source)
        if source.type == "tokenized":
            if not source.path:
                raise ConfigError(f"{where}: a tokenized source needs path")
        elif bool(source.path) == bool(source.hf_name):
            raise ConfigError(f"{where}: set exactly one of path and hf_name")
        if not math.isfinite(source.weight):
            raise ConfigError(f"{where}.weight must be a finite number > 0, got {source.weight}")
        if not source.weight > 0:
            raise ConfigError(f"{where}.weight must be > 0, got {source.weight}")
        _positive(f"{where}.max_seq_len", source.max_seq_len)
    _validate_streaming(data)
    names = [source_name(s) for s in data.datasets]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(
            f"data.datasets: several sources are named {duplicates}; give each a unique name "
            "(name; metrics_name for a type: tokenized source)"
        )
    if (data.phases or data.anneal_start_step or data.anneal_weights) and not data.datasets:
        raise ConfigError("data.phases/data.anneal_* weight the sources of data.datasets; add them")
    if data.datasets and "tokens" in kinds:
        resolve_phases(
            names,
            [s.weight for s in data.datasets],
            data.mix_temperature,
            [_phase_dict(p) for p in data.phases],
            data.anneal_start_step,
            data.anneal_weights,
        )
    if "tokenized" in kinds and (data.phases or data.anneal_start_step):
        raise ConfigError(
            "phases and annealing weight a mixture of token sources; tokenized-row sources are "
            "concatenated (xorl) and take no weights"
        )


def _phase_dict(phase: TrainingPhase) -> dict[str, Any]:
    return {
        "start_step": phase.start_step,
        "dataset_weights": dict(phase.dataset_weights),
        "lr_scale": phase.lr_scale,
    }


def phase_dicts(data: DataConfig) -> list[dict[str, Any]]:
    """``data.phases`` as the plain dicts ``mixing.resolve_phases`` takes."""
    return [_phase_dict(p) for p in data.phases]


def data_seed(config: LoaderConfig) -> int:
    """The seed of the data order: ``data.seed`` when set, else ``train.seed``."""
    return config.train.seed if config.data.seed is None else config.data.seed


def overridden_sources(data: DataConfig, ev: EvalConfig | None = None) -> dict[str, str]:
    """The source fields set but not read, each with the field that wins over it
    (KempnerForge's order: ``data.datasets``, then ``data.dataset_path``, then
    ``data.hf_dataset_name``; ``eval.dataset_path`` before ``eval.hf_dataset_name``), for
    loader-check to show."""
    orders = [
        [
            ("data.datasets", bool(data.datasets)),
            ("data.dataset_path", bool(data.dataset_path)),
            ("data.hf_dataset_name", bool(data.hf_dataset_name)),
        ]
    ]
    if ev is not None:
        orders.append(
            [
                ("eval.dataset_path", bool(ev.dataset_path)),
                ("eval.hf_dataset_name", bool(ev.hf_dataset_name)),
            ]
        )
    unread: dict[str, str] = {}
    for given in orders:
        set_fields = [name for name, present in given if present]
        unread.update({name: set_fields[0] for name in set_fields[1:]})
    return unread
