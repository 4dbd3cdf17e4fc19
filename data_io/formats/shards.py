"""The token dtype of raw ``*.bin`` shards, read from the folder's metadata file (formats.md §6).

A raw shard has no header, so its dtype must be declared; guessing it from the file size (as
KempnerForge does: "size divisible by 4, so uint32") silently reads a uint16 shard with an even
token count as garbage. Two declarations are understood:

- ``dataset_metadata.json`` (MyPT's sharded layout), a JSON object;
- ``metadata.yaml`` (tatm's tokenized layout), a YAML mapping;

each holding ``dtype`` or ``token_dtype`` at the top level or under ``tokenized_info`` (tatm).
MyPT's own ``dataset_metadata.json`` declares no dtype, but its format fixes one: a file with
MyPT's keys (``total_shards``, ``train_shards``, ``val_shards``, ``tokenization``) means uint32.
They are looked for in the shard folder, then in its parent (MyPT keeps ``dataset_metadata.json``
beside ``train/`` and ``val/``). Two files that both declare a dtype must agree.

The same files may declare what else a consumer must honour (``read_declarations``): the EOS id
that ends each document (``eos_id`` or ``eos_token_id``), the vocabulary size every id is below
(``vocab_size``), and, from ``data_io prepare``, each shard's sha256 (``splits.<split>.shards``),
which is the content identity a resumed loader checks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from data_io.errors import InputError
from data_io.formats.dtypes import dtype_or_none

__all__ = [
    "METADATA_FILES",
    "TOKEN_DTYPES",
    "Declarations",
    "Declared",
    "read_bin_dtype",
    "read_declarations",
]

METADATA_FILES = ("dataset_metadata.json", "metadata.yaml")
# Integer dtypes whose every value fits an int64 token id (uint64 does not).
TOKEN_DTYPES = ("uint8", "uint16", "uint32", "int16", "int32", "int64")
_DTYPE_KEYS = ("dtype", "token_dtype")
_NESTED_KEY = "tokenized_info"
_HOW_TO_DECLARE = (
    'declare it by writing {"dtype": "uint16"} (or the dtype the shards were written with) '
    "to dataset_metadata.json in the shard folder"
)
# Said when the dtype is missing: the loader config can declare it too (config.py).
_HOW_TO_CONFIGURE = (
    'or in the loader config: dtype = "uint16" in [data] (data.dtype), or per source in '
    "data.datasets; MemoryMappedDataset(..., dtype=...)"
)


def _parse(path: Path) -> Any:
    """The parsed content of one metadata file (JSON or YAML by its name)."""
    try:
        text = path.read_text(encoding="utf-8")
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    # ValueError: PyYAML's own int() of a malformed YAML 1.1 integer ("0b_"), found by fuzzing.
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, yaml.YAMLError, ValueError) as err:
        raise InputError(
            f"{path}: cannot read the shard metadata ({err}); fix or remove it"
        ) from err


def _declared_dtype(path: Path, content: Any) -> np.dtype | None:
    """The dtype string a metadata file declares, or None when it declares none."""
    if not isinstance(content, dict):
        raise InputError(
            f"{path}: expected a mapping of keys to values, got {type(content).__name__}; "
            f"{_HOW_TO_DECLARE}"
        )
    places = [content]
    if isinstance(content.get(_NESTED_KEY), dict):
        places.append(content[_NESTED_KEY])
    for place in places:
        for key in _DTYPE_KEYS:
            if key in place:
                return _check_dtype(path, key, place[key])
    if _written_by_mypt(path, content):
        return np.dtype(np.uint32)
    return None


# The keys MyPT's prepare_dataset.py writes to dataset_metadata.json (it declares no dtype).
_MYPT_KEYS = frozenset({"total_shards", "train_shards", "val_shards", "tokenization"})


def _written_by_mypt(path: Path, content: dict[str, Any]) -> bool:
    """A ``dataset_metadata.json`` of MyPT's: its shards are uint32 by MyPT's format (its guide
    and trainer: ``np.memmap(path, dtype=np.uint32)``), the one case where the dtype is known
    without a declaration."""
    mypt_keys = content.keys() >= _MYPT_KEYS
    # data_io prepare writes MyPT's keys too, beside its own (and its "producer").
    return path.name == "dataset_metadata.json" and mypt_keys and "producer" not in content


def _check_dtype(path: Path, key: str, value: Any) -> np.dtype:
    """``value`` as a dtype, if it names one of TOKEN_DTYPES (any byte order, e.g. ``>u2``)."""
    dtype = dtype_or_none(value)
    if dtype is None or dtype.name not in TOKEN_DTYPES:
        raise InputError(
            f"{path}: {key!r} is {value!r}, not a token dtype; use one of {', '.join(TOKEN_DTYPES)}"
        )
    return dtype


def _candidates(folder: Path) -> list[Path]:
    """Existing metadata files of ``folder``; the parent's only when the folder has none."""
    for place in (folder, folder.parent):
        found = [place / name for name in METADATA_FILES if (place / name).is_file()]
        if found:
            return found
    return []


