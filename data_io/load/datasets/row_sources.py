"""Tokenized-row sources (xorl's ``datasets:`` entries): where rows come from and how they are read.

A row is ``{"input_ids": [...], "labels": [...]}`` (labels aligned with input_ids, the Hugging
Face convention: the model shifts them; ``-100`` = no loss). ``RowSource`` says where the rows
are; ``open_source`` loads them as a ``datasets.Dataset`` (memory-mapped from the datasets
cache, so the dataset pickles as a path, not as its data); ``row_checks.check_rows`` validates every
row with pyarrow/numpy over whole list columns, never a Python loop per token.

Where a source can be:

* a local file, the format from its extension (``.jsonl .json .parquet .csv .arrow``);
* a local directory: a folder written by ``save_to_disk`` (it holds ``state.json`` or
  ``dataset_dict.json``) is opened with ``load_from_disk``; any other folder is searched for files
  of the accepted extensions (``data_files`` picks some of them). The markers decide, not a failed
  ``load_from_disk``: a damaged saved dataset is reported, not silently read as loose files;
* a Hub id (``org/name``) with ``split`` and ``revision``;
* ``s3://``, ``gs://``, ``abfs://``, ``http(s)://`` through ``datasets``/``fsspec``, with
  ``storage_options`` (credentials, ``endpoint_url``, ...).

As in xorl, an entry's keys are ``datasets.load_dataset`` arguments: ``name`` is the Hub config
name (not a label: the label is ``metrics_name``), and ``data_dir``, ``revision``,
``trust_remote_code``, ``token`` and ``streaming`` are passed on. A local folder with ``name`` or
``data_dir`` is read by ``load_dataset(folder, name, data_dir=...)``, which understands a Hub
repo's layout (README configs, ``data/``), exactly as the Hub id would be.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from data_io.errors import ConfigError, DataIoError, InputError
from data_io.util.arrow_strings import is_text_type
from data_io.util.console import quiet_off_terminal, reader_errors_unlogged
from data_io.util.hub import host_unreachable, hub_unreachable, offline_by_environment

__all__ = [
    "FORMATS",
    "REQUIRED_COLUMNS",
    "RowSource",
    "open_source",
    "open_stream",
    "source_fingerprint",
]

# Builder of ``datasets.load_dataset`` for each accepted file extension.
FORMATS = {
    ".jsonl": "json",
    ".json": "json",
    ".parquet": "parquet",
    ".csv": "csv",
    ".arrow": "arrow",
}
REQUIRED_COLUMNS = ("input_ids", "labels")
_REMOTE_SCHEMES = ("s3", "gs", "gcs", "abfs", "abfss", "az", "http", "https")
_SAVED_MARKERS = ("state.json", "dataset_dict.json")
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
_ACCEPTED = ", ".join(FORMATS)


@dataclass(frozen=True)
class RowSource:
    """One entry of xorl's ``data: datasets:`` list (same keys)."""

    path: str
    split: str = "train"
    data_files: tuple[str, ...] | None = None
    revision: str | None = None
    select_columns: tuple[str, ...] | None = None
    max_seq_len: int | None = None
    storage_options: dict[str, Any] | None = None
    name: str | None = None  # the Hub config name (load_dataset's ``name``), as in xorl
    type: str = "tokenized"
    data_dir: str | None = None
    trust_remote_code: bool | None = None
    streaming: bool = False
    token: str | None = None  # a Hub token; never in fingerprints or summaries
    metrics_name: str | None = None  # how summaries and messages name the source

    def __post_init__(self) -> None:
        where = f"dataset source {self.label!r}"
        if not isinstance(self.path, str) or not self.path:
            raise ConfigError(f"{where}: 'path' must be a non-empty string, got {self.path!r}")
        if self.type != "tokenized":
            raise ConfigError(
                f"{where}: type {self.type!r} is not supported; only 'tokenized' rows "
                "({input_ids, labels}) are: tokenize the text first, then set type: tokenized"
            )
        if not isinstance(self.split, str) or not self.split:
            raise ConfigError(f"{where}: 'split' must be a non-empty string, got {self.split!r}")
        if self.max_seq_len is not None and (
            isinstance(self.max_seq_len, bool)
            or not isinstance(self.max_seq_len, int)
            or self.max_seq_len < 1
        ):
            raise ConfigError(
                f"{where}: 'max_seq_len' must be a positive integer or null, got {self.max_seq_len!r}"
            )
        # Lists from YAML become tuples: the source stays hashable and its repr stable.
        for key in ("data_files", "select_columns"):
            value = getattr(self, key)
            if isinstance(value, str):
                value = (value,)
            if value is not None:
                if not isinstance(value, (list, tuple)) or not all(
                    isinstance(v, str) and v for v in value
                ):
                    raise ConfigError(f"{where}: {key!r} must be a list of strings, got {value!r}")
                object.__setattr__(self, key, tuple(value))
        if self.select_columns is not None:
            missing = [c for c in REQUIRED_COLUMNS if c not in self.select_columns]
            if missing:
                raise ConfigError(
                    f"{where}: 'select_columns' must include {', '.join(missing)}; "
                    "tokenized rows need input_ids and labels"
                )
        if self.storage_options is not None and not isinstance(self.storage_options, dict):
            raise ConfigError(
                f"{where}: 'storage_options' must be a mapping, got {self.storage_options!r}"
            )
        for key in ("name", "data_dir", "revision", "token", "metrics_name"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, str) or not value):
                raise ConfigError(f"{where}: {key!r} must be a non-empty string, got {value!r}")
        for key in ("trust_remote_code", "streaming"):
            value = getattr(self, key)
            if value is not None and not isinstance(value, bool):
                raise ConfigError(f"{where}: {key!r} must be true or false, got {value!r}")

    @classmethod
    def from_mapping(cls, raw: Any, where: str) -> RowSource:
        """A source from one YAML/JSON mapping; unknown keys are errors naming the key."""
        if isinstance(raw, str):
            return cls(path=raw)
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: a dataset source must be a mapping, got {raw!r}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ConfigError(
                f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
                f"a source accepts {', '.join(sorted(known))}"
            )
        if "path" not in raw:
            raise ConfigError(f"{where}: missing 'path' (a file, folder, Hub id or URL)")
        return cls(**raw)

    @property
    def label(self) -> str:
        """How messages and summaries name this source."""
        if self.metrics_name:
            return self.metrics_name
        return f"{self.path} ({self.name})" if self.name else self.path

    def options(self) -> dict[str, Any]:
        """Every field that says what the data is, JSON-able (part of the fingerprint).
        Storage options and the token are left out: they hold credentials, and they say how to
        reach the data, not what it is; so is ``metrics_name``, a label. The keys added for
        xorl's pass-through appear only when set, so entries without them keep the fingerprint
        (and the loader states and plan caches) they had before those keys existed."""
        values = asdict(self)
        for key in ("storage_options", "token", "metrics_name"):
            values.pop(key)
        for key in ("data_dir", "trust_remote_code", "streaming"):
            if values[key] in (None, False):
                values.pop(key)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}

    def load_kwargs(self) -> dict[str, Any]:
        """The ``datasets.load_dataset`` arguments this entry sets (xorl's pass-through), the
        unset ones left out so that datasets' own defaults apply."""
        kwargs = {
            "name": self.name,
            "data_dir": self.data_dir,
            "revision": self.revision,
            "token": self.token,
            "trust_remote_code": self.trust_remote_code,
        }
        out = {k: v for k, v in kwargs.items() if v is not None}
        if self.streaming:
            out["streaming"] = True
        return out


