"""``build_dataloader``: a ``LoaderConfig`` → the dataset, its global order and a loader.

The four paths of KempnerForge's trainer, plus xorl's tokenized rows:

=======================================  =================================  =================
config                                   dataset                            order
=======================================  =================================  =================
``data.dataset_path``                    ``MemoryMappedDataset``            ``ShuffledOrder``
``data.hf_dataset_name``                 ``HuggingFaceDataset`` (eager)     ``ShuffledOrder``
``... + data.hf_streaming``              ``StreamingHuggingFaceDataset``    (its own streams)
``data.datasets`` (token sources)        ``MixtureDataset`` of the above    ``MixtureOrder``
``data.datasets`` (``type: tokenized``)  ``TokenizedRowsDataset``           ``ShuffledOrder``
``... + streaming: true``                ``StreamingTokenizedRowsDataset``  (its own streams)
=======================================  =================================  =================

Windows are ``train.seq_len + 1`` tokens (input and label shift), so batches hold ``seq_len``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from data_io.errors import ConfigError
from data_io.formats.shards import Declarations, read_declarations
from data_io.load.config import (
    DataConfig,
    DatasetSource,
    LoaderConfig,
    as_loader_config,
    config_from_dict,
    data_seed,
    from_job_file,
    mixture_phases,
    ring_multiple,
    source_name,
)
from data_io.load.dataloader.stateful import StatefulLoader
from data_io.load.datasets.hf_text import HuggingFaceDataset, StreamingHuggingFaceDataset
from data_io.load.datasets.mixture import MixtureDataset
from data_io.load.datasets.row_sources import RowSource
from data_io.load.datasets.rows_stream import StreamingTokenizedRowsDataset
from data_io.load.datasets.shards import MemoryMappedDataset, honour_declared
from data_io.load.datasets.tokenized_rows import TokenizedRowsDataset
from data_io.load.order.samplers import MixtureOrder, ShuffledOrder, resolve_rank
from data_io.tokenizer.encoder import TextEncoder
from data_io.tokenizer.files import resolve_tokenizer

__all__ = [
    "BuiltData",
    "TokenizerFacts",
    "build_data",
    "build_dataloader",
    "hf_text_dataset",
    "rows_dataset_from_config",
    "shard_dataset",
    "tokenized_rows_dataset",
]


@dataclass
class BuiltData:
    """What a config resolves to, before any loader: also what ``loader-check`` reports."""

    dataset: Any
    order: ShuffledOrder | MixtureOrder | None
    names: list[str] | None
    kind: str


class TokenizerFacts:
    """The tokenizer facts a config may leave out (EOS id, vocabulary size), read on demand."""

    def __init__(self, data: DataConfig) -> None:
        self.path = data.tokenizer_path
        self.data = data

    @cached_property
    def encoder(self) -> Any:
        if not self.path:
            return None

        return TextEncoder.from_file(resolve_tokenizer(self.path))

    @property
    def eos_token_id(self) -> int | None:
        if self.data.eos_token_id is not None:
            return self.data.eos_token_id
        if not self.data.pack_sequences:
            return None
        if self.encoder is None:
            raise ConfigError(
                "data.pack_sequences needs the EOS id: set data.eos_token_id or data.tokenizer_path"
            )
        return int(self.encoder.eos_id_for(None))

    @property
    def vocab_size(self) -> int | None:
        if self.data.vocab_size is not None:
            return self.data.vocab_size
        return None if self.encoder is None else int(self.encoder.vocab_size)

    def eos_for(self, declared: Declarations) -> int | None:
        """The EOS id of shards whose metadata may declare one: the declared id, which the
        config's ``data.eos_token_id`` and tokenizer must not contradict."""
        if declared.eos_id is None or not self.data.pack_sequences:
            return self.eos_token_id
        if self.data.eos_token_id is not None:
            return honour_declared("data.eos_token_id", self.data.eos_token_id, declared.eos_id)
        if self.encoder is not None:
            mine = int(self.encoder.eos_id_for(None))
            if mine != declared.eos_id.value:
                raise ConfigError(
                    f"data.tokenizer_path ({self.path}) ends documents with id {mine}, but "
                    f"{declared.eos_id.where()}: the shards were written with another tokenizer; "
                    "point data.tokenizer_path at that tokenizer, or set data.eos_token_id="
                    f"{declared.eos_id.value} to use the shards' EOS"
                )
        return declared.eos_id.value

    def vocab_for(self, declared: Declarations) -> int | None:
        """The vocabulary size ids are checked against: the config's or tokenizer's, which must
        not be smaller than the one the shards declare; else the declared one."""
        if self.data.vocab_size is not None:
            return honour_declared("data.vocab_size", self.data.vocab_size, declared.vocab_size)
        if self.encoder is not None:
            key = f"the vocab_size of data.tokenizer_path ({self.path})"
            return honour_declared(key, int(self.encoder.vocab_size), declared.vocab_size)
        return None if declared.vocab_size is None else declared.vocab_size.value

    def check_eos_below_vocab(self, eos: int | None, vocab: int | None, declared: Declarations):
        """Packing cuts documents at the EOS id, and every id is checked below the vocabulary
        size: an EOS at or past it would never be found, each window one document, unseen."""
        if not self.data.pack_sequences or eos is None or vocab is None or eos < vocab:
            return
        tokenizer = f"data.tokenizer_path ({self.path})"
        if self.data.eos_token_id is not None:
            eos_from = "data.eos_token_id"
        else:
            eos_from = declared.eos_id.where() if declared.eos_id is not None else tokenizer
        if self.data.vocab_size is not None:
            vocab_from = "data.vocab_size"
        elif self.encoder is not None:
            vocab_from = tokenizer
        else:
            vocab_from = declared.vocab_size.where() if declared.vocab_size else "the shards"
        raise ConfigError(
            f"the EOS id {eos} ({eos_from}) is not below the vocabulary size {vocab} "
            f"({vocab_from}): ids are checked below {vocab}, so packing would never find a "
            "document's end; give the EOS id and vocabulary of the tokenizer the shards were "
            "written with"
        )

    def require_path(self, what: str) -> str:
        if not self.path:
            raise ConfigError(f"{what} is tokenized here: set data.tokenizer_path")
        return self.path