def _declared_dtypes(folder: Path) -> dict[Path, np.dtype]:
    """The dtype each metadata file of ``folder`` declares (those that declare one); two that
    disagree are an error."""
    declared: dict[Path, np.dtype] = {}
    for path in _candidates(folder):
        dtype = _declared_dtype(path, _parse(path))
        if dtype is not None:
            declared[path] = dtype
    if len(set(declared.values())) > 1:
        listed = "; ".join(f"{path} says {dtype}" for path, dtype in declared.items())
        raise InputError(f"conflicting shard dtypes: {listed}; make them agree or remove one")
    return declared


def declared_dtype(folder: Path) -> tuple[np.dtype, Path] | None:
    """The dtype the metadata of ``folder`` declares and the file declaring it, if any (a
    ``.npy`` shard's header must agree with it)."""
    declared = _declared_dtypes(folder)
    if not declared:
        return None
    path, dtype = next(iter(declared.items()))
    return dtype, path


def read_bin_dtype(
    folder: Path, example: Path, given: str | None = None, key: str = "dtype"
) -> tuple[np.dtype, Path | None]:
    """The dtype of the ``.bin`` shards in ``folder`` and the file that declares it (None when
    only the caller's ``given`` dtype, the config key ``key``, declares it).

    A dtype given by the caller and one declared by the folder's metadata must agree.
    ``example`` is a shard named in the error when no dtype is declared anywhere.
    """
    declared = _declared_dtypes(folder)
    mine = None if given is None else _check_dtype(Path(key), key, given)
    if not declared and mine is None:
        looked = ", ".join(str(folder / name) for name in METADATA_FILES)
        raise InputError(
            f"{example}: raw .bin shard without a declared token dtype (looked for {looked} and "
            f"the same in {folder.parent}, and {key} is not set); the dtype is never guessed "
            f"from the file size; {_HOW_TO_DECLARE}, {_HOW_TO_CONFIGURE}"
        )
    if not declared:
        assert mine is not None
        return mine, None
    path, dtype = next(iter(declared.items()))
    if mine is not None and mine != dtype:
        raise InputError(
            f"{key}={given!r} contradicts the shards' metadata: {path} declares dtype "
            f"{dtype.name}; the shards were written as {dtype.name}: remove {key} (the "
            "metadata's dtype is used) or fix the metadata file if it is the wrong one"
        )
    return dtype, path


@dataclass(frozen=True)
class Declared:
    """One value a metadata file declares, and the file, so a contradiction can name both."""

    value: int
    path: Path
    key: str

    def where(self) -> str:
        return f"{self.path} declares {self.key}={self.value}"


