"""data_io.util.hub: the Hub reachability check, made once per process."""

from __future__ import annotations

import pytest

from data_io.util import hub
from data_io.util.hub import hub_unreachable, offline_by_environment, offline_hint


@pytest.mark.parametrize("value", ["1", "ON", "yes", "True"])
def test_offline_by_environment(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", value)
    assert offline_by_environment()
    assert hub_unreachable() == "HF_HUB_OFFLINE is set"


def test_not_offline_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    assert not offline_by_environment()
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    assert offline_by_environment()


def test_probe_says_why_and_asks_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.utils

    calls = []

    class Session:
        def head(self, url: str, timeout: float) -> None:
            calls.append((url, timeout))
            raise ConnectionError("Name or service not known")

    monkeypatch.setattr(huggingface_hub.utils, "get_session", Session)
    hub._probe.cache_clear()
    try:
        first = hub._probe("http://hub.invalid")
        assert (
            first
            == "http://hub.invalid does not answer: ConnectionError: Name or service not known"
        )
        assert hub._probe("http://hub.invalid") == first
        assert calls == [("http://hub.invalid", hub.HUB_PROBE_SECONDS)]
    finally:
        hub._probe.cache_clear()


def test_offline_hint_only_when_not_already_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert offline_hint() == ""
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert "HF_HUB_OFFLINE=1" in offline_hint()