# -- loading ----------------------------------------------------------------------------------
def _scheme(path: str) -> str | None:
    match = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", path)
    return match.group(1).lower() if match else None


def _builder(path: str, source: RowSource) -> str:
    suffix = Path(path.split("?", 1)[0]).suffix.lower()
    if suffix not in FORMATS:
        raise InputError(
            f"source {source.label!r}: {path}: unknown file extension {suffix or '(none)'!r}; "
            f"accepted: {_ACCEPTED} (rename the file, or convert it to one of these)"
        )
    return FORMATS[suffix]


def _one_builder(files: list[str], source: RowSource) -> str:
    builders = {_builder(f, source) for f in files}
    if len(builders) > 1:
        raise InputError(
            f"source {source.label!r}: files of different formats ({', '.join(sorted(builders))}) "
            "in one source; list one format with data_files, or split them into two sources"
        )
    return builders.pop()


def _storage(source: RowSource) -> dict[str, Any] | None:
    """A fresh copy per call: ``datasets`` adds keys to the mapping it is given (its ``hf``
    entry), which would then leak into the next filesystem built from the same source."""
    return None if source.storage_options is None else dict(source.storage_options)


def _read_failed(source: RowSource, where: str, err: BaseException) -> InputError:
    # datasets wraps the reader's error in a generic DatasetGenerationError: show the cause.
    cause = err.__cause__ or err.__context__ or err
    if _scheme(where) in ("http", "https") and isinstance(
        cause, (FileNotFoundError, ConnectionError)
    ):
        # datasets says "Unable to find" for a host that does not answer too.
        reason = host_unreachable(where)
        if reason is not None:
            return InputError(
                f"source {source.label!r}: cannot read {where}: the host does not answer "
                f"({reason}); check the network and the URL, or download the file and give "
                "its local path"
            )
    return InputError(
        f"source {source.label!r}: cannot read {where}: {type(cause).__name__}: {cause}; check "
        f"that it holds tokenized rows in one of {_ACCEPTED}"
    )