@dataclass(frozen=True)
class Declarations:
    """What a shard folder's producer declared beyond the dtype (each None when undeclared)."""

    eos_id: Declared | None = None
    vocab_size: Declared | None = None
    # shard file name -> sha256 of its token bytes, for the shards of this folder
    sha256: dict[str, str] = field(default_factory=dict)
    # ``data_io prepare``'s list of this split folder's shards (file name -> tokens), and the
    # file that lists them: the shards a loader must find, each of its recorded length.
    shard_tokens: dict[str, int] = field(default_factory=dict)
    listed_by: Path | None = None


_EOS_KEYS = ("eos_id", "eos_token_id")


def _declared_int(
    path: Path, places: list[dict[str, Any]], keys: tuple[str, ...]
) -> Declared | None:
    for place in places:
        for key in keys:
            if key not in place or place[key] is None:
                continue
            value = place[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InputError(
                    f"{path}: {key!r} is {value!r}, not a non-negative integer; fix the file or "
                    "remove the key"
                )
            return Declared(value, path, key)
    return None


def _split_shards(folder: Path, path: Path, content: dict[str, Any]) -> list[dict[str, Any]]:
    """``data_io prepare``'s records of the split folder ``folder``'s shards (else none)."""
    splits = content.get("splits")
    # Recorded beside train/ and val/: only the split folder's own list names its files.
    split = splits.get(folder.name) if isinstance(splits, dict) and path.parent != folder else None
    if not isinstance(split, dict) or not isinstance(split.get("shards"), list):
        return []
    return [
        shard
        for shard in split["shards"]
        if isinstance(shard, dict) and isinstance(shard.get("name"), str)
    ]


def _shard_hashes(shards: list[dict[str, Any]]) -> dict[str, str]:
    """Each shard's sha256 of its token bytes."""
    return {s["name"]: s["sha256"] for s in shards if isinstance(s.get("sha256"), str)}


def _shard_tokens(shards: list[dict[str, Any]]) -> dict[str, int]:
    """Each shard's token count."""
    return {
        s["name"]: s["tokens"]
        for s in shards
        if isinstance(s.get("tokens"), int) and not isinstance(s.get("tokens"), bool)
    }


def read_declarations(folder: Path) -> Declarations:
    """The EOS id, vocabulary size and shard hashes the metadata files of ``folder`` (or, when
    it has none, of its parent) declare. Two files that declare different values are an error."""
    eos: Declared | None = None
    vocab: Declared | None = None
    hashes: dict[str, str] = {}
    tokens: dict[str, int] = {}
    listed_by: Path | None = None
    for path in _candidates(folder):
        content = _parse(path)
        if not isinstance(content, dict):
            raise InputError(
                f"{path}: expected a mapping of keys to values, got {type(content).__name__}; "
                "fix the file or remove it"
            )
        places = [content]
        if isinstance(content.get(_NESTED_KEY), dict):
            places.append(content[_NESTED_KEY])
        # MyPT's vocab_size is its model's embedding size (GPT-2's 50,257 padded to 50,304),
        # not a bound of the shards' ids to hold a tokenizer to.
        vocab_keys = () if _written_by_mypt(path, content) else ("vocab_size",)
        for name, found, keys in (("eos", eos, _EOS_KEYS), ("vocab", vocab, vocab_keys)):
            value = _declared_int(path, places, keys)
            if value is None:
                continue
            if found is not None and found.value != value.value:
                raise InputError(
                    f"conflicting shard metadata: {found.where()}, {value.where()}; make them "
                    "agree or remove one"
                )
            if name == "eos":
                eos = value
            else:
                vocab = value
        if path.suffix == ".json":
            shards = _split_shards(folder, path, content)
            hashes.update(_shard_hashes(shards))
            listed = _shard_tokens(shards)
            if listed:
                tokens, listed_by = listed, path
    if eos is not None and vocab is not None and eos.value >= vocab.value:
        raise InputError(
            f"shard metadata that contradicts itself: {eos.where()}, but {vocab.where()} (every "
            "id is below the vocabulary size); fix the file"
        )
    return Declarations(eos, vocab, hashes, tokens, listed_by)
