"""The trainer's torch ``Dataset`` over a sampled output folder (formats.md §4 and §5).

``SampledDataset`` yields one batch (a dict of tensors) per training step for this rank:

* ``layout="prefixlm_packed"`` — the HRM-Text trainer's packed prefix-LM row (see
  ``data_io.load.packing.layouts.packed_prefixlm``), scheduled by the multipack of ``data_io.load.packing.multipack``; the
  per-batch scalars travel as 0-d int64 tensors under ``SCALAR_KEYS`` (keep them on the host:
  ``split_scalars``).
* ``layout="causal_padded"`` — ``batch_size`` samples per rank and step, right-padded.

Ranks split every step without talking to each other; DataLoader workers take every
``num_workers``-th step of their rank, so the DataLoader hands steps out in order. Stopping after
any step and resuming from ``state_dict()`` gives exactly the remaining batches, with or without
torchdata's ``StatefulDataLoader`` (``ResumableDataLoader`` does the bookkeeping for the plain
``DataLoader``). torch is imported only inside ``data_io.load``.

A state from ``ResumableDataLoader.state_dict()`` also resumes with another world size (and the
``batch_max_length`` or ``batch_size`` that goes with it): every step consumes the next run of
epoch rows, so a state marks a prefix of the epoch, and the resumed dataset schedules the rest of
the epoch (``row_offset`` onwards) for the new ranks. The job as a whole sees no row twice and
skips none; which rank gets which row changes, as with the flat loaders. At the same world size
any rank's state resumes every rank (all ranks take the same steps), so a trainer may save rank
0's state only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from data_io.errors import ConfigError, DataIoError, InputError
from data_io.formats.sampled import (
    INDEX_NAMES,
    EpochIndex,
    FolderIdentity,
    SampledMetadata,
    check_epochs_present,
    folder_identity,
    open_epoch,
    open_tokens,
    read_metadata,
)
from data_io.load.order.samplers import resolve_rank
from data_io.load.packing.layouts import (
    IGNORE_INDEX,
    PACKED_KEYS,
    PADDED_KEYS,
    SCALAR_KEYS,
    packed_prefixlm,
    padded_causal,
)
from data_io.load.packing.multipack import MultipackPlanner, PackingSummary

__all__ = [
    "IGNORE_INDEX",
    "SCALAR_KEYS",
    "ResumableDataLoader",
    "SampledDataset",
    "format_batch",
    "split_scalars",
]

Layout = Literal["prefixlm_packed", "causal_padded"]
_LAYOUTS = ("prefixlm_packed", "causal_padded")
# 3: states record the first epoch row of the schedule ("row_offset", after an elastic resume);
# 2 did not (0); 1 did not record the sampled folder's identity either (see load_state_dict).
_STATE_VERSION = 3
_OLDER_STATE_VERSIONS = (2, 1)
_LEGACY_STATE_VERSION = 1
# Settings that may change on resume when the saved position is global (ResumableDataLoader):
# the world size, and the per-rank batch that goes with it.
_ELASTIC_SETTINGS = ("rank", "world_size", "batch_max_length", "batch_size")
_STATE_KEYS = (
    "version",
    "epoch",
    "config",
    "folder",
    "row_offset",
    "base_step",
    "num_workers",
    "worker_id",
    "yielded",
)


class SampledDataset(IterableDataset):
    """One epoch of a sampled folder, as this rank's batches; see the module docstring.

    ``batch_max_length``: tokens per packed row (the trainer's global batch in tokens divided by
    the world size) for ``prefixlm_packed``; the longest allowed sample for ``causal_padded``
    (and its padded width when ``fixed_length``). Defaults to what the longest possible row needs
    (``max_seq_len - 1`` packed, ``max_seq_len`` padded). ``batch_size``: samples per rank and
    step, ``causal_padded`` only. ``drop_last`` drops the packed step that reaches the end of the
    epoch (as the HRM-Text trainer does); the incomplete last step of ``causal_padded`` is always
    dropped. ``seed`` is recorded and checked on resume only: the row order is the sampler's
    (already shuffled with the sampler's seed) and the loader adds no randomness of its own.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        epoch: int = 0,
        layout: Layout = "prefixlm_packed",
        batch_max_length: int | None = None,
        batch_size: int | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        target_only: bool = True,
        seed: int = 0,
        *,
        drop_last: bool = True,
        fixed_length: bool = False,
        check_token_ids: bool = True,
    ) -> None:
        super().__init__()
        if layout not in _LAYOUTS:
            raise ConfigError(f"layout must be one of {', '.join(_LAYOUTS)}; got {layout!r}")
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ConfigError(f"epoch must be a non-negative integer, got {epoch!r}")
        self.path = Path(path)
        self.layout: Layout = layout
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self.target_only = bool(target_only)
        self.seed = seed
        self.drop_last = bool(drop_last)
        self.fixed_length = bool(fixed_length)
        self.check_token_ids = bool(check_token_ids)

        self.metadata: SampledMetadata = read_metadata(self.path)
        check_epochs_present(self.path, self.metadata)
        # Recorded in every state: a state from another sample must not resume this one.
        self.identity: FolderIdentity = folder_identity(self.path, self.metadata)
        packed = layout == "prefixlm_packed"
        if batch_max_length is None:
            batch_max_length = (
                self.metadata.max_seq_len - 1 if packed else self.metadata.max_seq_len
            )
        batch_max_length, batch_size = _whole(batch_max_length), _whole(batch_size)
        if not _is_int(batch_max_length) or batch_max_length < 1:
            raise ConfigError(f"batch_max_length must be an integer >= 1, got {batch_max_length!r}")
        self.batch_max_length = int(batch_max_length)
        if packed and batch_size is not None:
            raise ConfigError(
                "batch_size applies to layout='causal_padded' only; a packed batch is sized by "
                "batch_max_length (tokens per rank)"
            )
        if not packed and (not _is_int(batch_size) or batch_size < 1):
            raise ConfigError(
                f"layout='causal_padded' needs batch_size, an integer >= 1, got {batch_size!r}"
            )
        self.batch_size = None if batch_size is None else int(batch_size)
        # Check everything now, then let go of the maps: workers re-open lazily (fork or spawn).
        self._set_epoch(epoch)
        self._row_offset = 0  # first epoch row this schedule covers (an elastic resume moves it)
        self._base_step = 0  # first global step of the next iteration (set by load_state_dict)
        self._resume: dict[str, Any] | None = None
        self._yielded = 0
        self._stride, self._offset = 1, 0

    # -- opening -------------------------------------------------------------------------
    def _set_epoch(self, epoch: int) -> None:
        tokens = open_tokens(self.path, self.metadata)
        index = open_epoch(self.path, epoch, int(tokens.shape[0]), self.metadata)
        self.epoch = epoch
        self.num_rows = index.rows
        il = np.asarray(index.inst_len, dtype=np.int64)
        rl = np.asarray(index.resp_len, dtype=np.int64)
        # A packed row holds inst + resp - 1 tokens (the shift); a padded row all of them.
        size = il + rl - 1 if self.layout == "prefixlm_packed" else il + rl
        if size.size and int(size.max()) > self.batch_max_length:
            row = int(np.argmax(size > self.batch_max_length))
            what = (
                "inst_len + resp_len - 1"
                if self.layout == "prefixlm_packed"
                else "inst_len + resp_len"
            )
            raise InputError(
                f"{self.path / f'epoch_{epoch}'} row {row}: {int(size[row])} tokens ({what}) do "
                f"not fit batch_max_length={self.batch_max_length}; raise batch_max_length or "
                "re-sample with a smaller context_size"
            )
        self._check_not_empty(epoch, size)
        self._drop_handles()

    def _check_not_empty(self, epoch: int, size: np.ndarray) -> None:
        """Refuse settings under which the epoch's rows yield no batch at all (a silent no-op
        epoch). An epoch of no rows (``data_io sample allow_empty=true``) is meant, and yields
        nothing."""
        if size.size == 0:
            return
        where = f"{self.path / f'epoch_{epoch}'} has {size.size} rows"
        if self.layout == "causal_padded":
            assert self.batch_size is not None
            step = self.batch_size * self.world_size
            if size.size < step:
                raise ConfigError(
                    f"{where}, fewer than one step of batch_size {self.batch_size} x world_size "
                    f"{self.world_size} = {step}, so it yields no batch; lower batch_size"
                )
            return
        # Rows enough for every rank twice over and tokens for more than two full steps: the
        # first step cannot be the dropped last one. Only a small epoch is planned here (the
        # planner's passes over a 10M-row epoch cost 25-50 ms of construction).
        step_tokens = self.world_size * self.batch_max_length
        if size.size >= 4 * self.world_size and int(size.sum()) > 2 * step_tokens:
            return
        planner = MultipackPlanner(
            size, self.batch_max_length, self.world_size, drop_last=self.drop_last
        )
        if planner.step(0) is not None:
            return
        if planner.summary().rows_dropped_last_step:
            reason = (
                f"({int(size.sum())} tokens) that all fit one step of world_size "
                f"{self.world_size} x batch_max_length {self.batch_max_length}, and the step "
                "that reaches the end of the epoch is dropped (drop_last), so it yields no "
                "batch; lower batch_max_length, or pass drop_last=False"
            )
        else:
            reason = (
                f"for world_size {self.world_size} ranks, so it yields no batch; lower world_size"
            )
        raise ConfigError(f"{where} {reason}")

    def _drop_handles(self) -> None:
        self._tokens: np.ndarray | None = None
        self._index: EpochIndex | None = None
        self._planner: MultipackPlanner | None = None

    def _open(self) -> tuple[np.ndarray, EpochIndex]:
        """Memory-map the pool and index in this process (checked already in __init__)."""
        if self._tokens is None or self._index is None:
            tokens = open_tokens(self.path)
            index = open_epoch(
                self.path, self.epoch, int(tokens.shape[0]), self.metadata, check=False
            )
            # Plain ndarray views of the maps: indexing skips np.memmap's per-call overhead.
            self._index = EpochIndex(*(np.asarray(getattr(index, f)) for f in INDEX_NAMES))
            self._tokens = np.asarray(tokens)
        return self._tokens, self._index

    def _get_planner(self) -> MultipackPlanner:
        if self._planner is None:
            self._planner = self._planner_for(
                self._row_offset, self.batch_max_length, self.world_size
            )
        return self._planner

    def _planner_for(self, row_offset: int, capacity: int, world_size: int) -> MultipackPlanner:
        """The packing schedule of epoch rows ``row_offset ..`` for ``world_size`` ranks."""
        _, index = self._open()
        lengths = (
            np.asarray(index.inst_len[row_offset:], np.int64)
            + np.asarray(index.resp_len[row_offset:], np.int64)
            - 1
        )
        return MultipackPlanner(lengths, capacity, world_size, drop_last=self.drop_last)

    def __getstate__(self) -> dict[str, Any]:
        # Memory maps would be pickled as full copies of the files: send only the recipe.
        state = self.__dict__.copy()
        state.update(_tokens=None, _index=None, _planner=None)
        return state

    def set_epoch(self, epoch: int) -> None:
        """Switch to another sampled epoch (checked now); the next iteration starts at step 0.

        DataLoader workers get a copy of the dataset when they start, so with
        ``persistent_workers=True`` a later ``set_epoch`` would not reach them: make a new
        DataLoader (or dataset) per epoch instead.
        """
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ConfigError(f"epoch must be a non-negative integer, got {epoch!r}")
        self._set_epoch(epoch)
        self._base_step, self._resume, self._yielded = 0, None, 0
        self._set_row_offset(0)

    def _set_row_offset(self, row_offset: int) -> None:
        if row_offset != self._row_offset:
            self._row_offset = row_offset
            self._planner = None

    # -- schedule ------------------------------------------------------------------------
    def num_steps(self) -> int:
        """Steps (batches per rank) in this epoch, identical on every rank (after an elastic
        resume: the steps of the rows from ``row_offset`` on)."""
        if self.layout == "prefixlm_packed":
            return self._get_planner().num_steps()
        assert self.batch_size is not None
        return (self.num_rows - self._row_offset) // (self.batch_size * self.world_size)

    @property
    def row_offset(self) -> int:
        """The first epoch row this dataset schedules: 0, or where an elastic resume began."""
        return self._row_offset

    def summary(self) -> dict[str, Any]:
        """Steps, rows and tokens used, and rows dropped by reason, for this epoch (all ranks;
        after an elastic resume, for the rows from ``row_offset`` on)."""
        if self.layout == "prefixlm_packed":
            s: PackingSummary = self._get_planner().summary()
            return {
                "steps": s.steps,
                "rows_used": s.rows_used,
                "tokens_used": s.tokens_used,
                "rows_dropped": {
                    "last_step": s.rows_dropped_last_step,
                    "fewer_rows_than_ranks": s.rows_dropped_too_few_rows,
                },
                "tokens_dropped": s.tokens_dropped,
                "packing_efficiency": s.efficiency,
            }
        steps = self.num_steps()
        assert self.batch_size is not None
        used = steps * self.batch_size * self.world_size
        return {
            "steps": steps,
            "rows_used": used,
            "rows_dropped": {"incomplete_last_step": self.num_rows - self._row_offset - used},
        }

    def _rows_of_step(self, step: int) -> np.ndarray | None:
        """This rank's epoch rows at ``step`` (None past the end)."""
        if self.layout == "prefixlm_packed":
            planner = self._get_planner()
            bounds = planner.step(step)
            return None if bounds is None else self._row_offset + planner.bins(bounds)[self.rank]
        assert self.batch_size is not None
        if step >= self.num_steps():
            return None
        first = self._row_offset + (step * self.world_size + self.rank) * self.batch_size
        return np.arange(first, first + self.batch_size, dtype=np.int64)

    def batch_at(self, step: int) -> dict[str, torch.Tensor]:
        """The batch of ``step`` for this rank (random access; iteration uses the same code)."""
        rows = self._rows_of_step(step)
        if rows is None:
            raise IndexError(
                f"epoch {self.epoch} has {self.num_steps()} steps; step {step} is past the end"
            )
        return self._build(rows)

    def _build(self, rows: np.ndarray) -> dict[str, torch.Tensor]:
        tokens, index = self._open()
        picked = [
            np.asarray(a[rows], dtype=np.int64)
            for a in (index.inst_start, index.inst_len, index.resp_start, index.resp_len)
        ]
        vocab = self.metadata.vocab_size if self.check_token_ids else None
        if self.layout == "prefixlm_packed":
            arrays, scalars = packed_prefixlm(
                tokens,
                rows,
                *picked,
                self.batch_max_length,
                target_only=self.target_only,
                vocab_size=vocab,
            )
            # Views of two tensors (not eleven): workers ship one shared-memory segment per storage.
            batch = dict(zip(PACKED_KEYS, torch.from_numpy(arrays).unbind(), strict=True))
            batch.update(zip(SCALAR_KEYS, torch.from_numpy(scalars).unbind(), strict=True))
            return batch
        arrays = padded_causal(
            tokens,
            rows,
            *picked,
            pad_to=self.batch_max_length if self.fixed_length else None,
            target_only=self.target_only,
            vocab_size=vocab,
        )
        return dict(zip(PADDED_KEYS, torch.from_numpy(arrays).unbind(), strict=True))

    # -- iteration and resume ------------------------------------------------------------
    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        info = get_worker_info()
        stride, offset = (1, 0) if info is None else (info.num_workers, info.id)
        first = self._first_step(stride, offset)
        self._stride, self._offset, self._yielded = stride, offset, 0
        self._base_step = first - offset
        self._resume = None
        step = first
        while (rows := self._rows_of_step(step)) is not None:
            batch = self._build(rows)
            # Count before yielding: a state_dict() taken right after this batch must skip it.
            self._yielded += 1
            yield batch
            step += stride

    def _first_step(self, stride: int, offset: int) -> int:
        """Global step this copy starts at, from a loaded state (else step 0 of the epoch)."""
        state = self._resume
        if state is None:
            return offset
        workers, worker_id = state["num_workers"], state["worker_id"]
        if workers == stride and worker_id == offset:
            # The same worker resuming (torchdata restores each worker's own state).
            return state["base_step"] + offset + state["yielded"] * stride
        if workers == 1:
            # A single stream (num_workers=0, or ResumableDataLoader): split what is left.
            return state["base_step"] + state["yielded"] + offset
        raise ConfigError(
            f"this state was saved by worker {worker_id} of {workers} DataLoader workers and "
            f"cannot resume worker {offset} of {stride}; resume with the same num_workers, or "
            "save with ResumableDataLoader.state_dict(), which does not depend on workers"
        )

    def _fingerprint(self) -> dict[str, Any]:
        return {
            "layout": self.layout,
            "batch_max_length": self.batch_max_length,
            "batch_size": self.batch_size,
            "rank": self.rank,
            "world_size": self.world_size,
            "target_only": self.target_only,
            "drop_last": self.drop_last,
            "seed": self.seed,
            "num_rows": self.num_rows,
        }

    def _folder_record(self) -> dict[str, Any]:
        """The ``folder`` entry of a state: identity, plus the path for error messages only."""
        return {**self.identity.as_dict(), "path": str(self.path)}

    def _state(self, base_step: int, workers: int, worker_id: int, yielded: int) -> dict[str, Any]:
        return {
            "version": _STATE_VERSION,
            "epoch": self.epoch,
            "config": self._fingerprint(),
            "folder": self._folder_record(),
            "row_offset": self._row_offset,
            "base_step": base_step,
            "num_workers": workers,
            "worker_id": worker_id,
            "yielded": yielded,
        }

    def state_dict(self) -> dict[str, Any]:
        """Where this copy stands: the next batch is exactly what a resumed copy yields first."""
        if self._resume is not None:  # loaded but not iterated yet: still the loaded position
            return dict(self._resume)
        return self._state(self._base_step, self._stride, self._offset, self._yielded)

    def load_state_dict(self, state: dict[str, Any], *, check_folder: bool = True) -> None:
        """Resume from ``state_dict()`` (switching epoch if it names another one).

        The state must come from this sampled folder (same sampler marker, or for a folder
        without one the same content) and the same loader settings. ``check_folder=False``
        skips the folder check (the row count is still checked): for a state saved before
        folders were recorded (state version 1), or the same sample rebuilt from copies of
        the tokenized data whose file times differ, when you know the rows are the same.
        """
        version = state.get("version") if isinstance(state, dict) else None
        if version not in (_STATE_VERSION, *_OLDER_STATE_VERSIONS):
            raise ConfigError(
                f"not a SampledDataset state (version {_STATE_VERSION}): {state!r}; pass what "
                "SampledDataset.state_dict() or ResumableDataLoader.state_dict() returned"
            )
        # "folder" is absent from legacy states only; _check_folder explains that case.
        missing = [k for k in _STATE_KEYS if k not in state and k not in ("folder", "row_offset")]
        if missing or not isinstance(state["config"], dict):
            raise ConfigError(
                f"not a complete SampledDataset state (missing {', '.join(missing) or 'config'})"
                "; pass what SampledDataset.state_dict() or ResumableDataLoader.state_dict() "
                "returned, unmodified"
            )
        _check_position(state)
        elastic = self._check_settings(state)
        if check_folder:
            self._check_folder(state)
        # A state refused after the switch to its epoch leaves the dataset where it was.
        epoch, row_offset = self.epoch, self._row_offset
        try:
            self._resume_from(state, elastic)
        except DataIoError:
            if self.epoch != epoch:
                self._set_epoch(epoch)
            self._set_row_offset(row_offset)
            raise

    def _resume_from(self, state: dict[str, Any], elastic: bool) -> None:
        """``load_state_dict`` once the state's form, settings and folder are checked."""
        if state["epoch"] != self.epoch:
            self._set_epoch(int(state["epoch"]))
        saved_rows = state["config"].get("num_rows")
        if saved_rows != self.num_rows:
            raise ConfigError(
                f"cannot resume: epoch {self.epoch} of {self.path} has {self.num_rows} rows, the "
                f"saved state had {saved_rows}; the sampled folder was rebuilt. Resume on the "
                "folder the state was saved on, or start this epoch from step 0"
            )
        row_offset = _saved_row_offset(state, self.num_rows)
        # Stored as a current state: an older one is re-labelled with this folder, which the
        # caller vouched for with check_folder=False.
        resume = {k: state[k] for k in _STATE_KEYS if k in state}
        # This dataset's settings: the rank differs when another rank saved the state.
        resume.update(version=_STATE_VERSION, folder=self._folder_record())
        resume["config"] = self._fingerprint()
        if elastic:
            # Where the saved schedule stood is a prefix of the epoch: schedule the rest anew.
            row_offset += self._rows_consumed(state, row_offset)
            resume.update(base_step=0, num_workers=1, worker_id=0, yielded=0)
        self._set_row_offset(row_offset)
        next_step = int(resume["base_step"]) + int(resume["yielded"])
        if resume["num_workers"] == 1 and not self._has_steps(next_step):
            raise ConfigError(
                f"cannot resume: the state is at step {next_step} of epoch {self.epoch}, which "
                f"has {self.num_steps()} steps with these settings; it was not saved on this "
                "epoch: pass what state_dict() returned, unmodified"
            )
        resume["row_offset"] = row_offset
        self._resume = resume

    def _has_steps(self, count: int) -> bool:
        """Whether the schedule has at least ``count`` steps (computes no more than that)."""
        if count == 0:
            return True
        if self.layout == "prefixlm_packed":
            return self._get_planner().step(count - 1) is not None
        return count <= self.num_steps()

    def _check_settings(self, state: dict[str, Any]) -> bool:
        """Refuse changed settings; True for another world size (with the per-rank batch that
        goes with it), which a worker-independent state resumes elastically."""
        saved = state["config"]
        mine = self._fingerprint()
        differ = {
            k: (saved.get(k), v) for k, v in mine.items() if k != "num_rows" and saved.get(k) != v
        }
        elastic = "world_size" in differ
        fixed = {
            k: v
            for k, v in differ.items()
            if not (elastic and k in _ELASTIC_SETTINGS) and k != "rank"
        }
        if fixed:
            details = ", ".join(f"{k}: saved {a!r}, now {b!r}" for k, (a, b) in fixed.items())
            raise ConfigError(
                f"cannot resume: the loader settings changed ({details}); resume with the "
                "settings the state was saved with"
                + ("" if elastic else " (only a change of world_size resumes elastically)")
            )
        if not elastic:
            # Another rank's state at the same world size resumes this rank: the position is a
            # step of the schedule every rank shares (ranks yield the same number of batches),
            # so a trainer may save rank 0's state and load it on every rank.
            return False
        if state.get("num_workers") != 1:
            details = ", ".join(f"{k}: saved {a!r}, now {b!r}" for k, (a, b) in differ.items())
            raise ConfigError(
                f"cannot resume with another topology ({details}) from the state of one "
                f"DataLoader worker ({state.get('worker_id')} of {state.get('num_workers')}); "
                "save with ResumableDataLoader.state_dict(), whose position is global, and "
                "resume from that"
            )
        batch = "batch_max_length" if self.layout == "prefixlm_packed" else "batch_size"
        for key in ("world_size", batch):
            if not _is_int(saved.get(key)) or saved[key] < 1:
                raise ConfigError(
                    f"not a valid SampledDataset state: config.{key} is {saved.get(key)!r}, not "
                    "an integer >= 1; pass what state_dict() returned, unmodified"
                )
        return True

    def _rows_consumed(self, state: dict[str, Any], row_offset: int) -> int:
        """Epoch rows the saved schedule had consumed from ``row_offset`` on, before its next
        step (every rank saves the same global step, so every rank computes the same count)."""
        saved = state["config"]
        next_step = int(state["base_step"]) + int(state["yielded"])
        if self.layout == "prefixlm_packed":
            planner = self._planner_for(
                row_offset, int(saved["batch_max_length"]), int(saved["world_size"])
            )
            steps = planner.num_steps()
            if next_step > steps:
                raise ConfigError(
                    f"cannot resume: the state is at step {next_step} of an epoch the saved "
                    f"settings schedule in {steps} steps; it was not saved on this epoch"
                )
            return planner.rows_before(next_step)
        per_step = int(saved["batch_size"]) * int(saved["world_size"])
        consumed = next_step * per_step
        if row_offset + consumed > self.num_rows:
            raise ConfigError(
                f"cannot resume: the state is at step {next_step} ({consumed} rows) of an epoch "
                f"with {self.num_rows - row_offset} rows left; it was not saved on this epoch"
            )
        return consumed

    def _check_folder(self, state: dict[str, Any]) -> None:
        """Refuse a state saved on another sample (another seed, corpus, or sampler build)."""
        saved = state.get("folder")
        here = _where(self._folder_record(), self.epoch)
        if not isinstance(saved, dict):
            raise ConfigError(
                f"cannot resume: this state (version {state.get('version')}) was saved by an "
                f"older data_io that did not record which sampled folder it came from, so it "
                f"cannot be checked against {here}. If you are sure it was saved on this "
                "folder's sample, pass check_folder=False to load_state_dict; otherwise start "
                "the epoch from step 0"
            )
        if (saved.get("kind"), saved.get("digest")) == (self.identity.kind, self.identity.digest):
            return
        raise ConfigError(
            f"cannot resume: the state was saved on sampled folder "
            f"{_where(saved, state.get('epoch'))} and is being loaded into {here}; they hold "
            "different samples, so the saved position would pick other rows. Resume on the "
            "folder the state was saved on (or re-run the sampler there with the same inputs "
            "and config), or start this folder's epoch from step 0"
        )

    def global_state(self, next_step: int) -> dict[str, Any]:
        """A worker-independent state whose next batch is global step ``next_step``."""
        return self._state(int(next_step), 1, 0, 0)


