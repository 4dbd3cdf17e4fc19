"""The checks of a whole config, run when it is made and after every override: each value in
its range, the keys a source's kind reads, the phases' rules; each message names the key."""

from __future__ import annotations

import math
from typing import Any

from data_io.errors import ConfigError
from data_io.formats.shards import TOKEN_DTYPES
from data_io.load.config.sections import (
    EVAL_MAIN_SET,
    PACKING_METHODS,
    DataConfig,
    DatasetSource,
    EvalConfig,
    TrainSection,
    phase_dicts,
    ring_multiple,
    source_name,
)
from data_io.load.order.mixing import resolve_phases  # checks KempnerForge's phase rules
from data_io.load.packing.row_bins import check_sequence_len


def _positive(where: str, value: int | float | None, minimum: float = 1) -> None:
    # NaN compares False with everything, and inf passes any minimum: both refused by name.
    if value is None:
        return
    if not math.isfinite(value):
        raise ConfigError(f"{where} must be a finite number >= {minimum}, got {value}")
    if value < minimum:
        raise ConfigError(f"{where} must be >= {minimum}, got {value}")


def validate(data: DataConfig, ev: EvalConfig, train: TrainSection) -> None:
    """Every check of a config's three sections (``LoaderConfig.validate``)."""
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
    _validate_ring(train, data)
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


def _validate_ring(train: TrainSection, data: DataConfig) -> None:
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
        mixture_phases(data, names)
    if "tokenized" in kinds and (data.phases or data.anneal_start_step):
        raise ConfigError(
            "phases and annealing weight a mixture of token sources; tokenized-row sources are "
            "concatenated (xorl) and take no weights"
        )


def mixture_phases(data: DataConfig, names: list[str]) -> Any:
    """The mixture's weights by phase (``mixing.resolve_phases``, which checks KempnerForge's
    phase rules) of ``data.datasets``, named ``names``."""
    return resolve_phases(
        names,
        [s.weight for s in data.datasets],
        data.mix_temperature,
        phase_dicts(data),
        data.anneal_start_step,
        data.anneal_weights,
    )
