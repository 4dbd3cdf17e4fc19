"""Mixture weights, temperature, phases, and the stride schedule of sources.

The schedule is checked against an independent re-derivation (every due time listed and sorted),
and its realised mixture over windows of the stream is reported against the weights, beside what
an independent multinomial draw (the seeds' approach) gives on the same windows.
"""

from __future__ import annotations

import numpy as np
import pytest

from data_io.errors import ConfigError
from data_io.load.order.mixing import StrideSchedule, resolve_phases, temper


def oracle_order(schedule: StrideSchedule, h: int) -> np.ndarray:
    """The first h sources by listing due times (k + u_s) / w_s for every source and sorting."""
    entries = []
    for s, w in enumerate(schedule.weights):
        if w <= 0:
            continue
        for k in range(int(h * w) + 3):
            entries.append(((k + schedule.offsets[s]) / w, s))
    entries.sort()
    return np.array([s for _, s in entries[:h]], dtype=np.int64)


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0, 10.0])
def test_temper_matches_the_formula(temperature: float) -> None:
    w = np.array([6.0, 3.0, 1.0, 0.0])
    expected = np.where(w > 0, w ** (1 / temperature), 0)
    assert np.allclose(temper(w, temperature), expected / expected.sum())


def test_high_temperature_flattens() -> None:
    flat = temper([100, 1], 1000.0)
    assert abs(flat[0] - flat[1]) < 0.01


@pytest.mark.parametrize(
    "weights", [[0.5, 0.3, 0.2], [0.97, 0.01, 0.01, 0.01], [1.0], [0.25, 0.0, 0.75], [1 / 3] * 3]
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_order_and_counts_match_the_oracle(weights: list[float], seed: int) -> None:
    schedule = StrideSchedule(weights, seed, 0)
    expected = oracle_order(schedule, 700)
    assert schedule.order(0, 700).tolist() == expected.tolist()
    for h in (0, 1, 2, 3, 17, 100, 699, 700):
        counts = np.bincount(expected[:h], minlength=len(weights))
        assert schedule.counts(h).tolist() == counts.tolist()
    # Any range is the matching slice of the whole.
    assert schedule.order(123, 456).tolist() == expected[123:456].tolist()


def test_counts_at_a_large_position_are_exact_and_monotone() -> None:
    schedule = StrideSchedule([0.6, 0.25, 0.15], 4, 2)
    h = 10**12
    counts = schedule.counts(h)
    assert int(counts.sum()) == h
    assert np.all(np.abs(counts - np.array([0.6, 0.25, 0.15]) * h) < 2)
    following = schedule.counts(h + 1000)
    assert np.all(following >= counts)
    assert (
        np.bincount(schedule.order(h, h + 1000), minlength=3).tolist()
        == (following - counts).tolist()
    )


def test_realised_mixture_tracks_the_weights_over_every_window() -> None:
    weights = np.array([0.5, 0.3, 0.15, 0.05])
    order = StrideSchedule(weights, 7, 0).order(0, 200_000)
    draws = np.random.default_rng(7).choice(4, size=200_000, p=weights)
    report = []
    for window in (64, 512, 4096):
        ours, theirs = 0.0, 0.0
        for start in range(0, 200_000 - window, window // 2):
            expected = weights * window
            ours = max(
                ours,
                np.abs(np.bincount(order[start : start + window], minlength=4) - expected).max(),
            )
            theirs = max(
                theirs,
                np.abs(np.bincount(draws[start : start + window], minlength=4) - expected).max(),
            )
        report.append((window, ours, theirs))
        # Stride scheduling: every source within 2 samples of its share in every window.
        assert ours < 2.0, report
        assert theirs > ours
    print("window, max |count - weight*window| (stride), (multinomial):", report)


def test_zero_weight_source_never_drawn() -> None:
    order = StrideSchedule([0.5, 0.0, 0.5], 1, 0).order(0, 1000)
    assert 1 not in set(order.tolist())


def test_phases_resolve() -> None:
    phases = resolve_phases(
        ["a", "b"],
        [3, 1],
        phases=[
            {"start_step": 0, "dataset_weights": {"a": 1, "b": 1}},
            {"start_step": 10, "dataset_weights": {"a": 0, "b": 2}, "lr_scale": 0.5},
        ],
    )
    assert [p.start_step for p in phases] == [0, 10]
    assert phases[0].weights == (0.5, 0.5)
    assert phases[1].weights == (0.0, 1.0) and phases[1].lr_scale == 0.5
    anneal = resolve_phases(["a", "b"], [3, 1], anneal_start_step=5, anneal_weights={"a": 1})
    assert [p.start_step for p in anneal] == [0, 5] and anneal[0].weights == (0.75, 0.25)
    assert anneal[1].weights == (0.5, 0.5)  # b keeps its base weight 1 beside a's new 1


def test_a_source_a_phase_does_not_name_keeps_its_base_weight() -> None:
    # KempnerForge's train.py: phase.dataset_weights.get(name, original_weights[name]). A phase
    # that names one source re-weights that one; one that names none changes only lr_scale.
    phases = resolve_phases(
        ["web", "code", "books"],
        [5, 3, 2],
        phases=[
            {"start_step": 4, "dataset_weights": {"code": 8}},
            {"start_step": 9, "lr_scale": 0.5},
        ],
    )
    assert phases[1].weights == pytest.approx((5 / 15, 8 / 15, 2 / 15))
    assert phases[2].weights == pytest.approx((0.5, 0.3, 0.2)) and phases[2].lr_scale == 0.5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base_weights": [1, 0]}, "weight must be > 0; not so for b"),
        ({"base_weights": [1, -1]}, "weight must be > 0"),
        ({"base_weights": [1]}, "one weight per source"),
        ({"temperature": 0}, "mix_temperature must be > 0"),
        (
            {"phases": [{"start_step": 5, "dataset_weights": {"a": 0, "b": 0}}]},
            r"phases\[0\].dataset_weights are all zero",
        ),
        (
            {"phases": [{"start_step": 5, "dataset_weights": {"a": -1, "b": 1}}]},
            "must be finite and >= 0",
        ),
        (
            {
                "phases": [
                    {"start_step": 5, "dataset_weights": {"a": 1}},
                    {"start_step": 5, "dataset_weights": {"b": 1}},
                ]
            },
            "strictly increasing",
        ),
        (
            {"phases": [{"start_step": 5, "dataset_weights": {"c": 1}}]},
            r"unknown sources \['c'\]",
        ),
        ({"phases": [{"start_step": -1, "dataset_weights": {"a": 1}}]}, "start_step must be"),
        (
            {"phases": [{"start_step": 2, "dataset_weights": {"a": 1}, "lr_scale": 0}]},
            "lr_scale must be a finite number > 0",
        ),
        (
            {"phases": [{"start_step": 2, "dataset_weights": {"a": 1}, "lr_scale": float("inf")}]},
            "lr_scale must be a finite number > 0",
        ),
        (
            {"phases": [{"start_step": 2, "dataset_weights": {"a": 1}, "lr": 1}]},
            "unknown keys",
        ),
        (
            {
                "phases": [{"start_step": 2, "dataset_weights": {"a": 1}}],
                "anneal_start_step": 3,
                "anneal_weights": {"a": 1},
            },
            "exclusive",
        ),
        ({"anneal_start_step": 3}, "go together"),
        ({"anneal_weights": {"a": 1}}, "go together"),
    ],
)
def test_bad_phases(kwargs: dict, message: str) -> None:
    args = {"names": ["a", "b"], "base_weights": [1, 1]} | kwargs
    with pytest.raises(ConfigError, match=message):
        resolve_phases(**args)


