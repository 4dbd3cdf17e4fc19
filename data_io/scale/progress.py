"""Progress of units as they end, shared by the executors that wait for them (local, Ray): a
bar over the input bytes, with units done and failed in its label."""

from __future__ import annotations

from collections.abc import Sequence

from tqdm import tqdm

from data_io.scale.manifest import Unit
from data_io.util.console import on_terminal


class UnitProgress:
    def __init__(self, units: Sequence[Unit], show: bool | None = None) -> None:
        self.total = len(units)
        self.ended = 0
        self.failures = 0
        self.bar = tqdm(
            total=sum(u.bytes for u in units),
            unit="B",
            unit_scale=True,
            desc="units",
            disable=not (on_terminal() if show is None else show),
        )
        self._label()

    def _label(self) -> None:
        failed = f", {self.failures} failed" if self.failures else ""
        self.bar.set_postfix_str(f"{self.ended}/{self.total} units{failed}", refresh=False)

    def done(self, unit: Unit) -> None:
        self.ended += 1
        self.bar.update(unit.bytes)
        self._label()

    def failed(self, unit: Unit) -> None:
        self.failures += 1
        self.done(unit)

    def close(self) -> None:
        self.bar.close()