def shard_dataset(
    data: DataConfig,
    tok: TokenizerFacts,
    path: str,
    pattern: str,
    window: int,
    dtype: tuple[str | None, str] | None = None,
    pattern_key: str = "data.file_pattern",
    path_key: str = "data.dataset_path",
) -> Any:
    """``dtype``: (the .bin dtype, the config key that gave it); default ``data.dtype``.
    ``pattern_key``/``path_key``: the config keys that gave ``pattern`` and ``path``, for
    messages."""
    folder = Path(path).expanduser()
    declared = read_declarations(folder) if folder.is_dir() else Declarations()
    bin_dtype, dtype_key = dtype if dtype is not None else (data.dtype, "data.dtype")
    eos, vocab = tok.eos_for(declared), tok.vocab_for(declared)
    tok.check_eos_below_vocab(eos, vocab, declared)
    return MemoryMappedDataset(
        path,
        window,
        file_pattern=pattern,
        pack_sequences=data.pack_sequences,
        eos_token_id=eos,
        position_ids=data.position_ids,
        cu_seqlens=data.cu_seqlens,
        vocab_size=vocab,
        declared=declared,  # read once for the folder
        dtype=bin_dtype,
        dtype_key=dtype_key,
        pattern_key=pattern_key,
        path_key=path_key,
    )


