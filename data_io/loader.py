"""Compatibility import: the HRM-Text trainer's ``from data_io.loader import SampledDataset``.

The load stage lives in ``data_io.load``; this module re-exports the sampled-folder loader's
public names.
"""

from data_io.load.datasets import sampled as _sampled
from data_io.load.datasets.sampled import *  # noqa: F403

__all__ = _sampled.__all__
