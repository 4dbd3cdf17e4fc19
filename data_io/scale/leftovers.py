"""Temporaries of killed processes inside a plan's folder, removed by the next run.

A unit writes its part under a temporary name and renames it when complete, and every record
goes through a temporary file: a process killed midway leaves them behind (a tokenize part can
be hundreds of MB). ``finalize`` deletes the whole parts folder once the output is complete, but
a run that is stopped again and again would pile them up; so each run removes, before it starts
its units, those whose process is provably gone:

* ``parts/<task>/.tmp-<index>-<pid>-<n>``  a tokenize unit's part (``rust/tokenize/parts.rs``)
* ``parts/.tmp-<unit>-<pid>``             a prepare unit's part (``prepare/parts.py``)
* ``units/.<unit>.<kind>.<pid>.tmp``      a unit record (``fs.write_json_atomic``)
* ``.manifest.json.<pid>.tmp``, ``.finalized.json.<pid>.tmp``

Gone means: the process ran on this machine (the unit's ``started`` record names this host and
that pid, or the plan was made for the local executor, whose processes all run here, and never
sent to Slurm), no process has
that pid now or the one that has it started after the temporary was last written (pid reuse).
A temporary of a process on another node (Ray, Slurm) is left alone: it may still be running.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

from data_io.scale.manifest import Manifest, Unit
from data_io.scale.processes import (
    Leftover,
    entry_size,
    last_written,
    owner_gone,
    remove,
)

_TOKENIZE_PART = re.compile(r"\.tmp-(\d+)-(\d+)-\d+")
_PREPARE_PART = re.compile(r"\.tmp-(.+)-(\d+)")
_RECORD = re.compile(r"\.(.+)\.(?:started|done|failed)\.(\d+)\.tmp")
_PLAN_FILE = re.compile(r"\.(?:manifest|finalized)\.json\.(\d+)\.tmp")


def _candidates(manifest: Manifest) -> list[tuple[Path, int, Unit | None]]:
    """Every temporary of the plan's folder: (path, pid in its name, its unit if known)."""
    by_id = {unit.id: unit for unit in manifest.units}
    by_place = {(unit.task, unit.index): unit for unit in manifest.units}
    found: list[tuple[Path, int, Unit | None]] = []
    root, parts = manifest.root, manifest.parts_dir
    for path in _hidden(root):
        if match := _PLAN_FILE.fullmatch(path.name):
            found.append((path, int(match[1]), None))
    for path in _hidden(manifest.units_dir):
        if match := _RECORD.fullmatch(path.name):
            found.append((path, int(match[2]), by_id.get(match[1])))
    for path in _hidden(parts):
        if match := _PREPARE_PART.fullmatch(path.name):
            found.append((path, int(match[2]), by_id.get(match[1])))
    if parts.is_dir():
        for task in sorted(p for p in parts.iterdir() if p.is_dir() and not p.is_symlink()):
            for path in _hidden(task):
                if match := _TOKENIZE_PART.fullmatch(path.name):
                    unit = by_place.get((task.name, int(match[1])))
                    found.append((path, int(match[2]), unit))
    return found


def _hidden(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.name.startswith("."))
    except OSError:
        return []


def _ran_here(manifest: Manifest, pid: int, unit: Unit | None) -> bool:
    """Whether the process ``pid`` that wrote a temporary ran on this machine."""
    if unit is not None:
        started = manifest.read_record(unit.id, "started") or {}
        if started.get("pid") == pid:
            return started.get("host") == socket.gethostname()
    # A plan made for the local executor and never sent to Slurm: every unit ran here.
    executor = manifest.executor or {}
    return executor.get("kind") == "local" and not executor.get("slurm_submissions")


def remove_dead_temporaries(manifest: Manifest) -> list[Leftover]:
    """Remove the temporaries of the plan's folder whose process is gone (see the module
    docstring); returns what was removed."""
    removed = []
    for path, pid, unit in _candidates(manifest):
        if not _ran_here(manifest, pid, unit) or not owner_gone(pid, last_written(path)):
            continue
        folder = path.is_dir() and not path.is_symlink()
        removed.append(Leftover(path, pid, entry_size(path), folder))
        remove(path)
    return removed
