"""``inspect_path``: which kind of folder a path is (by its marker file), and its inspection."""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path

from data_io.errors import ConfigError, InputError
from data_io.inspect.flat import inspect_flat, shard_files
from data_io.inspect.plans import inspect_plan, inspect_plan_cache, plan_folders
from data_io.inspect.prepared import (
    inspect_prepared,
    inspect_split,
    is_prepared,
    unreadable_metadata,
)
from data_io.inspect.report import InspectReport
from data_io.inspect.rows import ROW_SUFFIXES, inspect_rows, is_rows_file, rows_files
from data_io.inspect.sampled import inspect_sampled
from data_io.inspect.tokenized import inspect_tokenized
from data_io.prepare.state import (
    JOURNAL,
    METADATA_FILE,
    SPLITS,
    STATE_DIR,
    metadata_problem,
)
from data_io.scale.manifest import MANIFEST, SCALE_DIR
from data_io.stage import FINALIZED


def inspect_path(
    path: str | Path, *, documents: int = 3, verify: bool = True, tokenizer: str | None = None
) -> InspectReport:
    """Validate the folder (or rows file) at ``path`` and describe it (see the module
    docstring)."""
    if isinstance(documents, bool) or not isinstance(documents, int) or documents < 0:
        raise ConfigError(f"documents must be an integer >= 0, got {documents!r}")
    folder = Path(path)
    if folder.is_file() and is_rows_file(folder):
        return inspect_rows(folder, [folder], documents, tokenizer)
    if not folder.is_dir():
        why = "it does not exist" if not folder.exists() else "an unknown kind of file"
        raise InputError(
            f"{folder}: not a folder or a rows file ({why}); pass a prepare, flat shard, "
            f"tokenized, sampled or packing-cache folder, or cleaned rows "
            f"({', '.join(ROW_SUFFIXES)} files or a folder of them)"
        )
    if is_prepared(folder):
        malformed = metadata_problem(
            json.loads((folder / METADATA_FILE).read_text(encoding="utf-8"))
        )
        if malformed is not None:  # a key the checks below read, missing or of the wrong type
            report = InspectReport(str(folder), "prepare shard folder (malformed metadata)")
            report.problems.append(
                f"{folder / METADATA_FILE}: {malformed}; the file was damaged or edited after "
                "prepare wrote it: restore it from a copy, or re-prepare into a new folder"
            )
            return report
        return inspect_prepared(folder, documents, verify)
    if folder.name in SPLITS and is_prepared(folder.parent):
        return inspect_split(folder, documents, tokenizer)
    unreadable = unreadable_metadata(folder)
    if unreadable is not None:
        report = InspectReport(str(folder), "prepare shard folder (unreadable metadata)")
        report.problems.append(unreadable)
        return report
    if (folder / "tokenizer_info.json").is_file():
        return inspect_tokenized(folder, documents, tokenizer)
    if (folder / "metadata.json").is_file() and (folder / "tokens.npy").is_file():
        return inspect_sampled(folder, documents, tokenizer)
    if (folder / "plan.json").is_file() and (folder / "bin_rows.npy").is_file():
        return inspect_plan(folder)
    if plan_folders(folder):
        return inspect_plan_cache(folder)
    if not shard_files(folder):
        unfinished = _inspect_unfinished(folder)
        if unfinished is not None:
            return unfinished
        rows = rows_files(folder)
        if rows:
            return inspect_rows(folder, rows, documents, tokenizer)
    return inspect_flat(folder, documents, tokenizer)


# -- runs that have not finished ----------------------------------------------------------------
def _inspect_unfinished(folder: Path) -> InspectReport | None:
    """A folder a run is still writing, or one a run left when it was stopped: what it is and
    how to go on, rather than "no shard here" (its shards are still under temporary names)."""
    journal = folder / STATE_DIR / JOURNAL
    if journal.is_file():
        report = InspectReport(str(folder), "unfinished data_io prepare run")
        try:
            run = json.loads(journal.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            run = {}
        if isinstance(run, dict):
            report.facts = {k: run[k] for k in ("run", "pid") if k in run}
            if isinstance(run.get("started"), int | float):
                report.facts["started"] = time.strftime(
                    "%Y-%m-%d %H:%M:%S", time.localtime(run["started"])
                )
        partial = sorted(p.name for split in SPLITS for p in (folder / split).glob(".*.tmp"))
        report.facts["temporary shards"] = len(partial)
        if _is_locked(folder):
            report.problems.append(
                f"{folder}: a data_io prepare is writing into this folder now (its first run "
                f"has not finished, so no {METADATA_FILE} yet); inspect it when the run ends"
            )
        else:
            report.problems.append(
                f"{folder}: a data_io prepare run was stopped before it finished ({journal} "
                f"is there and no {METADATA_FILE}): run the same data_io prepare command "
                "again (it removes what the stopped run left and starts over), or delete the "
                "folder"
            )
        return report
    manifest = folder / SCALE_DIR / MANIFEST
    # A finalized run keeps its plan beside `finalized.json`: its output is what is inspected.
    if manifest.is_file() and not (folder / SCALE_DIR / FINALIZED).exists():
        try:
            stage = json.loads(manifest.read_text(encoding="utf-8")).get("stage", "?")
        except (OSError, ValueError, AttributeError):
            stage = "?"
        report = InspectReport(str(folder), f"unfinished scaled-out {stage} run")
        report.problems.append(
            f"{folder}: a scaled-out data_io {stage} run has not been finalized (its plan "
            f"{manifest} is there, its outputs are not): `data_io status {folder}` shows its "
            f"units, `data_io resume {folder}` runs the rest and finalizes"
        )
        return report
    if not any(folder.iterdir()):
        report = InspectReport(str(folder), "empty folder")
        report.problems.append(
            f"{folder}: the folder is empty; pass a prepare, flat shard, tokenized, sampled or "
            f"packing-cache folder, or cleaned rows ({', '.join(ROW_SUFFIXES)} files or a "
            "folder of them)"
        )
        return report
    return None


def _is_locked(folder: Path) -> bool:
    """Whether a live ``data_io prepare`` holds the folder's lock (``state.exclusive``)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases the shared lock taken to probe
    return False
