"""The contracts between the load stage's layers, written as types instead of ``getattr`` probes.

A dataset the loader reads is a :class:`MapSource` (``len`` and ``[i]``, as torch's map-style
``Dataset``). It may also be:

* :class:`Fingerprinted`: ``fingerprint()``, a deterministic string that names the ordered contents
  of the data (two sources with equal fingerprints yield equal items); a resume state carries it,
  and a state saved on other data is refused. Foreign datasets are identified by their class and
  length (:func:`dataset_fingerprint`);
* :class:`Summarized`: ``summary()``, what ``loader-check`` and resume errors show of it;
* :class:`BatchSource`: ``get_batch(indices)``, a whole batch at once (else items are fetched one
  by one and collated);
* :class:`Mixed`: a mixture of named sources (``names``, ``datasets``), described per source;
* :class:`WindowRows`: a source of fixed-length token windows that fills rows of a batch allocated
  by someone else (``read_rows``), says which options the finished batch depends on
  (``batch_options``) and finishes it (``finish_batch``): a mixture of such sources that agree on
  their options builds one batch across them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "BatchSource",
    "Fingerprinted",
    "MapSource",
    "Mixed",
    "Summarized",
    "WindowRows",
    "dataset_fingerprint",
    "provides",
    "summary_of",
]


@runtime_checkable
class MapSource(Protocol):
    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> Any: ...


@runtime_checkable
class Fingerprinted(Protocol):
    def fingerprint(self) -> str: ...


@runtime_checkable
class Summarized(Protocol):
    def summary(self) -> Any: ...


@runtime_checkable
class BatchSource(Protocol):
    def get_batch(self, indices: Sequence[int] | np.ndarray) -> dict[str, Any]: ...


@runtime_checkable
class Mixed(Protocol):
    names: list[str]
    datasets: list[Any]


@runtime_checkable
class WindowRows(Protocol):
    def read_rows(
        self, indices: np.ndarray, inputs: np.ndarray, labels: np.ndarray, rows: np.ndarray
    ) -> None: ...

    def batch_options(self) -> tuple[Any, ...]: ...

    def finish_batch(self, inputs: Any, labels: Any) -> dict[str, Any]: ...


def provides(obj: object, protocol: type) -> bool:
    """``isinstance(obj, protocol)`` for a protocol of methods, answered once per class: the
    loader asks it for every batch, and ``isinstance`` against a ``Protocol`` walks its members
    each time (~4 µs)."""
    return _class_provides(type(obj), protocol)


@functools.cache
def _class_provides(cls: type, protocol: type) -> bool:
    members = [name for name in protocol.__dict__ if not name.startswith("_")]
    return all(callable(getattr(cls, name, None)) for name in members)


def dataset_fingerprint(dataset: MapSource) -> str:
    """The dataset's own ``fingerprint()``, or its class and length for foreign datasets."""
    if isinstance(dataset, Fingerprinted):
        return str(dataset.fingerprint())
    return f"{type(dataset).__qualname__}:{len(dataset)}"


def summary_of(dataset: MapSource) -> Any:
    """The dataset's own ``summary()``, or its sample count for foreign datasets."""
    if isinstance(dataset, Summarized):
        return dataset.summary()
    return {"samples": len(dataset)}
