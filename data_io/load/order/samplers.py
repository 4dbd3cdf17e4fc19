"""Samplers over map-style datasets: one global order, cut into steps, strided over ranks.

Every sampler here is a view of a *global order*: the sequence of dataset indices that the whole
job consumes, independent of the world size and of the DataLoader workers. A training step takes
the next ``G = batch_size * world_size`` indices of it and rank ``r`` gets ``step[r::world_size]``
(KempnerForge's stride over ranks). The order's state is a handful of integers (epoch, position,
step, mixture phase and counts), never a list of indices, and any state can be continued with any
``G``: that is what makes the loader's resume elastic.

* ``ShuffledOrder``: one dataset, a fresh seeded permutation each epoch (``IndexPermutation``,
  O(1) memory at any size); an epoch's last ``len % G`` positions are left out (``drop_last``),
  different ones each epoch when shuffled.
* ``MixtureOrder``: several datasets mixed by weight (``mixing.StrideSchedule``), with phases.
  Each source is read through its own permutation, a fresh one per pass over it, so a source is
  never repeated within a pass however its weight up- or down-samples it. A mixture "epoch" is
  ``sum(sizes)`` samples: a unit of length only, the sources' passes run on independently.

``DistributedSampler`` and ``MixtureSampler`` keep the usual ``torch.utils.data.Sampler``
interfaces (KempnerForge's signatures) on top of these orders; ``data_io.load.dataloader.stateful``
drives the orders directly.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from torch.utils.data import Sampler

from data_io.errors import ConfigError
from data_io.load.order.mixing import MixPhase, StrideSchedule, resolve_phases
from data_io.load.order.permutation import IndexPermutation

__all__ = ["DistributedSampler", "MixtureOrder", "MixtureSampler", "ShuffledOrder"]


def _require(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def resolve_rank(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """Rank and world size from the arguments, else torch.distributed, else 0 of 1."""
    if (rank is None) != (world_size is None):
        raise ConfigError("give both rank and world_size (num_replicas), or neither")
    if rank is None or world_size is None:
        import torch.distributed as dist  # noqa: PLC0415  heavy: torch, only the loaders need it

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
        return 0, 1
    world_size = _require("world_size", world_size, 1)
    rank = _require("rank", rank, 0)
    if rank >= world_size:
        raise ConfigError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
    return rank, world_size


class ShuffledOrder:
    """The global order over one dataset of ``size`` samples."""

    kind = "shuffled"

    def __init__(self, size: int, seed: int = 0, shuffle: bool = True) -> None:
        self.size = _require("dataset size", size, 1)
        self.seed = int(seed)
        self.shuffle = bool(shuffle)
        self._perm: tuple[int, IndexPermutation] | None = None

    @property
    def epoch_length(self) -> int:
        return self.size

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "size": self.size, "seed": self.seed, "shuffle": self.shuffle}

    def initial_state(self, epoch: int = 0) -> dict[str, Any]:
        return {"epoch": int(epoch), "position": 0, "step": 0}

    def check_state(self, state: Any) -> dict[str, Any]:
        return check_state(self, state)

    def indices(self, epoch: int, positions: np.ndarray) -> np.ndarray:
        if not self.shuffle:
            return positions.astype(np.int64)
        if self._perm is None or self._perm[0] != epoch:
            self._perm = (epoch, IndexPermutation(self.size, self.seed, epoch))
        return self._perm[1](positions)

    def indices_range(self, epoch: int, start: int, stop: int) -> np.ndarray:
        """The indices at the consecutive positions ``start .. stop - 1`` of ``epoch``."""
        if not self.shuffle:
            return np.arange(start, stop, dtype=np.int64)
        self.indices(epoch, np.zeros(0, dtype=np.int64))  # selects this epoch's permutation
        assert self._perm is not None
        return self._perm[1].range(start, stop)

    def step(self, state: Mapping[str, Any], size: int) -> tuple[np.ndarray, None, dict[str, Any]]:
        """The next ``size`` indices and the state after them (a new epoch if this one is short)."""
        epoch, position = int(state["epoch"]), int(state["position"])
        if position + size > self.size:
            epoch, position = epoch + 1, 0
        if size > self.size:
            raise ConfigError(
                f"a step takes {size} samples (batch_size x world_size) but the dataset has only "
                f"{self.size}; lower batch_size or add data"
            )
        indices = self.indices_range(epoch, position, position + size)
        after = {"epoch": epoch, "position": position + size, "step": int(state["step"]) + 1}
        return indices, None, after


class MixtureOrder:
    """The global order over a mixture of sources with weights and phases."""

    kind = "mixture"

    def __init__(
        self,
        sizes: Sequence[int],
        phases: Sequence[MixPhase],
        seed: int = 0,
        shuffle: bool = True,
        samples_per_step: int | None = None,
    ) -> None:
        self.sizes = [_require("mixture source size", s, 1) for s in sizes]
        self.offsets = np.concatenate(([0], np.cumsum(self.sizes)))[:-1].astype(np.int64)
        self.phases = list(phases)
        if not self.phases or self.phases[0].start_step != 0:
            raise ConfigError("a mixture needs its first phase at step 0")
        self.seed = int(seed)
        self.shuffle = bool(shuffle)
        self._schedules = [StrideSchedule(p.weights, self.seed, i) for i, p in enumerate(phases)]
        self._perms: dict[tuple[int, int], IndexPermutation] = {}

    @property
    def epoch_length(self) -> int:
        return int(sum(self.sizes))

    def identity(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "sizes": self.sizes,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "phases": [[p.start_step, list(p.weights), p.lr_scale] for p in self.phases],
        }

    def initial_state(self, epoch: int = 0) -> dict[str, Any]:
        return {
            "epoch": int(epoch),
            "position": 0,
            "step": 0,
            "phase": 0,
            "phase_samples": 0,
            "phase_counts": [0] * len(self.sizes),
        }

    def check_state(self, state: Any) -> dict[str, Any]:
        return check_state(self, state)

    def phase_at(self, step: int) -> int:
        starts = [p.start_step for p in self.phases]
        return int(np.searchsorted(starts, step, side="right")) - 1

    def consumed(self, state: Mapping[str, Any]) -> np.ndarray:
        """Samples drawn from each source before ``state`` (all phases)."""
        counts = np.asarray(state["phase_counts"], dtype=np.int64)
        return counts + self._schedules[int(state["phase"])].counts(int(state["phase_samples"]))

    def _local(self, source: int, draws: np.ndarray) -> np.ndarray:
        """Index within source ``source`` of its draws number ``draws`` (a fresh order per pass)."""
        size = self.sizes[source]
        if not self.shuffle:
            return draws % size
        # The draws of one step from one source are consecutive: a range in one pass or two.
        parts = []
        first, last = int(draws[0]), int(draws[-1]) + 1
        for p in range(first // size, (last - 1) // size + 1):
            key = (source, p)
            perm = self._perms.get(key)
            if perm is None:
                if len(self._perms) > 4 * len(self.sizes):
                    self._perms.clear()
                perm = self._perms[key] = IndexPermutation(size, self.seed, source, p)
            lo, hi = max(first, p * size), min(last, (p + 1) * size)
            parts.append(perm.range(lo - p * size, hi - p * size))
        return np.concatenate(parts)

    def step(
        self, state: Mapping[str, Any], size: int
    ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        step = int(state["step"])
        phase = int(state["phase"])
        h = int(state["phase_samples"])
        base = np.asarray(state["phase_counts"], dtype=np.int64)
        target = self.phase_at(step)
        if target != phase:  # a new phase starts at this step: bank the old phase's draws
            base = base + self._schedules[phase].counts(h)
            phase, h = target, 0
        schedule = self._schedules[phase]
        sources, drawn_before = schedule.order_from(h, h + size)
        before = base + drawn_before
        local = np.empty(size, dtype=np.int64)
        for s in np.unique(sources):
            where = sources == s
            draws = before[s] + np.arange(int(where.sum()), dtype=np.int64)
            local[where] = self._local(int(s), draws)
        indices = self.offsets[sources] + local
        if self.shuffle:
            # Spread the sources over the ranks: the stride order is regular (A B A B...), and
            # striding it over two ranks would give each rank a single source.
            mix = np.random.default_rng([self.seed & (2**63 - 1), step, 0x72616E6B]).permutation(
                size
            )
            indices, sources = indices[mix], sources[mix]
        epoch, position = int(state["epoch"]), int(state["position"])
        if position + size > self.epoch_length:
            epoch, position = epoch + 1, 0
        after = {
            "epoch": epoch,
            "position": position + size,
            "step": step + 1,
            "phase": phase,
            "phase_samples": h + size,
            "phase_counts": [int(c) for c in base],
        }
        return indices, sources, after


def differences(saved: Any, current: Any) -> str:
    """The keys whose values differ between two records, as a message reads them."""
    if isinstance(saved, Mapping) and isinstance(current, Mapping):
        keys = sorted(set(saved) | set(current))
        return "; ".join(
            f"{k} saved {saved.get(k)!r}, now {current.get(k)!r}"
            for k in keys
            if saved.get(k) != current.get(k)
        )
    return f"saved {saved!r}, now {current!r}"


def _state_int(state: Mapping[str, Any], key: str, low: int, high: int | None = None) -> int:
    value = state[key]
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ConfigError(f"loader state: {key} must be an integer {bound}, got {value!r}")
    return value


def check_state(order: ShuffledOrder | MixtureOrder, state: Any) -> dict[str, Any]:
    """``state`` checked key by key against what ``order`` can continue from."""
    expected = set(order.initial_state())
    if not isinstance(state, Mapping) or set(state) != expected:
        raise ConfigError(
            f"not a {order.kind} order state: expected keys {sorted(expected)}, got "
            f"{sorted(state) if isinstance(state, Mapping) else type(state).__name__}"
        )
    _state_int(state, "epoch", 0)
    _state_int(state, "step", 0)
    _state_int(state, "position", 0, order.epoch_length)
    if isinstance(order, MixtureOrder):
        _state_int(state, "phase", 0, len(order.phases) - 1)
        _state_int(state, "phase_samples", 0)
        counts = state["phase_counts"]
        if (
            not isinstance(counts, list)
            or len(counts) != len(order.sizes)
            or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts)
        ):
            raise ConfigError(
                f"loader state: phase_counts must be {len(order.sizes)} integers >= 0, got "
                f"{counts!r}"
            )
        # The phase is the one of the last step taken (the first before any): the steps
        # decide it, so a state whose phase the schedule does not give at its step was edited
        # or saved with other phases.
        step, phase = state["step"], state["phase"]
        expected = order.phase_at(step - 1) if step else 0
        if phase != max(expected, 0):
            raise ConfigError(
                f"loader state: phase {phase} at step {step}, where the phases give "
                f"{max(expected, 0)}; resume with a state this run's phases saved"
            )
    return dict(state)


class DistributedSampler(Sampler[int]):
    """This rank's indices of one epoch: seeded per epoch, strided over ranks.

    Like ``torch.utils.data.DistributedSampler`` but the shuffle needs no index array (a 1T-token
    folder starts at once) and the state (``state_dict``) carries the epoch and the global
    position reached, so a resume with another world size continues where the job was. The
    position counts the indices handed out, and a DataLoader asks for them ahead of what it
    yields (its prefetch): for exact resume use ``StatefulLoader`` (``build_dataloader``),
    which counts batches yielded. ``drop_last`` drops the epoch's tail that does not fill every
    rank; otherwise the tail wraps around to the epoch's first indices (as torch pads).
    """

    def __init__(
        self,
        dataset: Any,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = True,
    ) -> None:
        self.rank, self.num_replicas = resolve_rank(rank, num_replicas)
        self.order = ShuffledOrder(len(dataset), seed, shuffle)
        self.drop_last = bool(drop_last)
        self.epoch = 0
        self.position = 0  # global position within the epoch to start from (a resume)

    def _total(self) -> int:
        n, w = self.order.size, self.num_replicas
        return n - n % w if self.drop_last else math.ceil(n / w) * w

    def __len__(self) -> int:
        remaining = max(0, self._total() - self.position)
        return (remaining - self.rank + self.num_replicas - 1) // self.num_replicas

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` (a no-op for the epoch in progress, so a resume survives it)."""
        epoch = _require("epoch", epoch, 0)
        if epoch != self.epoch:
            self.epoch, self.position = epoch, 0

    def __iter__(self) -> Iterator[int]:
        if self.position >= self._total():  # iterated to the end: the epoch again, as torch
            self.position = 0
        start, world = self.position, self.num_replicas
        positions = np.arange(start + self.rank, self._total(), world)
        for chunk in np.array_split(positions, max(1, positions.shape[0] // 65536)):
            for position, index in zip(
                chunk.tolist(),
                self.order.indices(self.epoch, chunk % self.order.size).tolist(),
                strict=True,
            ):
                # Every rank has now handed out its sample of this round of world_size.
                self.position = position - self.rank + world
                yield index

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "position": self.position, "seed": self.order.seed}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if not isinstance(state, Mapping) or set(state) != {"epoch", "position", "seed"}:
            raise ConfigError("not a DistributedSampler state (keys epoch, position, seed)")
        if state["seed"] != self.order.seed:
            raise ConfigError(
                f"the state was saved with seed {state['seed']}, this sampler has "
                f"{self.order.seed}; resume with the same seed"
            )
        self.epoch = _require("epoch", state["epoch"], 0)
        self.position = _require("position", state["position"], 0)


class MixtureSampler(Sampler[int]):
    """This rank's indices into a ``MixtureDataset``, mixed by weight, one epoch per iteration.

    KempnerForge's signature plus keyword-only ``batch_size`` (per rank: phases switch on step
    boundaries of ``batch_size * num_replicas`` samples), ``phases``, ``anneal_start_step``,
    ``anneal_weights`` and ``names``. ``drop_last`` is always in effect: a step is whole or not
    drawn. ``current_phase``/``lr_scale`` tell the trainer where the schedule is.
    """

    def __init__(
        self,
        cumulative_sizes: Sequence[int],
        weights: Sequence[float],
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = True,
        temperature: float = 1.0,
        *,
        batch_size: int = 1,
        phases: Sequence[Mapping[str, Any]] = (),
        anneal_start_step: int = 0,
        anneal_weights: Mapping[str, float] | None = None,
        names: Sequence[str] | None = None,
    ) -> None:
        self.rank, self.num_replicas = resolve_rank(rank, num_replicas)
        cumulative = [int(c) for c in cumulative_sizes]
        sizes = np.diff([0, *cumulative]).tolist()
        if not sizes or min(sizes) < 1:
            raise ConfigError(f"every mixture source needs samples; cumulative sizes: {cumulative}")
        self.names = (
            list(names) if names is not None else [f"source_{i}" for i in range(len(sizes))]
        )
        resolved = resolve_phases(
            self.names, weights, temperature, phases, anneal_start_step, anneal_weights
        )
        self.order = MixtureOrder(sizes, resolved, seed, shuffle)
        self.batch_size = _require("batch_size", batch_size, 1)
        if self.samples_per_step > self.order.epoch_length:
            # Every step is whole (drop_last): no step fits, and iterating would yield nothing.
            raise ConfigError(
                f"one step takes {self.samples_per_step} samples (batch_size {self.batch_size} x "
                f"num_replicas {self.num_replicas}) but an epoch of the mixture has "
                f"{self.order.epoch_length}; lower batch_size or add data"
            )
        self.drop_last = drop_last
        self.state = self.order.initial_state()

    @property
    def samples_per_step(self) -> int:
        return self.batch_size * self.num_replicas

    def _rolled(self) -> dict[str, Any]:
        """The state to iterate from: the next epoch's start once this one is used up."""
        state = dict(self.state)
        if state["position"] + self.samples_per_step > self.order.epoch_length:
            state["epoch"], state["position"] = state["epoch"] + 1, 0
        return state

    def __len__(self) -> int:
        steps = (self.order.epoch_length - self._rolled()["position"]) // self.samples_per_step
        return steps * self.batch_size

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` if it is later than the current one (the mixture's sources run on:
        an epoch is a length, ``sum(sizes)`` samples); a no-op for the epoch in progress."""
        epoch = _require("epoch", epoch, 0)
        if epoch > self.state["epoch"]:
            self.state = dict(self.state, epoch=epoch, position=0)

    @property
    def current_phase(self) -> int:
        return self.order.phase_at(int(self.state["step"]))

    @property
    def lr_scale(self) -> float:
        return self.order.phases[self.current_phase].lr_scale

    def __iter__(self) -> Iterator[int]:
        self.state = self._rolled()
        for _ in range(len(self) // self.batch_size):
            indices, _, self.state = self.order.step(self.state, self.samples_per_step)
            yield from indices[self.rank :: self.num_replicas].tolist()

    def state_dict(self) -> dict[str, Any]:
        """The order's identity and its state after the steps handed out (a DataLoader asks
        ahead by its prefetch: for exact resume use ``StatefulLoader``)."""
        return {"order": self.order.identity(), "state": dict(self.state)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if not isinstance(state, Mapping) or set(state) != {"order", "state"}:
            raise ConfigError("not a MixtureSampler state (keys order, state)")
        if state["order"] != self.order.identity():
            raise ConfigError(
                "the state was saved for another mixture ("
                + differences(state["order"], self.order.identity())
                + "); resume with the sources, weights, phases and seed that saved it"
            )
        self.state = self.order.check_state(state["state"])
