"""A packing cache (``data_io pack``, ``TokenizedRowsDataset``'s ``dataset_prepared_path``) or one
plan folder of it: what each bin plan covers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from data_io.errors import InputError
from data_io.inspect.flat import shard_files
from data_io.inspect.report import InspectReport
from data_io.load.packing.row_bins import read_cached_plan

_PLAN_FILES = ("bin_rows.npy", "bin_offsets.npy", "plan.json")


# -- packing caches ----------------------------------------------------------------------------
def plan_folders(folder: Path) -> list[Path]:
    """The bin-plan folders of a packing cache (``<dataset_prepared_path>/<digest>/``), when
    every visible sub-folder of ``folder`` is one and no shard lies beside them."""
    try:
        subfolders = [p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")]
    except OSError:
        return []
    if not subfolders or shard_files(folder):
        return []
    if all((p / "plan.json").is_file() for p in subfolders):
        return sorted(subfolders)
    return []


def _read_plan(folder: Path) -> tuple[dict[str, Any], list[str]]:
    """What one bin plan covers (facts), and its problems: the loader's own check of a cached
    plan (``read_cached_plan``), over the rows the plan lists (the sources' row count is not
    known here)."""
    try:
        listed = len(np.load(folder / "bin_rows.npy", mmap_mode="r", allow_pickle=False))
        plan, meta = read_cached_plan(folder, listed)
    except InputError as err:  # (a ValueError too: caught first) the loader's own refusal
        return {}, [f"{err} by the next `data_io pack` or loader start"]
    except (OSError, ValueError, EOFError) as err:
        return {}, [f"{folder}: unreadable bin arrays ({err}); delete {folder}, the next "
                    "`data_io pack` or loader start writes it again"]  # fmt: skip
    facts = {
        "bins": len(plan),
        "rows": int(plan.rows.shape[0]),
        "tokens": meta.get("tokens"),
        "longest row": meta.get("longest"),
        "sources": ", ".join(
            str(s.get("path") or s.get("name")) for s in meta["sources"] if isinstance(s, dict)
        ),
    }
    return facts, []


_PLAN_NOTE = (
    "a packing cache holds bin plans (which rows go into which packed item), not tokens: "
    "inspect the rows its sources name to see the data"
)


def inspect_plan(folder: Path) -> InspectReport:
    report = InspectReport(str(folder), "packing plan (one entry of a `data_io pack` cache)")
    facts, problems = _read_plan(folder)
    report.facts = facts
    report.problems += problems
    report.notes.append(_PLAN_NOTE)
    return report


def inspect_plan_cache(folder: Path) -> InspectReport:
    report = InspectReport(
        str(folder), "packing cache (dataset_prepared_path of `data_io pack` / the rows loader)"
    )
    plans = []
    for plan in plan_folders(folder):
        facts, problems = _read_plan(plan)
        report.problems += problems
        plans.append({"plan": plan.name, **{k: facts.get(k) for k in ("bins", "rows", "tokens")},
                      "sources": facts.get("sources", "")})  # fmt: skip
    report.tables["plans"] = plans
    report.facts = {"plans": len(plans)}
    leftovers = sorted(p.name for p in folder.iterdir() if p.name.startswith("."))
    if leftovers:
        report.notes.append(
            f"{len(leftovers)} hidden entr{'ies' if len(leftovers) > 1 else 'y'} "
            f"({', '.join(leftovers[:3])}): temporaries of a plan being written, or of one "
            "killed while writing"
        )
    report.notes.append(_PLAN_NOTE)
    return report
