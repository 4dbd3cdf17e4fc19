"""The user's cache folder of data_io: ``$XDG_CACHE_HOME/data_io`` (``~/.cache/data_io``), where
what is derived and may be rebuilt lives, never the working or output folder."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "data_io"
