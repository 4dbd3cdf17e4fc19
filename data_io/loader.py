"""Compatibility import: the HRM-Text trainer's ``from data_io.loader import SampledDataset``.

The load stage lives in ``data_io.load``; this module re-exports its public names.
"""

from data_io.load import (
    IGNORE_INDEX,
    SCALAR_KEYS,
    ResumableDataLoader,
    SampledDataset,
    format_batch,
    split_scalars,
)

__all__ = [
    "IGNORE_INDEX",
    "SCALAR_KEYS",
    "ResumableDataLoader",
    "SampledDataset",
    "format_batch",
    "split_scalars",
]
