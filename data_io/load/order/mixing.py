"""Which source each sample of a mixture comes from: weights, temperature, phases.

The mixture is one global stream of samples. Within a phase, source ``s`` (weight ``w_s``, the
weights summing to 1) is "due" for its ``k``-th sample at time ``(k + u_s) / w_s``, with ``u_s``
a seeded offset in [0, 1); the stream takes sources in order of due time (ties: lower source
first). This is stride scheduling with random phases: after ``h`` samples of a phase every
source has had ``w_s * h`` samples within about one, over *any* window of the stream, not only in
the long run (a multinomial draw, as the seeds use, drifts by ``sqrt(h)``). The count of each
source after ``h`` samples has a closed form (``counts``), so a resume at any position needs no
history: the loader's state is the position, the phase and the counts at the phase's start.

Phases switch at training steps (``TrainingPhase.start_step``); the loader converts steps to
sample positions with its global batch size, so a phase always starts on a step boundary, even
after an elastic resume that changed the world size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from data_io.errors import ConfigError

__all__ = ["MixPhase", "StrideSchedule", "resolve_phases", "temper"]


def temper(
    weights: Sequence[float],
    temperature: float,
    where: str = "weights",
    names: Sequence[str] | None = None,
) -> np.ndarray:
    """Normalised ``w ** (1 / T)`` (T > 1 flattens the mixture towards uniform).

    Computed as ``exp((log w - max log w) / T)``, which cannot overflow for any T > 0 (a tiny T
    would make ``w ** (1 / T)`` infinite, and the weights NaN). A source whose positive weight
    tempers to nothing (its share underflows next to the largest) would silently never be
    sampled: that is an error naming ``data.mix_temperature``.
    """
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not math.isfinite(temperature)
    ):
        raise ConfigError(f"data.mix_temperature must be a finite number > 0, got {temperature!r}")
    if temperature <= 0:
        raise ConfigError(f"data.mix_temperature must be > 0, got {temperature}")
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ConfigError(f"{where} must be finite and >= 0, got {list(weights)}")
    if not np.any(w > 0):
        raise ConfigError(f"{where} are all zero: at least one source needs a weight > 0")
    positive = w > 0
    logs = np.full(w.shape, -np.inf)
    logs[positive] = np.log(w[positive])
    with np.errstate(under="ignore"):
        scaled = np.exp((logs - logs.max()) / temperature)
    shares = scaled / scaled.sum()
    starved = np.flatnonzero(positive & (shares < _MIN_SHARE))
    if starved.size:
        label = [names[i] if names is not None else f"source {i}" for i in starved.tolist()]
        raise ConfigError(
            f"data.mix_temperature={temperature} tempers the {where} of {', '.join(label)} "
            f"from {w[starved[0]]:g} to a share of {shares[starved[0]]:.3g}, so it would never "
            "be sampled; raise data.mix_temperature (1 keeps the weights as given) or remove "
            "the source"
        )
    return shares


# A positive weight tempered below this share of the mixture is never drawn in practice (one
# sample in a million billion): refused rather than silently starved.
_MIN_SHARE = 1e-15


@dataclass(frozen=True)
class MixPhase:
    """Normalised weights from ``start_step`` on, and the trainer's learning-rate multiplier."""

    start_step: int
    weights: tuple[float, ...]
    lr_scale: float = 1.0


