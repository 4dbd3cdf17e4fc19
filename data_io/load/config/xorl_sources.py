"""xorl's shorthand for ``data.datasets``, read as xorl reads it: a bare path, a rows file or
URI, or a ``datasets.load_dataset`` keyword makes a source ``type: tokenized``; ``data_files``
as one name or as a table of splits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from data_io.errors import ConfigError
from data_io.load.config.sections import DatasetSource
from data_io.load.datasets.row_sources import FORMATS


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


def xorl_sources(data: dict[str, Any]) -> dict[str, Any]:
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
