"""The loader config's sections as dataclasses: ``[data]`` (``DataConfig``, its sources and
phases), ``[eval]`` (``EvalConfig`` and its named sets) and the ``[train]`` keys a loader reads
(``TrainSection``). Field names and defaults are the seeds' (KempnerForge, xorl); data_io's
additions are marked. Also what the builders derive from them (a source's name, the phases as
dicts, the ring-attention multiple, which source fields another field overrides)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PACKING_METHODS = ("sequential", "multipack")


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


def ring_multiple(train: TrainSection) -> int:
    """What every tokenized row is padded to a multiple of: 2 x ring x ulysses, or 1 (no ring
    attention: rows are not padded)."""
    ring, ulysses = train.ringattn_parallel_size, train.ulysses_parallel_size
    return 2 * ring * ulysses if ring > 1 else 1


def _phase_dict(phase: TrainingPhase) -> dict[str, Any]:
    return {
        "start_step": phase.start_step,
        "dataset_weights": dict(phase.dataset_weights),
        "lr_scale": phase.lr_scale,
    }


def phase_dicts(data: DataConfig) -> list[dict[str, Any]]:
    """``data.phases`` as the plain dicts ``mixing.resolve_phases`` takes."""
    return [_phase_dict(p) for p in data.phases]


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
