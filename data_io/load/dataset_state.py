"""``state_dict()`` / ``load_state_dict()`` on the map-style datasets, as KempnerForge has them.

KempnerForge: "All of the map-style datasets and samplers implement state_dict() /
load_state_dict()". A map-style item is a pure function of its index, so what a dataset can
save is small: which data it is (class, sample count, fingerprint) and its epoch; where a run
is inside the epoch lives in the sampler (``DistributedSampler``/``MixtureSampler.state_dict``)
or, exactly, in the loader (``StatefulLoader.state_dict``).

So that a trainer that checkpoints ``dataset.state_dict()`` resumes exactly, a dataset that a
``StatefulLoader`` reads delegates to it: its state then carries the loader's under ``"loader"``,
and ``load_state_dict`` hands that back to the loader (or keeps it until a loader is built over
the dataset). The loader is remembered in a weak mapping outside the dataset, so that datasets
pickle to DataLoader workers as before and a dropped loader is not kept alive.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

from data_io.errors import ConfigError
from data_io.load.protocols import dataset_fingerprint

__all__ = ["MapDatasetState", "bind_loader"]

_VERSION = 1
_KEYS = {"version", "kind", "samples", "fingerprint", "epoch"}
# dataset -> weak reference to the StatefulLoader that reads it
_LOADERS: weakref.WeakKeyDictionary[Any, weakref.ref] = weakref.WeakKeyDictionary()
# dataset -> a loader state loaded before any loader was built over the dataset
_PENDING: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def bind_loader(dataset: Any, loader: Any) -> None:
    """Record that ``loader`` reads ``dataset`` (its last loader wins); a loader state that
    ``dataset.load_state_dict`` received earlier is applied to it now."""
    try:
        _LOADERS[dataset] = weakref.ref(loader)
    except TypeError:  # a foreign dataset that takes no weak reference: nothing to delegate
        return
    pending = _PENDING.pop(dataset, None)
    if pending is not None:
        loader.load_state_dict(pending)


class MapDatasetState:
    """Mixin of the map-style datasets: see the module docstring."""

    _state_epoch: int = 0

    def _loader(self) -> Any:
        ref = _LOADERS.get(self)
        return None if ref is None else ref()

    def set_epoch(self, epoch: int) -> None:
        """Record the epoch (a loader that reads this dataset keeps its own)."""
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ConfigError(f"epoch must be an integer >= 0, got {epoch!r}")
        self._state_epoch = epoch

    def state_dict(self) -> dict[str, Any]:
        """``kind``, ``samples``, ``fingerprint``, ``epoch``, and ``loader`` (the state of the
        ``StatefulLoader`` that reads this dataset, when there is one)."""
        loader = self._loader()
        state: dict[str, Any] = {
            "version": _VERSION,
            "kind": type(self).__name__,
            "samples": len(self),  # type: ignore[arg-type]
            "fingerprint": dataset_fingerprint(self),
            "epoch": int(loader.epoch) if loader is not None else int(self._state_epoch),
        }
        if loader is not None:
            state["loader"] = loader.state_dict()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Check that ``state`` was saved for this data, restore the epoch, and hand the loader's
        state (if it holds one) to the loader reading this dataset."""
        name = type(self).__name__
        if (
            not isinstance(state, Mapping)
            or state.get("version") != _VERSION
            or not set(state) >= _KEYS
            or set(state) - _KEYS - {"loader"}
        ):
            got = sorted(state) if isinstance(state, Mapping) else type(state).__name__
            raise ConfigError(
                f"not a {name} state (version {_VERSION}, keys {sorted(_KEYS)} and optionally "
                f"'loader'); got {got}: pass what {name}.state_dict() returned"
            )
        if state["kind"] != name:
            raise ConfigError(
                f"the state was saved by a {state['kind']}, and this dataset is a {name}; load it "
                "into the dataset that saved it"
            )
        if state["samples"] != len(self):  # type: ignore[arg-type]
            raise ConfigError(
                f"the state was saved for {state['samples']} samples, and this {name} has "
                f"{len(self)}; resume with the data and seq_len of the run that saved it"  # type: ignore[arg-type]
            )
        if state["fingerprint"] != dataset_fingerprint(self):
            raise ConfigError(
                f"the state was saved for other data (fingerprint {state['fingerprint']}, this "
                f"{name} {dataset_fingerprint(self)}): the files' contents, dtypes or options "
                "differ; resume with the data of the run that saved it"
            )
        self.set_epoch(state["epoch"])
        inner = state.get("loader")
        if inner is None:
            return
        loader = self._loader()
        if loader is not None:
            loader.load_state_dict(inner)
        else:
            _PENDING[self] = dict(inner)
