"""One check of a thread count for every stage: at least 1, at most a few a core."""

from __future__ import annotations

import pytest

from data_io.errors import ConfigError
from data_io.util import threads as threads_module
from data_io.util.threads import MOST_THREADS_FLOOR, checked_threads, most_threads


def test_counts_in_range_and_none_pass() -> None:
    assert checked_threads(None) is None
    assert checked_threads(1) == 1
    assert checked_threads(most_threads()) == most_threads()


@pytest.mark.parametrize("bad", [0, -3, 2.0, True, "4"])
def test_a_count_that_is_not_a_positive_integer_is_refused(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"threads must be an integer >= 1, got"):
        checked_threads(bad)


def test_far_more_threads_than_cores_is_refused_with_the_most(monkeypatch) -> None:
    monkeypatch.setattr(threads_module, "cores", lambda: 2)
    assert most_threads() == MOST_THREADS_FLOOR  # a small machine still takes the floor
    monkeypatch.setattr(threads_module, "cores", lambda: 100)
    assert most_threads() == 400
    with pytest.raises(ConfigError, match=r"threads=100000 is more than .* at most 400"):
        checked_threads(100_000)