def _empty_file_error(source: RowSource, files: list[str]) -> None:
    """Local files without rows, named before datasets trips over them (it raises a bare
    StopIteration for an empty JSON file and an Arrow batch-size error for an empty Parquet)."""
    for name in files:
        if _scheme(name):
            continue
        path = Path(name)
        empty = path.stat().st_size == 0
        if not empty and path.suffix.lower() == ".parquet":
            try:
                empty = pq.ParquetFile(path).metadata.num_rows == 0
            except (OSError, pa.ArrowException) as err:
                raise _read_failed(source, name, err) from err
        if empty:
            raise InputError(
                f"source {source.label!r}: {name} holds no rows; remove it from the source "
                "(or from data_files), or fill it"
            )


@quiet_off_terminal
def _load_files(source: RowSource, files: list[str], cache_dir: str | None):
    import datasets  # noqa: PLC0415  heavy: datasets (~1 s), only for HF sources

    if source.split != "train":
        raise ConfigError(
            f"source {source.label!r}: split {source.split!r} applies to Hub datasets and saved "
            "DatasetDicts; rows read from files form the split 'train' (remove 'split', or "
            "list the files of that split in data_files)"
        )
    if source.name is not None or source.data_dir is not None:
        key = "name" if source.name is not None else "data_dir"
        raise ConfigError(
            f"source {source.label!r}: {key} selects a config or sub-folder of a dataset "
            f"repository (load_dataset's {key}), and {', '.join(files[:3])} are plain files: "
            f"remove {key}, or point path at the dataset's folder or Hub id"
        )
    builder = _one_builder(files, source)
    _empty_file_error(source, files)
    try:
        with reader_errors_unlogged():
            return datasets.load_dataset(
                builder,
                data_files=files,
                split="train",
                cache_dir=cache_dir,
                storage_options=_storage(source),
                streaming=source.streaming,
            )
    except StopIteration as err:  # datasets' way of saying "no rows at all"
        raise InputError(
            f"source {source.label!r}: {', '.join(files[:3])} holds no rows; fill it or remove it"
        ) from err
    except (
        OSError,
        ValueError,
        TypeError,
        pa.ArrowException,
        datasets.exceptions.DatasetGenerationError,
    ) as err:
        raise _read_failed(source, ", ".join(files[:3]), err) from err


def _pick_split(source: RowSource, loaded: Any, where: str):
    import datasets  # noqa: PLC0415  heavy: datasets (~1 s), only for HF sources

    if isinstance(loaded, datasets.DatasetDict):
        if source.split not in loaded:
            raise InputError(
                f"source {source.label!r}: {where} has no split {source.split!r} "
                f"(splits: {', '.join(loaded)}); set split to one of them"
            )
        return loaded[source.split]
    return loaded


@quiet_off_terminal
def _load_saved(source: RowSource, where: str, cache_dir: str | None):
    import datasets  # noqa: PLC0415  heavy: datasets (~1 s), only for HF sources

    del cache_dir  # a saved dataset is already Arrow files: nothing to cache
    try:
        loaded = datasets.load_from_disk(where, storage_options=_storage(source))
    except (OSError, ValueError, TypeError, pa.ArrowException) as err:
        raise InputError(
            f"source {source.label!r}: {where} looks like a dataset saved with save_to_disk "
            f"(it holds {' or '.join(_SAVED_MARKERS)}) but cannot be opened "
            f"({type(err).__name__}: {err}); re-save it, or remove the marker to read its files"
        ) from err
    picked = _pick_split(source, loaded, where)
    # Its Arrow files become the stream's shards (one per file), read in order.
    return picked.to_iterable_dataset() if source.streaming else picked


