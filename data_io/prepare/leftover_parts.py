"""The parts an unfinished scaled-out run left in the output (``SCALE_PARTS``), and its plan
settled once a plain run took them (``settle_scaled_run``)."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from typing import Any

from data_io.formats.raw_text import FOLDER_READ_KEYS, recorded_read
from data_io.prepare.state import METADATA_FILE
from data_io.stage import write_finalized
from data_io.util.stale import pid_alive

# Where a scaled-out prepare's units leave their parts (data_io.scale).
SCALE_PARTS = Path(".data_io_scale") / "parts"


def settle_scaled_run(out: Path) -> bool:
    """After a plain run that took its sources from the parts an unfinished scaled run left in
    ``out``: when the output now holds every input of that run's plan, each read as the plan
    read it and with the plan's options, and none of its units still runs, the plan's work is
    done as its finalize would have done it: its parts are deleted and it is marked finalized
    (so ``data_io status`` says the output is complete, not that units wait). Whether it was."""
    root = out / SCALE_PARTS.parent
    try:
        plan = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
        metadata = json.loads((out / METADATA_FILE).read_text(encoding="utf-8"))
        made, now = plan["options"]["run"], metadata["options"]

        def identities(entries: list[dict[str, Any]], legacy: dict[str, Any]) -> set[Any]:
            return {(e["name"], e["sha256"], repr(recorded_read(e, legacy))) for e in entries}

        planned = identities(plan["inputs"], made)
        held = identities(metadata["inputs"], now)
    except (OSError, ValueError, KeyError, TypeError):
        return False  # no plan of this stage to settle (or not one this run can read)
    shared = lambda options: {k: v for k, v in options.items() if k not in FOLDER_READ_KEYS}  # noqa: E731
    if plan.get("stage") != "prepare" or not planned <= held or shared(made) != shared(now):
        return False
    if _units_running(root / "units"):
        return False
    shutil.rmtree(out / SCALE_PARTS, ignore_errors=True)
    write_finalized(root, {"units": len(plan.get("units", [])), "by": "a run without --executor"})
    return True


def _units_running(units: Path) -> bool:
    """Whether a unit of the plan may still run: started, not ended, and its process alive on
    this host, or started on another host (whose processes cannot be asked)."""
    for started in units.glob("*.started"):
        unit = started.name.removesuffix(".started")
        if (units / f"{unit}.done").exists() or (units / f"{unit}.failed").exists():
            continue
        try:
            record = json.loads(started.read_text(encoding="utf-8"))
            if record.get("host") != socket.gethostname() or pid_alive(int(record["pid"])):
                return True
        except (OSError, ValueError, KeyError, TypeError):
            return True  # unreadable: taken to run
    return False
