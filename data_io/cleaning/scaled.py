"""``clean`` as a scale-out stage (``data_io.stage.Stage``): one unit per cleaner, run in the plan's
working folder (a dataset's source is read by its cleaner as a whole, so a cleaner is not cut).

Each cleaner commits its own outputs whole (temporary names, then renames), so the finalize step
has nothing to assemble: it only sums what the units recorded. The plan has no output folder of
its own: it lives in ``--plan-dir``, by default under the user's cache folder
(``data_io.stage.cache_plan_dir``), never the working folder.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from contextlib import chdir
from pathlib import Path
from typing import Any, ClassVar

from data_io.cleaning.registry import find
from data_io.cleaning.runner import drop_totals, run_cleaner
from data_io.errors import ConfigError
from data_io.stage import (
    Finalized,
    Plan,
    SavedPlan,
    Unit,
    cache_plan_dir,
    check_fields,
    numbered,
    unit_record,
)
from data_io.util.fs import sha256
from data_io.util.words import counted


class CleanStage:
    name: ClassVar[str] = "clean"

    def plan(self, request: dict[str, Any], *, unit_bytes: int = 0) -> Plan:
        """``request``: ``names`` (the cleaners), ``workdir`` (where their sources and outputs
        lie, relative to it; default the current folder) and ``plan_dir`` (default:
        ``cache_plan_dir("clean", workdir)``). One unit per cleaner, largest source first;
        ``unit_bytes`` is not used (a cleaner reads its source whole)."""
        workdir = Path(request.get("workdir") or ".").resolve()
        plan_dir = request.get("plan_dir")
        units = []
        with chdir(workdir):
            for name in request["names"]:
                entry = find(name)
                if entry.cleaner is None:
                    raise ConfigError(f"cleaner {entry.name} is not written yet")
                source = Path(entry.cleaner.source.default)
                units.append(
                    Unit(
                        id="",
                        task=entry.name,
                        source=str(source),
                        span={"kind": "whole"},
                        index=0,
                        count=1,
                        bytes=_size(source),
                    )
                )
        units.sort(key=lambda u: (-u.bytes, u.task))
        units = numbered(units)
        return Plan(
            stage=self.name,
            output=str(workdir),
            options={"names": [u.task for u in units]},
            units=units,
            inputs=[{"task": u.task, "source": u.source, "size": u.bytes} for u in units],
            fingerprint={},
            unit_bytes=0,
            scale_root=str(
                Path(plan_dir).resolve()
                if plan_dir is not None
                else cache_plan_dir(self.name, workdir)
            ),
        )

    def check_options(self, options: dict[str, Any]) -> None:
        """``names``: cleaners this version has."""
        check_fields(options, {"names": list[str]}, stage=self.name)
        for name in options["names"]:
            if find(name).cleaner is None:
                raise ConfigError(f"cleaner {name} is not written yet")

    def part_dir(self, plan: SavedPlan, unit: Unit) -> None:
        """None: a cleaner writes its outputs in place, and runs again when asked."""
        return None

    def run_unit(self, plan: SavedPlan, unit: Unit, threads: int | None) -> dict[str, Any]:
        """One dataset's cleaner, in the plan's working folder (its sources and outputs are
        relative to it)."""
        entry = find(unit.task)
        assert entry.cleaner is not None
        started = time.time()
        with chdir(plan.output):
            report = run_cleaner(entry.cleaner, progress=False)
            outputs = {str(path): sha256(Path(path)) for path, _ in report.files}
        # Drops and removed files as the cleaner's own summary lists them: the finalize report
        # shows them too (nothing is left out silently on workers either).
        return unit_record(
            unit,
            started,
            rows=report.rows_written,
            records=report.records,
            outputs=outputs,
            drops=dict(report.drops),
            removed=[str(path) for path in report.removed],
            warnings=report.warnings,
        )

    def finalize(self, plan: SavedPlan, *, missing: list[Unit], progress: bool | None) -> Finalized:
        records = [plan.read_record(u.id, "done") or {} for u in plan.units]
        summary = {
            "units": len(plan.units),
            "records": sum(r.get("records", 0) for r in records),
            "rows": sum(r.get("rows", 0) for r in records),
            "outputs": sorted(p for r in records for p in r.get("outputs", {})),
            "removed": sorted(p for r in records for p in r.get("removed", [])),
            "warnings": [
                f"{unit.task}: warning: {w}"
                for unit, r in zip(plan.units, records, strict=True)
                for w in r.get("warnings", [])
            ],
            # cleaner -> reason -> count, as each cleaner's own summary lists them.
            "drops": {
                unit.task: r["drops"]
                for unit, r in zip(plan.units, records, strict=True)
                if r.get("drops")
            },
        }
        return Finalized(summary, {"rows": summary["rows"], "outputs": summary["outputs"]})

    def report(self, result: dict[str, Any], *, quiet: bool) -> int:
        for warning in result.get("warnings", []):
            print(f"clean {warning}", file=sys.stderr)
        if not quiet:
            for path in result["outputs"]:
                print(f"  wrote {path}")
            for path in result.get("removed", []):
                print(f"  removed {path}: the last run wrote it, this run had no rows for it")
            totals: Counter[str] = Counter()
            for task, drops in sorted(result.get("drops", {}).items()):
                for reason, count in sorted(drops.items()):
                    print(f"  {task}: dropped {count:,}: {reason}")
                    totals[reason] += count
            print(
                f"{counted(result.get('records', 0), 'record')} read, "
                f"{counted(result['rows'], 'row')} written by "
                f"{counted(result['units'], 'cleaner')}, {drop_totals(totals)}"
            )
        return 0


STAGE = CleanStage()


def _size(path: Path) -> int:
    """Bytes of a file, or of the files under a folder (0 when absent: the Hub streams it)."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0