@quiet_off_terminal
def _load_repo_folder(source: RowSource, root: str, cache_dir: str | None):
    """A local copy of a dataset repository, read the way its Hub id is (``name`` picks a README
    config, ``data_dir`` a sub-folder): the same load_dataset call, without a network."""
    import datasets  # noqa: PLC0415  heavy: datasets (~1 s), only for HF sources

    kwargs = source.load_kwargs()
    kwargs.pop("revision", None)  # a local folder has no revisions
    try:
        return datasets.load_dataset(
            root,
            split=source.split,
            data_files=list(source.data_files) if source.data_files else None,
            cache_dir=cache_dir,
            **kwargs,
        )
    except (OSError, ValueError, TypeError, pa.ArrowException) as err:
        raise InputError(
            f"source {source.label!r}: load_dataset({root!r}, name={source.name!r}, "
            f"data_dir={source.data_dir!r}, split={source.split!r}) failed "
            f"({type(err).__name__}: {err}); check name (a config of the folder's README), "
            "data_dir and split"
        ) from err


def _discover(source: RowSource, root: str, fs: Any) -> list[str]:
    """The data files of a folder: ``data_files`` (relative to it) or every accepted file."""
    if source.data_files is not None:
        files = [f"{root.rstrip('/')}/{name}" for name in source.data_files]
        absent = [f for f in files if not fs.isfile(f)]
        if absent:
            raise InputError(
                f"source {source.label!r}: data_files not found in {root}: {', '.join(absent[:5])}"
                "; data_files are names relative to the folder in 'path'"
            )
        return files
    found = sorted(f for f in fs.find(root) if Path(f).suffix.lower() in FORMATS)
    if not found:
        raise InputError(
            f"source {source.label!r}: {root} holds no {_ACCEPTED} file (searched recursively); "
            "point path at the data, or name the files in data_files"
        )
    return found


def _load_folder(source: RowSource, root: str, fs: Any, cache_dir: str | None):
    base = root.rstrip("/")
    if source.data_files is None and any(fs.isfile(f"{base}/{m}") for m in _SAVED_MARKERS):
        return _load_saved(source, root, cache_dir)
    # A config, a sub-folder or a split other than train: a local copy of a Hub repository
    # (hf download), read by load_dataset as its Hub id would be.
    repo_keys = source.name is not None or source.data_dir is not None or source.split != "train"
    if not _scheme(root) and repo_keys:
        return _load_repo_folder(source, root, cache_dir)
    files = _discover(source, root, fs)
    # fsspec lists remote files without their protocol: give it back to datasets.
    scheme = _scheme(root)
    if scheme:
        files = [f if _scheme(f) else f"{scheme}://{f}" for f in files]
    return _load_files(source, files, cache_dir)


# The fsspec backend of each remote scheme, and the data_io extra that installs it.
_BACKENDS = {
    "s3": ("s3fs", "s3"),
    "gs": ("gcsfs", "gcs"),
    "gcs": ("gcsfs", "gcs"),
    "abfs": ("adlfs", "azure"),
    "abfss": ("adlfs", "azure"),
    "az": ("adlfs", "azure"),
}


def _require_backend(source: RowSource) -> None:
    """Say which package a remote scheme needs before datasets fails with a bare ImportError."""
    import fsspec  # noqa: PLC0415  heavy: fsspec, only for remote paths

    scheme = _scheme(source.path)
    try:
        fsspec.get_filesystem_class(scheme)
    except ImportError as err:
        package, extra = _BACKENDS.get(scheme, (f"the fsspec backend for {scheme}://", None))
        how = f"pip install 'data_io[{extra}]' (or pip install {package})" if extra else package
        raise ConfigError(
            f"source {source.label!r}: {source.path} needs {package} to read {scheme}:// "
            f"paths, which is not installed; {how}"
        ) from err


