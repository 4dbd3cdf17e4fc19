"""Is the Hugging Face Hub reachable? Asked once per process, answered in seconds.

``datasets`` and ``huggingface_hub`` retry a failed connection five times with back-off (about
20 s) before they give up. Every stage that may reach for the Hub (cleaners, the loaders' text
sources, ``prepare``) asks :func:`hub_unreachable` first, so an offline machine is told at once.
"""

from __future__ import annotations

import functools
import os

__all__ = [
    "HUB_PROBE_SECONDS",
    "host_unreachable",
    "hub_unreachable",
    "offline_by_environment",
    "offline_hint",
]

#: Seconds the reachability probe waits: long enough for a slow link, far below the retries.
HUB_PROBE_SECONDS = 5.0

# The values huggingface_hub reads as "true" for its boolean environment switches.
_TRUE = {"1", "ON", "YES", "TRUE"}


def offline_by_environment() -> bool:
    """``HF_HUB_OFFLINE`` (or its older name ``HF_DATASETS_OFFLINE``) is set to a true value."""
    return any(
        os.environ.get(name, "").strip().upper() in _TRUE
        for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    )


def hub_unreachable() -> str | None:
    """Why the Hub cannot be used (``HF_HUB_OFFLINE`` set, or no answer), or None when it can."""
    if offline_by_environment():
        return "HF_HUB_OFFLINE is set"
    from huggingface_hub import constants  # noqa: PLC0415  heavy: huggingface_hub, only when the Hub is asked

    return _probe(constants.ENDPOINT)


def host_unreachable(url: str) -> str | None:
    """Why the host of an ``http(s)://`` URL does not answer, or None when it does (the same
    probe as the Hub's: a file missing there and a machine offline then read differently)."""
    from urllib.parse import urlsplit  # noqa: PLC0415  only remote paths need it

    parts = urlsplit(url)
    return _probe(f"{parts.scheme}://{parts.netloc}")


@functools.cache
def _probe(endpoint: str) -> str | None:
    """One HEAD request to the Hub's endpoint, with a short timeout and no retries; cached, so a
    run of several cleaners asks once. Any HTTP answer (even an error status) means reachable."""
    from huggingface_hub.utils import get_session  # noqa: PLC0415  heavy: huggingface_hub, only when the Hub is asked

    try:
        get_session().head(endpoint, timeout=HUB_PROBE_SECONDS)
    except Exception as exc:  # connection refused, DNS failure, timeout, proxy error: all "no"
        return f"{endpoint} does not answer: {type(exc).__name__}: {exc}"
    return None


def offline_hint() -> str:
    """The advice to add to an "unreachable" message (nothing when the user already said so)."""
    if offline_by_environment():
        return ""
    return "; on a machine without network, set HF_HUB_OFFLINE=1 and nothing tries the Hub"