def resolve_phases(
    names: Sequence[str],
    base_weights: Sequence[float],
    temperature: float = 1.0,
    phases: Sequence[Mapping[str, object]] = (),
    anneal_start_step: int = 0,
    anneal_weights: Mapping[str, float] | None = None,
) -> list[MixPhase]:
    """Validated phases, the first starting at step 0 (KempnerForge's rules).

    ``base_weights``: one per source, each > 0. ``phases``: dicts with ``start_step``,
    ``dataset_weights`` (name → weight ≥ 0; a source not named keeps its base weight, as in
    KempnerForge's train.py) and optional
    ``lr_scale``; start steps strictly increasing. ``anneal_start_step``/``anneal_weights`` is the
    two-phase shortcut and excludes ``phases``.
    """
    names = list(names)
    if len(set(names)) != len(names):
        raise ConfigError(f"source names must be unique, got {names}")
    base = np.asarray(base_weights, dtype=np.float64)
    if base.shape != (len(names),):
        raise ConfigError(f"need one weight per source ({len(names)}), got {list(base_weights)}")
    bad = [n for n, w in zip(names, base, strict=True) if not (math.isfinite(w) and w > 0)]
    if bad:
        raise ConfigError(f"datasets[].weight must be > 0; not so for {', '.join(bad)}")
    anneal = dict(anneal_weights or {})
    if anneal_start_step or anneal:
        if phases:
            raise ConfigError("phases and anneal_start_step/anneal_weights are exclusive: use one")
        if not anneal_start_step or not anneal:
            raise ConfigError("anneal_start_step > 0 and anneal_weights go together; set both")
        phases = [{"start_step": anneal_start_step, "dataset_weights": anneal}]
    first = temper(base, temperature, "datasets[].weight", names)
    result = [MixPhase(0, tuple(float(x) for x in first))]
    last = 0
    for i, phase in enumerate(phases):
        where = f"data.phases[{i}]"
        unknown = set(phase) - {"start_step", "dataset_weights", "lr_scale"}
        if unknown:
            raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
        start = phase.get("start_step")
        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise ConfigError(f"{where}.start_step must be an integer >= 0, got {start!r}")
        if start <= last and not (i == 0 and start == 0):
            raise ConfigError(
                f"{where}.start_step={start}: start steps must be strictly increasing "
                f"(previous: {last})"
            )
        weights = phase.get("dataset_weights") or {}
        if not isinstance(weights, Mapping):
            raise ConfigError(f"{where}.dataset_weights must map source names to weights")
        unknown_names = sorted(set(weights) - set(names))
        if unknown_names:
            raise ConfigError(
                f"{where}.dataset_weights names unknown sources {unknown_names}; sources: {names}"
            )
        # KempnerForge's phases: "a phase need not name every dataset; the rest keep their
        # original weight" (phase.dataset_weights.get(name, original_weights[name])).
        vector = [float(weights.get(n, b)) for n, b in zip(names, base, strict=True)]  # type: ignore[arg-type]
        lr_scale = phase.get("lr_scale", 1.0)
        if not isinstance(lr_scale, (int, float)) or not 0 < lr_scale < math.inf:
            raise ConfigError(f"{where}.lr_scale must be a finite number > 0, got {lr_scale!r}")
        tempered = tuple(
            float(x) for x in temper(vector, temperature, f"{where}.dataset_weights", names)
        )
        entry = MixPhase(start, tempered, float(lr_scale))
        if start == 0:
            result[0] = entry
        else:
            result.append(entry)
        last = start
    return result


class StrideSchedule:
    """The source order of one phase: closed-form counts and the order of any range."""

    def __init__(self, weights: Sequence[float], seed: int, phase: int) -> None:
        self.weights = np.asarray(weights, dtype=np.float64)
        self.active = np.flatnonzero(self.weights > 0)
        rng = np.random.default_rng([int(seed) & (2**63 - 1), int(phase), 0x6D6978])
        self.offsets = rng.random(self.weights.shape[0])

    def _due(self, source: int, k: int | np.ndarray) -> float | np.ndarray:
        return (k + self.offsets[source]) / self.weights[source]

    def counts(self, h: int) -> np.ndarray:
        """Samples of each source among the phase's first ``h`` (int64, summing to ``h``)."""
        n = np.zeros(self.weights.shape[0], dtype=np.int64)
        if h <= 0:
            return n
        w, u = self.weights[self.active], self.offsets[self.active]
        n[self.active] = np.maximum(0, np.floor(h * w - u).astype(np.int64) + 1)
        # The float floor above is within a few samples of the exact prefix; fix it up by
        # comparing due times, so that the result is exactly the first h of the stream's order.
        while True:
            last = [(self._due(s, n[s] - 1), s) for s in self.active if n[s] > 0]
            after = [(self._due(s, n[s]), s) for s in self.active]
            total = int(n.sum())
            if total > h:
                n[max(last)[1]] -= 1
            elif total < h:
                n[min(after)[1]] += 1
            elif last and max(last) > min(after):
                n[max(last)[1]] -= 1
                n[min(after)[1]] += 1
            else:
                return n

    def order(self, h0: int, h1: int) -> np.ndarray:
        """Source of each sample at phase positions ``h0 .. h1 - 1``, in stream order."""
        return self.order_from(h0, h1)[0]

    def order_from(self, h0: int, h1: int) -> tuple[np.ndarray, np.ndarray]:
        """``order(h0, h1)`` and ``counts(h0)``, computed together."""
        start, end = self.counts(h0), self.counts(h1)
        times, sources = [], []
        for s in self.active:
            k = np.arange(start[s], end[s])
            times.append(self._due(s, k))
            sources.append(np.full(k.shape[0], s, dtype=np.int64))
        if not times:
            return np.zeros(0, dtype=np.int64), start
        t, src = np.concatenate(times), np.concatenate(sources)
        return src[np.lexsort((src, t))], start