def hf_text_dataset(
    data: DataConfig,
    tok: TokenizerFacts,
    window: int,
    name: str,
    config_name: str | None,
    split: str,
    streaming: bool = False,
    rank_world: tuple[int, int] | None = None,
) -> Any:
    options: dict[str, Any] = {
        "split": split,
        "text_field": data.hf_dataset_text_field,
        "dataset_config": config_name,
        "eos_token_id": tok.eos_token_id,
        "pack_sequences": data.pack_sequences,
        "position_ids": data.position_ids,
        "cu_seqlens": data.cu_seqlens,
    }
    tokenizer = tok.require_path(f"HF dataset {name!r}")
    if streaming:
        assert rank_world is not None
        rank, world = rank_world
        return StreamingHuggingFaceDataset(
            name, window, tokenizer, rank=rank, world_size=world, **options
        )
    return HuggingFaceDataset(name, window, tokenizer, cache_dir=data.cache_dir or None, **options)


def _token_source(
    data: DataConfig, tok: TokenizerFacts, source: DatasetSource, window: int, index: int
) -> Any:
    if source.path:
        dtype = (
            (source.dtype, f"data.datasets[{index}].dtype")
            if source.dtype is not None
            else (data.dtype, "data.dtype")
        )
        pattern, key = (
            (source.file_pattern, f"data.datasets[{index}].file_pattern")
            if source.file_pattern
            else (data.file_pattern, "data.file_pattern")
        )
        return shard_dataset(
            data, tok, source.path, pattern, window, dtype, key, f"data.datasets[{index}].path"
        )
    assert source.hf_name is not None
    split = source.hf_split or data.hf_dataset_split
    return hf_text_dataset(data, tok, window, source.hf_name, source.hf_config, split)


def tokenized_rows_dataset(config: LoaderConfig, **overrides: Any) -> Any:
    """The ``TokenizedRowsDataset`` of a config whose sources are ``type: tokenized`` (the one
    place both ``build_dataloader`` and ``data_io pack`` make it, so they share the cache)."""

    data = config.data
    if not data.datasets:
        raise ConfigError(
            "no data.datasets: tokenized rows are listed under a top-level data: section's "
            "datasets: (the xorl layout)"
        )
    if any(s.type != "tokenized" for s in data.datasets):
        raise ConfigError(
            "data.datasets must be tokenized-row sources (type: tokenized, or files such as "
            ".jsonl/.parquet, or any source when sample_packing_method is set)"
        )
    sources = row_sources(config)
    if any(s.streaming for s in sources):
        raise ConfigError(
            "the sources have streaming: true: a stream is read as it is trained on, so there is "
            "no plan to precompute or cache; build the loader (build_dataloader) instead"
        )
    options: dict[str, Any] = {
        "sample_packing_method": data.sample_packing_method,
        "sample_packing_sequence_len": data.sample_packing_sequence_len,
        "dataset_prepared_path": data.dataset_prepared_path,
        "seed": data_seed(config),
        "shuffle": data.shuffle,
        # Every id is checked against the vocabulary the config or its tokenizer names.
        "vocab_size": TokenizerFacts(data).vocab_size,
        "ring_multiple": ring_multiple(config.train),
    }
    return TokenizedRowsDataset(sources, **(options | overrides))


def row_sources(config: LoaderConfig) -> list[Any]:
    """The ``RowSource`` of each ``type: tokenized`` entry of ``data.datasets``."""

    data = config.data
    return [
        RowSource(
            path=s.path,
            # Files picked from a table of splits are load_dataset's split 'train'.
            split=s.split if s.split_files is None else "train",
            data_files=s.data_files,
            revision=s.revision,
            select_columns=s.select_columns or data.select_columns,
            max_seq_len=s.max_seq_len,
            storage_options=s.storage_options,
            name=s.name or None,
            data_dir=s.data_dir,
            trust_remote_code=s.trust_remote_code,
            streaming=s.streaming,
            token=s.token,
            metrics_name=source_name(s),
        )
        for s in data.datasets
    ]


def streaming_rows_dataset(config: LoaderConfig, rank: int, world_size: int) -> Any:
    """The ``StreamingTokenizedRowsDataset`` of a config whose sources all stream."""

    data = config.data
    assert data.sample_packing_sequence_len is not None  # config validation: sequential packing
    return StreamingTokenizedRowsDataset(
        row_sources(config),
        sample_packing_sequence_len=data.sample_packing_sequence_len,
        rank=rank,
        world_size=world_size,
        vocab_size=TokenizerFacts(data).vocab_size,
        ring_multiple=ring_multiple(config.train),
    )


