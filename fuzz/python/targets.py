"""Python fuzz targets: every reader of outside bytes in the Python layer, fed arbitrary bytes.

Each target takes ``bytes`` and runs one reader the way a user's file reaches it. The contract
under test is the project's: bad input raises one of data_io's own errors (``DataIoError``:
a message saying what, where and how to fix), and anything else (``KeyError``,
``AttributeError``, ``TypeError`` from deep inside, a hang) is a finding. ``run.py`` drives them
with atheris (coverage-guided) or, without it, with hypothesis; ``tests/test_fuzz_targets.py``
replays the seeds and a short random run in CI.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import yaml

from data_io.errors import DataIoError

# The modules the targets call into. The targets import them when first run, which under
# atheris would be after its instrumentation: fuzz.python.run imports them inside it.
MODULES = (
    "data_io.load",
    "data_io.load.config",
    "data_io.load.datasets.shards",
    "data_io.formats.shards",
    "data_io.formats.sampled",
    "data_io.scale.manifest",
    "data_io.formats.prefix_config",
    "data_io.prepare.state",
)

__all__ = ["TARGETS", "Finding", "run_one"]


class Finding(AssertionError):
    """An exception the contract does not allow, with the input that raised it."""


_SCRATCH: list[Path] = []


def _scratch() -> Path:
    """An empty folder for one input (one per process, emptied each time: millions of inputs
    must not leave millions of folders)."""
    if not _SCRATCH:
        _SCRATCH.append(Path(tempfile.mkdtemp(prefix="data_io-fuzz-")))
    folder = _SCRATCH[0] / "case"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    return folder


def _text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def loader_config(data: bytes) -> None:
    """A loader job file (TOML, or YAML when it starts with a non-'[' byte) and overrides."""
    from data_io.load.config import apply_overrides, config_from_dict

    text = _text(data)
    if text is None:
        return
    body, _, overrides = text.partition("\n--\n")
    try:
        raw = tomllib.loads(body) if body.startswith("[") else yaml.safe_load(body)
    except (tomllib.TOMLDecodeError, yaml.YAMLError, RecursionError, ValueError):
        return  # the parsers' own errors are reported by load_config as ConfigError (tested)
    config = config_from_dict(raw if raw is not None else {}, "fuzz")
    if overrides:
        apply_overrides(config, overrides.splitlines()[:8], "fuzz")


def scale_manifest(data: bytes) -> None:
    """A scale-out plan file, as ``data_io scale status/resume`` read it."""
    from data_io.scale.manifest import Manifest

    folder = _scratch()
    (folder / "manifest.json").write_bytes(data)
    Manifest.load(folder / "manifest.json")


def npy_shard(data: bytes) -> None:
    """An ``.npy`` shard: the header reader, the size check and every window's read."""
    from data_io.load import MemoryMappedDataset

    folder = _scratch()
    (folder / "shard.npy").write_bytes(data)
    dataset = MemoryMappedDataset(folder, 2)
    for i in range(min(len(dataset), 64)):
        dataset.window(i)
    dataset.fingerprint()


def shard_metadata(data: bytes) -> None:
    """``dataset_metadata.json`` (or ``metadata.yaml`` when the input starts with '#') beside
    raw ``.bin`` shards: the dtype, EOS, vocabulary and hash declarations."""
    from data_io.load import MemoryMappedDataset

    folder = _scratch()
    name = "metadata.yaml" if data.startswith(b"#") else "dataset_metadata.json"
    (folder / name).write_bytes(data)
    np.arange(40, dtype=np.uint16).tofile(folder / "shard_00000.bin")
    dataset = MemoryMappedDataset(folder, 4, file_pattern="*.bin", pack_sequences=data[:1] == b"{")
    for i in range(len(dataset)):
        dataset[i]
    dataset.fingerprint()


def prefix_config(data: bytes) -> None:
    """``prefix_config.yaml``, as train-tokenizer and the sampler read it."""
    from data_io.formats.prefix_config import load_prefix_config

    folder = _scratch()
    (folder / "prefix_config.yaml").write_bytes(data)
    load_prefix_config(folder / "prefix_config.yaml")


def sampled_metadata(data: bytes) -> None:
    """A sampled folder's ``metadata.json`` (the loader's checks at start)."""
    from data_io.formats.sampled import read_metadata

    folder = _scratch()
    (folder / "metadata.json").write_bytes(data)
    read_metadata(folder)


def prepare_metadata(data: bytes) -> None:
    """An output folder's ``dataset_metadata.json`` that an incremental ``prepare`` opens."""
    from data_io.prepare.state import open_output

    folder = _scratch()
    (folder / "dataset_metadata.json").write_bytes(data)
    (folder / ".prepare").mkdir()
    (folder / ".prepare" / "journal.json").write_text(json.dumps({"run": 1}))
    open_output(folder)


TARGETS: dict[str, Callable[[bytes], None]] = {
    "loader_config": loader_config,
    "scale_manifest": scale_manifest,
    "npy_shard": npy_shard,
    "shard_metadata": shard_metadata,
    "prefix_config": prefix_config,
    "sampled_metadata": sampled_metadata,
    "prepare_metadata": prepare_metadata,
}


def run_one(target: Callable[[bytes], None], data: bytes) -> None:
    """Run ``target`` on ``data``; raise ``Finding`` for an exception outside the contract."""
    cwd = os.getcwd()
    try:
        target(data)
    except DataIoError:
        pass
    except RecursionError:
        pass  # a parser's nesting limit (yaml/json), not the project's code
    except Exception as err:
        raise Finding(
            f"{target.__name__}: {type(err).__name__}: {err} on input {data[:200]!r}"
        ) from err
    finally:
        os.chdir(cwd)
