"""``StatefulLoader``: a torch ``DataLoader`` that knows where it is and resumes anywhere.

For a map-style dataset the loader drives a global order (``samplers.ShuffledOrder`` or
``MixtureOrder``): each step takes the next ``batch_size * world_size`` indices of it and this
rank keeps every ``world_size``-th. The indices are made in the main process, so DataLoader
workers only fetch items and their number never changes what a batch holds. The loader counts
the batches it has handed out and keeps the order's state after the last one: ``state_dict()``
is that state (a few integers, the same on every rank), the dataset's fingerprint and the
order's identity. ``load_state_dict`` continues from it:

* with the same topology, exactly the batches an uninterrupted run would have yielded next;
* with another world size, batch size or number of workers, the global order from the same
  position: the job as a whole sees no sample twice and skips none. Which rank gets which sample
  changes, and so does the epoch's dropped tail (``len % (batch_size * world_size)``). For a
  mixture the same holds per source: each source continues from its own count, and the mixture
  continues from the same point of its schedule, phases switching at their step.

For an iterable (streaming) dataset the loader records what each batch says about its stream
(``stream_id``/``stream_row``/``stream_offset``, see ``hf_text``) and hands it back to the
dataset on resume; each rank saves its own state.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Generator, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset

from data_io.errors import ConfigError, InputError
from data_io.load.dataloader.collate import BatchedView, collate_samples, first
from data_io.load.dataset_state import MapDatasetState, bind_loader
from data_io.load.order.samplers import MixtureOrder, ShuffledOrder, differences, resolve_rank
from data_io.load.protocols import Mixed, Summarized, dataset_fingerprint
from data_io.load.stream_state import STREAM_KEYS

__all__ = ["StatefulLoader"]

_STATE_VERSION = 1


class _StepBatches:
    """The batch sampler: this rank's indices of each step, the order's state queued beside."""

    def __init__(self, loader: StatefulLoader, state: Mapping[str, Any], steps: int) -> None:
        self._loader = loader
        self._state = dict(state)
        self._steps = steps

    def __len__(self) -> int:
        return self._steps

    def __iter__(self) -> Iterator[list[int]]:
        loader = self._loader
        state = self._state
        for _ in range(self._steps):
            indices, _, state = loader.order.step(state, loader.samples_per_step)
            loader._pending.append(state)
            yield indices[loader.rank :: loader.world_size].tolist()


class StatefulLoader:
    """Batches of this rank, epoch by epoch, with ``state_dict``/``load_state_dict``.

    ``order`` is the global order of a map-style ``dataset`` (None for an iterable dataset).
    ``names`` name the sources of a mixture (for ``tokens_per_source``). Other keywords go to
    ``torch.utils.data.DataLoader``.
    """

    def __init__(
        self,
        dataset: Any,
        order: ShuffledOrder | MixtureOrder | None,
        *,
        batch_size: int,
        rank: int | None = None,
        world_size: int | None = None,
        num_workers: int = 0,
        pin_memory: bool = False,
        prefetch_factor: int | None = 2,
        names: Sequence[str] | None = None,
        identity: Mapping[str, Any] | None = None,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ConfigError(f"num_workers must be an integer >= 0, got {num_workers!r}")
        self.dataset = dataset
        self.order = order
        self.streaming = isinstance(dataset, IterableDataset)
        if self.streaming != (order is None):
            raise ConfigError("an order goes with a map-style dataset, none with an iterable one")
        self.batch_size = batch_size
        self.rank, self.world_size = resolve_rank(rank, world_size)
        if self.streaming:
            # A stream is this rank's share of the rows: the dataset and the loader must agree
            # on which rank this is (the first batch failed with a message about resume states).
            built = (getattr(dataset, "rank", self.rank), getattr(dataset, "world_size", None))
            if built[1] is not None and built != (self.rank, self.world_size):
                raise ConfigError(
                    f"the streaming dataset was built for rank {built[0]} of {built[1]} and the "
                    f"loader is rank {self.rank} of {self.world_size}: pass the same rank and "
                    "world_size to both (or neither, to take torch.distributed's)"
                )
        self.num_workers = num_workers
        # Pinned memory is for copies to a GPU; without one torch only warns about it.
        self.pin_memory = bool(pin_memory) and torch.cuda.is_available()
        self.prefetch_factor = prefetch_factor if num_workers > 0 else None
        self.names = list(names) if names is not None else None
        self.identity = dict(identity or {})
        self.state: dict[str, Any] = (
            order.initial_state() if order is not None else self._fresh_stream_state()
        )
        self.tokens_per_source = np.zeros(len(self.names or [None]), dtype=np.int64)
        self._pending: deque[dict[str, Any]] = deque()
        self._batch_step: int | None = None  # step of the batch last handed out
        if isinstance(dataset, MapDatasetState):
            # dataset.state_dict()/load_state_dict() (KempnerForge's interface) delegate here.
            bind_loader(dataset, self)

    @functools.cached_property
    def fingerprint(self) -> str:
        """The dataset's identity for states, made when a state is first saved or loaded (it
        reads a sample of the data: the first batch does not wait for it)."""
        return dataset_fingerprint(self.dataset)

    @functools.cached_property
    def data_description(self) -> Any:
        """``describe_data`` of the dataset, made once: the data does not change under a
        loader, and a summary walks every shard."""
        return describe_data(self.dataset)

    @property
    def samples_per_step(self) -> int:
        """Samples of one step over all ranks (the global batch)."""
        return self.batch_size * self.world_size

    def _epoch_start(self) -> dict[str, Any]:
        """The state to start an epoch from: the current one, or the next epoch's start."""
        assert self.order is not None
        if self.samples_per_step > self.order.epoch_length:
            raise ConfigError(
                f"one step takes {self.samples_per_step} samples (batch_size {self.batch_size} x "
                f"world_size {self.world_size}) but an epoch has {self.order.epoch_length}; "
                "lower batch_size or add data"
            )
        state = dict(self.state)
        if state["position"] + self.samples_per_step > self.order.epoch_length:
            state["epoch"] += 1
            state["position"] = 0
        return state

    def __len__(self) -> int:
        """Batches left in the current epoch (streaming: unknown, raises TypeError)."""
        if self.order is None:
            raise TypeError("a streaming loader has no length")
        start = self._epoch_start()
        return (self.order.epoch_length - start["position"]) // self.samples_per_step

    @property
    def epoch(self) -> int:
        return int(self.state.get("epoch", 0))

    @property
    def phase(self) -> int:
        """The mixture phase of the batch being trained on (0 without phases).

        Inside ``for batch in loader`` that is the batch just handed out (the loader's state
        has already moved past it, so that ``state_dict()`` resumes after it); before the first
        batch, or after ``load_state_dict``, it is the next step's phase.
        """
        if isinstance(self.order, MixtureOrder):
            step = int(self.state["step"]) if self._batch_step is None else self._batch_step
            return self.order.phase_at(step)
        return 0

    @property
    def next_phase(self) -> int:
        """The mixture phase of the next step the loader will hand out."""
        if isinstance(self.order, MixtureOrder):
            return self.order.phase_at(int(self.state["step"]))
        return 0

    @property
    def lr_scale(self) -> float:
        """The learning-rate multiplier of the batch being trained on (see ``phase``): read it
        inside ``for batch in loader`` and apply it to that batch's optimizer step."""
        if isinstance(self.order, MixtureOrder):
            return self.order.phases[self.phase].lr_scale
        return 1.0

    def _torch_loader(self, **kwargs: Any) -> DataLoader:
        # A map-style dataset builds each batch whole (batching.BatchedView); a stream yields
        # samples that are collated here.
        batched = not self.streaming
        return DataLoader(
            BatchedView(self.dataset) if batched else self.dataset,
            num_workers=self.num_workers,
            pin_memory=self.pin_memory,
            prefetch_factor=self.prefetch_factor,
            collate_fn=first if batched else collate_samples,
            **kwargs,
        )

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        """One epoch from where the loader is (the rest of it after a resume)."""
        if self.order is None:
            yield from self._iter_stream()
            return
        start = self._epoch_start()
        steps = (self.order.epoch_length - start["position"]) // self.samples_per_step
        self._pending.clear()
        loader = self._torch_loader(batch_sampler=_StepBatches(self, start, steps))
        for batch in loader:
            self.state = self._pending.popleft()
            self._batch_step = int(self.state["step"]) - 1
            self._count(batch)
            yield batch

    def _iter_stream(self) -> Iterator[dict[str, torch.Tensor]]:
        # Mid-epoch (after a resume, or a loop left early) the rest of the epoch; when that rest
        # holds no batch (a state saved after the epoch's last batch), the next epoch, as a
        # map-style loader does.
        mid_epoch = bool(self.state.get("streams"))
        yielded = yield from self._stream_epoch()
        if not yielded and mid_epoch:
            yielded = yield from self._stream_epoch()
        if not yielded:
            # Without this, the rank's loop ended at once, epoch after epoch, while the other
            # ranks trained (or waited for it in their first collective).
            workers = max(1, self.num_workers)
            raise InputError(
                f"rank {self.rank} of {self.world_size}: its {workers} stream(s) (of "
                f"{self._num_streams()} = world_size x num_workers, each reading its own share "
                f"of the rows) held no full batch of {self.batch_size} in a whole epoch: the "
                "data is too small to split over that many streams; lower num_workers, "
                "batch_size or the sequence length, use fewer ranks, or add data"
            )

    def _stream_epoch(self) -> Generator[dict[str, torch.Tensor], None, int]:
        """The batches of the epoch from where the streams stand; returns how many."""
        self._hand_streams()
        loader = self._torch_loader(batch_size=self.batch_size, drop_last=True)
        streams = {str(k): v for k, v in self.state.get("streams", {}).items()}
        served = int(self.state.get("served", 0))
        yielded = 0
        for batch in loader:
            ids, rows, offsets = (batch.pop(k) for k in STREAM_KEYS)
            # A batch comes from one worker, i.e. one stream: its last sample is the resume point.
            streams[str(int(ids[-1]))] = [int(rows[-1]), int(offsets[-1])]
            served += 1
            self.state = {
                "streams": dict(streams),
                "num_streams": self._num_streams(),
                "rank": self.rank,
                "world_size": self.world_size,
                "num_workers": self.num_workers,
                "served": served,
            }
            self._count(batch)
            yielded += 1
            yield batch
        # The epoch is over: the next one reads every stream from its beginning (before, it
        # started again where a resume had started, and a state saved in it kept the last
        # epoch's streams and count).
        self.state = self._fresh_stream_state()
        return yielded

    def _num_streams(self) -> int:
        return self.world_size * max(1, self.num_workers)

    def _fresh_stream_state(self) -> dict[str, Any]:
        """A streaming state before any batch: no stream has read anything (a checkpoint at
        step 0 is such a state, and loads and merges like any other)."""
        return {
            "streams": {},
            "num_streams": self._num_streams(),
            "rank": self.rank,
            "world_size": self.world_size,
            "num_workers": self.num_workers,
            "served": 0,
        }

    def _count(self, batch: Mapping[str, torch.Tensor]) -> None:
        tokens = batch["input_ids"].shape[-1]
        source = batch.get("dataset_idx")
        if source is None:
            self.tokens_per_source[0] += tokens * batch["input_ids"].shape[0]
        else:
            counts = torch.bincount(source, minlength=len(self.tokens_per_source)).numpy()
            self.tokens_per_source += counts * tokens

    def token_counts(self) -> dict[str, int]:
        """Input tokens this rank has handed out, per source (since construction or resume)."""
        names = self.names or ["all"]
        return {n: int(c) for n, c in zip(names, self.tokens_per_source, strict=True)}

    def state_dict(self) -> dict[str, Any]:
        return {
            "version": _STATE_VERSION,
            "fingerprint": self.fingerprint,
            "data": self.data_description,
            "identity": self.identity,
            "order": self.order.identity() if self.order is not None else None,
            "state": dict(self.state),
            "batch_size": self.batch_size,
            "world_size": self.world_size,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state`` (see the module docstring for what is guaranteed)."""
        if not isinstance(state, Mapping) or state.get("version") != _STATE_VERSION:
            raise ConfigError(
                "not a data_io loader state (StatefulLoader.state_dict(), version "
                f"{_STATE_VERSION}); got {type(state).__name__} "
                f"version {state.get('version') if isinstance(state, Mapping) else None}"
            )
        missing = [k for k in ("fingerprint", "identity", "order", "state") if k not in state]
        if missing:
            raise ConfigError(
                f"not a complete data_io loader state (missing {', '.join(missing)}); pass what "
                "StatefulLoader.state_dict() returned, unmodified"
            )
        if state.get("fingerprint") != self.fingerprint:
            what = _data_differences(state.get("data"), self.data_description)
            raise ConfigError(
                f"the state was saved for other data ({what}); resume with the data and options "
                "of the run that saved it"
            )
        for key, mine in (("identity", self.identity), ("order", self._order_identity())):
            theirs = state.get(key)
            if theirs != mine:
                diff = differences(theirs, mine)
                raise ConfigError(
                    f"the state was saved with another configuration ({key}: {diff}); resume "
                    "with the configuration of the run that saved it"
                )
        inner = state.get("state")
        if self.order is None:
            self._load_stream_state(inner)
            return
        self.state = self.order.check_state(inner)
        self._pending.clear()
        self._batch_step = None

    def _load_stream_state(self, inner: Any) -> None:
        """A streaming state: this rank's own (same topology), or all ranks' merged."""
        if isinstance(inner, Mapping) and not inner:
            # Saved before the first batch by a version that kept no streams then: the start,
            # in any topology.
            inner = self._fresh_stream_state()
        if not isinstance(inner, Mapping) or "streams" not in inner:
            raise ConfigError("not a streaming loader state (no streams)")
        topology = {"world_size": self.world_size, "num_workers": self.num_workers}
        saved = {k: inner.get(k) for k in topology}
        merged = bool(inner.get("merged"))
        if not merged and (saved != topology or inner.get("rank") != self.rank):
            raise ConfigError(
                f"this streaming state is rank {inner.get('rank')}'s of {saved}, and this loader "
                f"is rank {self.rank} of {topology}: with another topology, merge every rank's "
                "state first (StatefulLoader.merge_states([...])) and load the merged state"
            )
        served = int(inner.get("served", 0)) if not merged else 0
        self.state = {**dict(inner), "rank": self.rank, **topology, "served": served}
        self._hand_streams()  # checks the streams against the dataset now
        if merged:
            # Each of this rank's streams starts where the merged state puts it, recorded as
            # this topology's own entry: a state saved later holds no stream of the old one
            # (its rows numbered for the old streams were refused as "damaged").
            workers = max(1, self.num_workers)
            total = self._num_streams()
            mine = range(self.rank * workers, (self.rank + 1) * workers)
            starts = {str(g): list(self.dataset.stream_start(g, total)) for g in mine}
            self.state = {**self._fresh_stream_state(), "streams": starts}
            self._hand_streams()

    def _hand_streams(self) -> None:
        """Give the dataset where each stream stands (it goes to the workers with it)."""
        served = int(self.state.get("served", 0))
        # The DataLoader restarts its round-robin at worker 0, while an uninterrupted run's next
        # batch came from worker served % workers: the workers' streams are rotated to match.
        shift = served % self.num_workers if self.num_workers else 0
        self.dataset.load_state_dict(
            {
                "num_streams": self.state.get("num_streams"),
                "streams": self.state.get("streams", {}),
                "worker_shift": shift,
                "complete": bool(self.state.get("merged")),
            }
        )

    @staticmethod
    def merge_states(states: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """One streaming state from every rank's, for a resume with another topology."""
        if not states:
            raise ConfigError("merge_states needs the state of every rank")
        first = dict(states[0])
        inner = [s.get("state") or {} for s in states]
        world = inner[0].get("world_size")
        ranks = sorted(int(i.get("rank", -1)) for i in inner)
        if ranks != list(range(int(world or 0))):
            raise ConfigError(
                f"merge_states needs one state per rank 0..{(world or 1) - 1}, got ranks {ranks}"
            )
        streams: dict[str, Any] = {}
        for i in inner:
            streams.update({str(k): v for k, v in i.get("streams", {}).items()})
        first["state"] = {
            "streams": streams,
            "num_streams": inner[0].get("num_streams"),
            "merged": True,
        }
        return first

    def _order_identity(self) -> dict[str, Any] | None:
        return self.order.identity() if self.order is not None else None


def describe_data(dataset: Any) -> Any:
    """What a state records of its data beside the fingerprint, to say what differs: the
    scalar fields of ``summary()`` (per source for a mixture)."""
    if isinstance(dataset, Mixed):
        return {n: describe_data(d) for n, d in zip(dataset.names, dataset.datasets, strict=True)}
    if not isinstance(dataset, Summarized):
        return {"samples": len(dataset)}
    return {k: v for k, v in dataset.summary().items() if isinstance(v, (int, float, str, bool))}


def _data_differences(saved: Any, current: Any) -> str:
    if not isinstance(saved, Mapping) or not isinstance(current, Mapping):
        return "the data's fingerprint differs"
    parts = []
    for key in sorted(set(saved) | set(current)):
        a, b = saved.get(key), current.get(key)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            if a != b:
                parts.append(f"source {key}: {differences(a, b)}")
        elif a != b:
            parts.append(f"{key} saved {a!r}, now {b!r}")
    return "; ".join(parts) or "the files' names, dtypes or lengths differ"