# How each cloud finds its credentials (as xorl's guide sets them), for a refused request.
_CREDENTIALS = {
    "s3": "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for "
    "temporary credentials) or AWS_PROFILE; a public bucket reads with storage_options: "
    "{anon: true}",
    "gs": "configure GCS credentials (GOOGLE_APPLICATION_CREDENTIALS, or `gcloud auth "
    "application-default login`); a public bucket reads with storage_options: {token: anon}",
    "abfs": "set AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY (or a SAS token in "
    "storage_options)",
}
_CREDENTIALS.update(gcs=_CREDENTIALS["gs"], abfss=_CREDENTIALS["abfs"], az=_CREDENTIALS["abfs"])
# The cloud SDKs whose own exception types (not OSError) say a request was refused or failed.
_CLOUD_SDKS = ("botocore", "aiobotocore", "google", "azure")


def _load_remote(source: RowSource, cache_dir: str | None):
    import fsspec  # noqa: PLC0415  heavy: fsspec, only for remote paths

    _require_backend(source)
    path = source.path
    scheme = _scheme(path)
    # A trailing slash, or data_files, marks a folder; otherwise a name with an extension is a file.
    is_file = not path.endswith("/") and Path(path.split("?", 1)[0]).suffix
    try:
        if is_file and source.data_files is None:
            return _load_files(source, [path], cache_dir)
        fs, root = fsspec.core.url_to_fs(path, **(_storage(source) or {}))
        return _load_folder(source, f"{scheme}://{root}", fs, cache_dir)
    except DataIoError:
        raise
    except (OSError, ValueError, ImportError) as err:
        if isinstance(err, ImportError):
            hint = f"install the fsspec backend for {scheme}:// (s3fs, gcsfs, adlfs)"
        else:
            hint = "check the URL and the credentials in storage_options"
        raise InputError(f"source {source.label!r}: cannot list {path} ({err}); {hint}") from err
    except Exception as err:
        if type(err).__module__.split(".")[0] not in _CLOUD_SDKS:
            raise
        how = _CREDENTIALS.get(scheme, "check the credentials in storage_options")
        raise InputError(
            f"source {source.label!r}: cannot read {path} ({type(err).__name__}: {err}); {how}"
        ) from err


@quiet_off_terminal
def _load_hub(source: RowSource, cache_dir: str | None):
    import datasets  # noqa: PLC0415  heavy: datasets (~1 s), only for HF sources

    reason = None if offline_by_environment() else hub_unreachable()
    if reason is not None:  # at once, instead of after datasets' ~20 s of retries
        raise InputError(
            f"source {source.label!r}: {source.path!r} is not a local path, and the Hugging "
            f"Face Hub is not reachable ({reason}); download it where there is network "
            f"(`hf download {source.path} --repo-type dataset --local-dir DIR`) and set path "
            "to DIR, or set HF_HUB_OFFLINE=1 to read it from the local datasets cache"
        )
    try:
        loaded = datasets.load_dataset(
            source.path,
            split=source.split,
            data_files=list(source.data_files) if source.data_files else None,
            cache_dir=cache_dir,
            **source.load_kwargs(),  # name, data_dir, revision, trust_remote_code, streaming...
        )
    except ConnectionError as err:
        raise InputError(
            f"source {source.label!r}: cannot reach the Hugging Face Hub for dataset "
            f"{source.path!r} ({err}); offline, download it where there is network "
            f"(`hf download {source.path} --repo-type dataset --local-dir DIR`) and set path "
            "to DIR, or fill the datasets cache first and set HF_DATASETS_OFFLINE=1"
        ) from err
    except (OSError, ValueError, TypeError, pa.ArrowException) as err:
        raise InputError(
            f"source {source.label!r}: {source.path!r} is neither a local path nor a loadable "
            f"Hub dataset ({type(err).__name__}: {err}); check the path, id, split and revision"
        ) from err
    return loaded


def _load(source: RowSource, cache_dir: str | None):
    import fsspec  # noqa: PLC0415  heavy: fsspec, only for remote paths

    if _scheme(source.path) in _REMOTE_SCHEMES:
        return _load_remote(source, cache_dir)
    if _scheme(source.path):
        raise InputError(
            f"source {source.label!r}: unsupported URL scheme in {source.path!r}; use a local "
            f"path, a Hub id or one of {', '.join(s + '://' for s in _REMOTE_SCHEMES)}"
        )
    local = Path(source.path).expanduser()
    if local.is_file():
        return _load_files(source, [str(local.resolve())], cache_dir)
    if local.is_dir():
        return _load_folder(source, str(local.resolve()), fsspec.filesystem("file"), cache_dir)
    looks_like_file = local.suffix.lower() in FORMATS or source.path.startswith(("/", ".", "~"))
    if not looks_like_file and _HUB_ID.fullmatch(source.path):
        return _load_hub(source, cache_dir)
    raise InputError(
        f"source {source.label!r}: {source.path} does not exist; give an existing file or "
        "folder, a Hub id (org/name) or a URL"
    )