class ResumableDataLoader(DataLoader):
    """A plain ``DataLoader`` over a ``SampledDataset`` that can save and resume its position.

    It counts the batches it hands out; since workers take steps round-robin and the DataLoader
    returns them in order, that count is the global step, whatever ``num_workers`` is, so a
    state saved with 3 workers resumes with 0 or 8. Keyword arguments go to ``DataLoader``
    (``num_workers``, ``pin_memory``, ``prefetch_factor``...); ``batch_size`` is fixed to None
    because the dataset already yields whole batches.
    """

    def __init__(self, dataset: SampledDataset, **kwargs: Any) -> None:
        if not isinstance(dataset, SampledDataset):
            raise ConfigError("ResumableDataLoader needs a SampledDataset")
        if kwargs.get("persistent_workers"):
            raise ConfigError(
                "persistent_workers=True would keep stale dataset copies across epochs and "
                "resumes; make one ResumableDataLoader per epoch instead"
            )
        if kwargs.pop("batch_size", None) is not None:
            raise ConfigError("batch_size must stay None: SampledDataset yields whole batches")
        super().__init__(dataset, batch_size=None, **kwargs)
        self._start = 0
        self._served = 0

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:  # type: ignore[override]
        dataset = self.dataset
        assert isinstance(dataset, SampledDataset)
        resume = dataset._resume
        self._start = 0 if resume is None else resume["base_step"] + resume["yielded"]
        if resume is not None and resume["num_workers"] != 1:
            raise ConfigError("ResumableDataLoader resumes from its own state_dict() only")
        self._served = 0
        batches = super().__iter__()
        if self.num_workers > 0:
            # The workers hold their own copies now; the position lives in _start from here on.
            dataset._resume = None
        for batch in batches:
            self._served += 1
            yield batch

    def state_dict(self) -> dict[str, Any]:
        dataset = self.dataset
        assert isinstance(dataset, SampledDataset)
        if dataset._resume is not None:
            return dict(dataset._resume)
        return dataset.global_state(self._start + self._served)

    def load_state_dict(self, state: dict[str, Any], *, check_folder: bool = True) -> None:
        """See ``SampledDataset.load_state_dict``."""
        dataset = self.dataset
        assert isinstance(dataset, SampledDataset)
        dataset.load_state_dict(state, check_folder=check_folder)


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _whole(value: object) -> object:
    """A whole-number float as its integer (``4096 / 2``, YAML's ``2048.0``); else ``value``."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    return value


def _check_position(state: dict[str, Any]) -> None:
    """The position fields of a state are integers in range (a damaged state is refused
    here, not with a TypeError, or a wrong batch, when the loader is next iterated)."""
    lows = {"epoch": 0, "base_step": 0, "yielded": 0, "num_workers": 1, "worker_id": 0}
    for key, low in lows.items():
        value = state[key]
        if not _is_int(value) or value < low:
            raise ConfigError(
                f"not a valid SampledDataset state: {key} is {value!r}, not an integer >= {low}; "
                "pass what state_dict() returned, unmodified"
            )
    if state["worker_id"] >= state["num_workers"]:
        raise ConfigError(
            f"not a valid SampledDataset state: worker_id {state['worker_id']} of "
            f"{state['num_workers']} workers; pass what state_dict() returned, unmodified"
        )


def _saved_row_offset(state: dict[str, Any], num_rows: int) -> int:
    """The first epoch row of the saved schedule (0 in states from before elastic resume)."""
    value = state.get("row_offset", 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= num_rows:
        raise ConfigError(
            f"not a valid SampledDataset state: row_offset is {value!r} for an epoch of "
            f"{num_rows} rows; pass what state_dict() returned, unmodified"
        )
    return value


def _where(folder: dict[str, Any], epoch: object) -> str:
    """A state's folder record as a message reads it: path, seed, epoch, identity."""
    if folder.get("kind") == "content":
        seed = "original-format folder, seed not recorded"
    else:
        seed = f"seed {folder.get('seed', 'not recorded')}"
    identity = f"{folder.get('kind')} {str(folder.get('digest'))[:12]}"
    return f"{folder.get('path', '?')} ({seed}, epoch {epoch}, {identity})"


def split_scalars(batch: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, int]]:
    """Split a packed batch into its tensors (for the GPU) and its host scalars (Python ints).

    ``(tensors, scalars)`` is the pair the HRM-Text trainer's loop unpacks; the original trainer
    calls ``input_ids`` ``inputs``, so rename that key when feeding it unchanged.
    """
    tensors = {k: v for k, v in batch.items() if k not in SCALAR_KEYS}
    scalars = {k: int(batch[k]) for k in SCALAR_KEYS if k in batch}
    return tensors, scalars


def format_batch(batch: dict[str, torch.Tensor], show: int = 16) -> str:
    """A short human-readable description of one batch (shapes, dtypes, first values)."""
    lines = []
    for key, value in batch.items():
        if value.ndim == 0:
            lines.append(f"  {key:<18} {int(value)}")
            continue
        head = value.reshape(-1)[:show].tolist() if value.ndim == 1 else value[0, :show].tolist()
        shape = "x".join(map(str, value.shape))
        lines.append(f"  {key:<18} {str(value.dtype).removeprefix('torch.'):<6} [{shape}] {head}…")
    return "\n".join(lines)
