"""The ``[eval]`` loader: the same ``steps`` batches at every evaluation, in a fixed order.

An evaluation reads eval windows in file order (no shuffle), ``batch_size * world_size`` per
step and rank ``r`` every ``world_size``-th, for ``eval.steps`` steps. When the eval set is
shorter than that it wraps around to its start, so a small held-out folder still fills every
evaluation. Every evaluation sees the same batches, so eval losses are comparable over training;
``should_evaluate(step)`` implements ``eval.interval``.

Named sets (``[eval.sets.NAME]``, each a path or HF dataset like ``[eval]``'s own) give more
loaders with the same steps and interval: ``build_eval_loaders`` returns them all by name,
``[eval]``'s own source as ``val`` (MyPT's dual eval: ``val`` and ``general``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

from data_io.errors import ConfigError
from data_io.load.build import TokenizerFacts, hf_text_dataset, shard_dataset
from data_io.load.config import (
    EVAL_MAIN_SET,
    EvalConfig,
    EvalSet,
    LoaderConfig,
    as_loader_config,
    from_job_file,
)
from data_io.load.dataloader.collate import BatchedView, first
from data_io.load.order.samplers import resolve_rank

__all__ = ["EvalLoader", "build_eval_loader", "build_eval_loaders"]


class EvalLoader:
    """``eval.steps`` batches of this rank over a map-style eval dataset."""

    def __init__(
        self,
        dataset: Any,
        *,
        steps: int,
        batch_size: int,
        interval: int = 1000,
        rank: int | None = None,
        world_size: int | None = None,
        num_workers: int = 0,
        pin_memory: bool = False,
    ) -> None:
        if len(dataset) < 1:
            raise ConfigError("the eval dataset has no sample")
        self.dataset = dataset
        self.steps = int(steps)
        self.batch_size = int(batch_size)
        self.interval = int(interval)
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self.num_workers = num_workers
        self.pin_memory = pin_memory and torch.cuda.is_available()

    def __len__(self) -> int:
        return self.steps

    def should_evaluate(self, step: int) -> bool:
        """True at every ``interval``-th training step (not at step 0)."""
        return step > 0 and step % self.interval == 0

    def _batches(self) -> list[list[int]]:
        per_step = self.batch_size * self.world_size
        positions = np.arange(self.steps * per_step, dtype=np.int64) % len(self.dataset)
        steps = positions.reshape(self.steps, per_step)
        return [row[self.rank :: self.world_size].tolist() for row in steps]

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        loader = DataLoader(
            BatchedView(self.dataset),
            batch_sampler=self._batches(),
            num_workers=self.num_workers,
            pin_memory=self.pin_memory,
            collate_fn=first,
        )
        yield from loader


def build_eval_loader(
    config: LoaderConfig | str | Path | Mapping[str, Any],
    rank: int | None = None,
    world_size: int | None = None,
) -> EvalLoader | None:
    """The eval loader of ``[eval]``'s own source (None when ``eval.enabled`` is false or only
    named sets are given: ``build_eval_loaders`` has those)."""
    return build_eval_loaders(config, rank, world_size).get(EVAL_MAIN_SET)


def build_eval_loaders(
    config: LoaderConfig | str | Path | Mapping[str, Any],
    rank: int | None = None,
    world_size: int | None = None,
) -> dict[str, EvalLoader]:
    """Every eval loader of ``config`` (as ``build_dataloader`` takes it) by name: ``val`` for
    ``[eval]``'s own source, then each of ``eval.sets`` (empty when ``eval.enabled`` is
    false)."""
    job = config
    config = as_loader_config(config)
    ev = config.eval
    if not ev.enabled:
        return {}
    sources: dict[str, EvalConfig | EvalSet] = {}
    if ev.dataset_path or ev.hf_dataset_name:
        sources[EVAL_MAIN_SET] = ev
    sources.update(ev.sets)
    rank, world_size = resolve_rank(rank, world_size)
    with from_job_file(job):
        datasets = {name: _eval_dataset(config, name, source) for name, source in sources.items()}
    return {
        name: EvalLoader(
            datasets[name],
            steps=ev.steps,
            batch_size=config.train.batch_size,
            interval=ev.interval,
            rank=rank,
            world_size=world_size,
            num_workers=min(config.data.num_workers, 2),
            pin_memory=config.data.pin_memory,
        )
        for name in sources
    }


def _eval_dataset(config: LoaderConfig, name: str, source: EvalConfig | EvalSet) -> Any:
    """The windows of one eval source, read as the training data is (tokenizer, dtype, EOS)."""

    data, window = config.data, config.train.seq_len + 1
    tok = TokenizerFacts(data)
    if source.dataset_path:
        # Its own dtype when given (an eval corpus may be stored otherwise), else data.dtype.
        prefix = "eval" if name == EVAL_MAIN_SET else f"eval.sets.{name}"
        dtype = (source.dtype, f"{prefix}.dtype") if source.dtype is not None else None
        return shard_dataset(
            data,
            tok,
            source.dataset_path,
            source.file_pattern,
            window,
            dtype,
            f"{prefix}.file_pattern",
            f"{prefix}.dataset_path",
        )
    assert source.hf_dataset_name is not None  # checked by the config
    return hf_text_dataset(
        data,
        tok,
        window,
        source.hf_dataset_name,
        source.hf_dataset_config,
        source.hf_dataset_split,
    )