def test_duplicate_names() -> None:
    with pytest.raises(ConfigError, match="unique"):
        resolve_phases(["a", "a"], [1, 1])


@pytest.mark.parametrize("temperature", [0.05, 0.5, 1.0, 7.0, 1e6, 1e300])
def test_temper_never_overflows_and_matches_the_power(temperature: float) -> None:
    """Against the plain formula where it is representable; always finite, summing to 1."""
    weights = [3.0, 1.0, 1.0]
    got = temper(weights, temperature)
    assert np.all(np.isfinite(got)) and got.sum() == pytest.approx(1.0)
    with np.errstate(over="ignore", under="ignore"):
        plain = np.asarray(weights) ** (1.0 / temperature)
    if np.all(np.isfinite(plain)) and plain.sum() > 0 and np.all(plain > 0):
        assert got == pytest.approx(plain / plain.sum(), rel=1e-9, abs=0)
    assert got[0] >= got[1] == got[2]  # tempering keeps the order of the weights


def test_tiny_temperature_with_equal_weights_stays_uniform() -> None:
    """w ** (1 / 1e-9) overflows to inf (then NaN) for any w > 1: the log form does not."""
    assert temper([2.0, 2.0, 2.0], 1e-9).tolist() == pytest.approx([1 / 3] * 3)


def test_tempering_that_starves_a_source_names_the_key_and_the_source() -> None:
    with pytest.raises(ConfigError, match=r"data\.mix_temperature=0\.001 tempers .* of code"):
        resolve_phases(["web", "code"], [3.0, 1.0], temperature=0.001)


@pytest.mark.parametrize("temperature", [float("nan"), float("inf"), -1.0, True, "2"])
def test_temper_refuses_what_is_not_a_positive_number(temperature) -> None:
    with pytest.raises(ConfigError, match=r"data\.mix_temperature must be"):
        temper([1.0, 2.0], temperature)


def test_extreme_temperature_in_a_config_fails_at_load_naming_the_key(tmp_path) -> None:
    from data_io.load.config import config_from_dict

    raw = {"data": {"datasets": [{"path": "a", "weight": 3}, {"path": "b", "weight": 1}],
                    "mix_temperature": 0.001}}  # fmt: skip
    with pytest.raises(ConfigError, match=r"data\.mix_temperature=0\.001 .* of b"):
        config_from_dict(raw)
    raw["data"]["mix_temperature"] = float("nan")
    with pytest.raises(ConfigError, match=r"data\.mix_temperature must be a finite number"):
        config_from_dict(raw)