def _decode_text_lists(dataset: Any, columns: list[str], source: RowSource):
    """CSV (or any text column) holds lists as JSON text: parse them, once, into the cache."""
    text = [c for c in columns if is_text_type(_arrow_type(dataset, c))]
    if not text:
        return dataset

    def parse(batch: dict[str, list[Any]], indices: list[int]) -> dict[str, list[Any]]:
        out = {}
        for column in text:
            values = []
            for index, cell in zip(indices, batch[column], strict=True):
                try:
                    values.append(json.loads(cell))
                except (TypeError, json.JSONDecodeError) as err:
                    raise InputError(
                        f"source {source.label!r} row {index}: column {column!r} holds "
                        f"{str(cell)[:40]!r}, not a JSON list of integers ({err}); write it as "
                        "[1, 2, 3]"
                    ) from None
            out[column] = values
        return out

    return dataset.map(parse, batched=True, with_indices=True, desc=None)


def _arrow_type(dataset: Any, column: str) -> pa.DataType:
    return dataset.data.table.schema.field(column).type


def open_source(source: RowSource, *, cache_dir: str | None = None):
    """The rows of ``source`` as a ``datasets.Dataset`` with only the columns to keep.

    Kept: ``select_columns`` when given, else ``input_ids`` and ``labels``. Not validated here
    (``check_rows`` does that), so that a cached plan can skip the pass over the tokens.
    """
    if source.streaming:
        raise ConfigError(
            f"source {source.label!r} has streaming: true; a stream is read by "
            "StreamingTokenizedRowsDataset (build_dataloader picks it when every source streams)"
        )
    dataset = _load(source, cache_dir)
    columns = list(source.select_columns or REQUIRED_COLUMNS)
    missing = [c for c in columns if c not in dataset.column_names]
    if missing:
        raise InputError(
            f"source {source.label!r}: no column {', '.join(map(repr, missing))} (columns: "
            f"{', '.join(dataset.column_names) or 'none'}); tokenized rows need input_ids and "
            "labels lists; fix select_columns or the data"
        )
    if len(dataset) == 0:
        raise InputError(
            f"source {source.label!r}: {source.path} holds no rows; remove the source or fill it"
        )
    dataset = dataset.select_columns(columns)
    return _decode_text_lists(dataset, columns, source)


def open_stream(source: RowSource, *, cache_dir: str | None = None):
    """The rows of ``source`` as a ``datasets.IterableDataset`` (``load_dataset(...,
    streaming=True)``), of the columns to keep when the stream knows its columns (a JSON stream
    learns them from its first rows: the reader checks them then)."""
    if not source.streaming:
        source = replace(source, streaming=True)
    dataset = _load(source, cache_dir)
    columns = list(source.select_columns or REQUIRED_COLUMNS)
    known = dataset.column_names
    if known is None:
        return dataset
    missing = [c for c in columns if c not in known]
    if missing:
        raise InputError(
            f"source {source.label!r}: no column {', '.join(map(repr, missing))} (columns: "
            f"{', '.join(known) or 'none'}); tokenized rows need input_ids and labels lists; "
            "fix select_columns or the data"
        )
    return dataset.select_columns(columns)


def _local_stats(source: RowSource) -> list[str]:
    """Name, size and mtime of every local input file (O(files), no data read)."""
    if _scheme(source.path):
        return []
    root = Path(source.path).expanduser()
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    out = []
    for path in files:
        stat = path.stat()
        out.append(f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}")
    return out


def source_fingerprint(source: RowSource, dataset: Any) -> str:
    """What the rows are: the datasets fingerprint (it covers the data files' paths and mtimes,
    a remote file's ETag, the Hub revision, or a saved dataset's own fingerprint), the local
    input files' names, sizes and mtimes on top (not the datasets cache's copies, which are
    rewritten when that cache is cleared), the row count, and every option of the source."""
    digest = hashlib.sha256(json.dumps(source.options(), sort_keys=True).encode())
    digest.update(str(getattr(dataset, "_fingerprint", "")).encode())
    for entry in _local_stats(source):
        digest.update(entry.encode())
    digest.update(str(len(dataset)).encode())
    return digest.hexdigest()
