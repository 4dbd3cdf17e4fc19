"""Stage 4, stratified sampling: tokenized corpus -> per-epoch index arrays and a token pool.

Public API: :func:`parse_overrides` (``key=value`` strings -> :class:`SampleConfig`),
:func:`sample` (run it) and :func:`main` (the command line of ``sample_tokenized.py``). Layout and
algorithm: formats.md §4. Modules:

* ``config``: ``SampleConfig`` and its ``key=value`` parsing; ``tasks``: the task folders read;
* ``algorithm``: the per-task, per-epoch choice of rows; ``rng``: its seeded streams;
* ``pool``: the token pool; ``epoch_writer``: one epoch's index arrays;
* ``output``: the staged, atomically published output folder; ``report``: the Markdown report;
* ``pipeline``: ``sample`` end to end; ``synthetic``: a tokenized corpus for tests and benchmarks;
* ``cli``: ``data_io sample`` and ``sample_tokenized.py``.
"""

from __future__ import annotations

from data_io.sampling.cli import main, register
from data_io.sampling.config import SampleConfig, parse_overrides
from data_io.sampling.pipeline import SampleResult, sample

__all__ = ["SampleConfig", "SampleResult", "main", "parse_overrides", "register", "sample"]
