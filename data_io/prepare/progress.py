"""The progress bar of ``prepare``: input bytes (MB/s and ETA) with tokens/s beside them."""

from __future__ import annotations

import sys
import time
from typing import Any


class ProgressBar:
    """A tqdm bar over the input bytes, or nothing when disabled."""

    def __init__(self, total_bytes: int, enabled: bool | None) -> None:
        if enabled is None:
            enabled = sys.stderr.isatty()
        self._bar: Any = None
        self._tokens = 0
        self.bytes_done = 0  # input bytes read so far
        self._started = time.perf_counter()
        self._shown = 0.0
        if enabled:
            from tqdm.auto import tqdm  # noqa: PLC0415  CLI start-up: tqdm, only when a bar is shown

            self._bar = tqdm(
                total=total_bytes or None,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc="prepare",
                dynamic_ncols=True,
                file=sys.stderr,
            )

    def describe(self, name: str) -> None:
        if self._bar is not None:
            self._bar.set_description_str(f"prepare {name[:30]}", refresh=False)

    def advance_bytes(self, count: int) -> None:
        self.bytes_done += count
        if self._bar is not None:
            self._bar.update(count)

    def advance_tokens(self, count: int) -> None:
        self._tokens += count
        now = time.perf_counter()
        if self._bar is not None and now - self._shown > 0.5:
            rate = self._tokens / max(now - self._started, 1e-9)
            self._bar.set_postfix_str(f"{self._tokens:,} tokens, {rate:,.0f} tokens/s")
            self._shown = now

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
