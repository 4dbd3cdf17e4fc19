"""The Python fuzz targets (``fuzz/python/targets.py``) in CI: their seeds, every regression
input a fuzz run found, and a short random run each. Bad bytes must raise data_io's own errors
(a message saying what, where and how), never a bare KeyError/TypeError from deep inside.
The long, coverage-guided runs are ``make fuzz`` (docs/fuzzing.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz.python.targets import TARGETS, run_one

FUZZ = Path(__file__).resolve().parent.parent / "fuzz"


def recorded_inputs(name: str) -> list[Path]:
    folders = [FUZZ / "seeds" / "python" / name, FUZZ / "regressions" / "python" / name]
    return sorted(p for folder in folders if folder.is_dir() for p in folder.iterdir())


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_seeds_and_regressions(name: str) -> None:
    inputs = recorded_inputs(name)
    assert inputs, f"no seed for {name}"
    for path in inputs:
        run_one(TARGETS[name], path.read_bytes())


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_random_inputs(name: str) -> None:
    seeds = [p.read_bytes() for p in recorded_inputs(name)]

    # Random bytes, and seeds with random bytes spliced in (closer to what parsers accept).
    @st.composite
    def mutated(draw: st.DrawFn) -> bytes:
        seed = draw(st.sampled_from(seeds))
        at = draw(st.integers(0, len(seed)))
        cut = draw(st.integers(0, 16))
        return seed[:at] + draw(st.binary(max_size=16)) + seed[at + cut :]

    @settings(max_examples=120, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(st.binary(max_size=512) | mutated())
    def check(data: bytes) -> None:
        run_one(TARGETS[name], data)

    check()