def build_data(config: LoaderConfig, rank: int = 0, world_size: int = 1) -> BuiltData:
    """The dataset and global order that ``config`` describes (no loader, no workers)."""
    data, train = config.data, config.train
    window = train.seq_len + 1
    tok = TokenizerFacts(data)
    seed, shuffle = data_seed(config), data.shuffle
    if data.datasets and data.datasets[0].type == "tokenized" and data.datasets[0].streaming:
        stream = streaming_rows_dataset(config, rank, world_size)
        return BuiltData(stream, None, None, "tokenized-streaming")
    if data.datasets and data.datasets[0].type == "tokenized":
        dataset = tokenized_rows_dataset(config)
        return BuiltData(dataset, ShuffledOrder(len(dataset), seed, shuffle), None, "tokenized")
    if data.datasets:
        names = [source_name(s) for s in data.datasets]
        parts = [_token_source(data, tok, s, window, i) for i, s in enumerate(data.datasets)]
        phases = mixture_phases(data, names)
        mixture = MixtureDataset(parts, names)
        order = MixtureOrder([len(p) for p in parts], phases, seed, shuffle)
        return BuiltData(mixture, order, names, "mixture")
    if data.dataset_path:
        dataset = shard_dataset(data, tok, data.dataset_path, data.file_pattern, window)
        return BuiltData(dataset, ShuffledOrder(len(dataset), seed, shuffle), None, "shards")
    if data.hf_dataset_name:
        split, name = data.hf_dataset_split, data.hf_dataset_name
        if data.hf_streaming:
            stream = hf_text_dataset(
                data, tok, window, name, data.hf_dataset_config, split, True, (rank, world_size)
            )
            return BuiltData(stream, None, None, "hf-streaming")
        dataset = hf_text_dataset(data, tok, window, name, data.hf_dataset_config, split)
        return BuiltData(dataset, ShuffledOrder(len(dataset), seed, shuffle), None, "hf")
    raise ConfigError(
        "no data source: set data.dataset_path, data.hf_dataset_name or data.datasets"
    )


def build_dataloader(
    config: LoaderConfig | str | Path | Mapping[str, Any],
    rank: int | None = None,
    world_size: int | None = None,
    overrides: Sequence[str] = (),
) -> StatefulLoader:
    """The training loader of ``config`` (a ``LoaderConfig``, a TOML/YAML path, or a dict of
    the job file's sections) for a rank.

    ``rank``/``world_size`` default to torch.distributed's, else 0 of 1. ``overrides`` are
    ``section.key=value`` strings (or ``--section.key=value``), applied over the config. The
    loader has ``state_dict()``/``load_state_dict()``; ``loader.lr_scale`` follows the
    mixture's phases.
    """

    job = config
    config = as_loader_config(config, overrides)
    rank, world_size = resolve_rank(rank, world_size)
    with from_job_file(job):
        built = build_data(config, rank, world_size)
    data = config.data
    return StatefulLoader(
        built.dataset,
        built.order,
        batch_size=config.train.batch_size,
        rank=rank,
        world_size=world_size,
        num_workers=data.num_workers,
        pin_memory=data.pin_memory,
        prefetch_factor=data.prefetch_factor,
        names=built.names,
        identity={"kind": built.kind, "seq_len": config.train.seq_len},
    )


def rows_dataset_from_config(data: Any, *, where: str = "data", **overrides: Any) -> Any:
    """The dataset of an xorl ``data:`` section, read as ``build_dataloader`` reads it
    (``data_io.load.config``): the same keys, checks and cache. ``overrides`` replace
    ``TokenizedRowsDataset`` options (``dataset_prepared_path``...); a ``TokenizedRowsDataset``."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping with a 'datasets' list, got {data!r}")
    config = config_from_dict({"data": dict(data)}, where)
    return tokenized_rows_dataset(config, **overrides)
