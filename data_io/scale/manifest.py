"""The plan of a scaled-out run, written once and read by every worker: the stage's options,
the units of work (a whole file, a byte range of a JSONL file or a range of Parquet row groups)
and, beside it, one small record per unit saying where that unit stands.

Layout, inside the stage's output folder (hidden, so the stage's readers never see it)::

    OUT/.data_io_scale/manifest.json         the plan (this module)
    OUT/.data_io_scale/units/<id>.started    who runs the unit (host, pid, attempt, time)
    OUT/.data_io_scale/units/<id>.done       its completion record (output hashes, counts)
    OUT/.data_io_scale/units/<id>.failed     its last error (with file and row)
    OUT/.data_io_scale/parts/<task>/<k>/     tokenize: the encoded part of one span
    OUT/.data_io_scale/submissions/...       what an executor submitted (Slurm scripts, ...)

A ``clean`` plan has no output folder of its own (each cleaner writes its files relative to the
working folder): its plan folder is ``--plan-dir``, by default one per working folder under the
user's cache folder (:func:`default_clean_plan_dir`), never the working folder itself.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from data_io.errors import ConfigError
from data_io.stage import PLAN_AGAIN, STAGES, Plan, Unit, cache_plan_dir, load_stage
from data_io.util.fs import write_json_atomic

FORMAT = "data_io-scale/1"
SCALE_DIR = ".data_io_scale"
MANIFEST = "manifest.json"
STATES = ("done", "failed", "running", "pending")


@dataclass
class Manifest:
    """The plan; ``path`` is where it lives (``OUT/.data_io_scale/manifest.json``)."""

    stage: str
    output: str
    options: dict[str, Any]
    units: list[Unit]
    inputs: list[dict[str, Any]]
    fingerprint: dict[str, Any]
    unit_bytes: int
    created: float = field(default_factory=time.time)
    executor: dict[str, Any] = field(default_factory=dict)
    format: str = FORMAT
    # The plan folder when it is not OUT/.data_io_scale (clean plans: see the module doc).
    scale_root: str | None = None
    path: Path | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_plan(cls, plan: Plan) -> Manifest:
        """The manifest of a stage's plan, not saved yet."""
        return cls(
            stage=plan.stage,
            output=plan.output,
            options=plan.options,
            units=plan.units,
            inputs=plan.inputs,
            fingerprint=plan.fingerprint,
            unit_bytes=plan.unit_bytes,
            scale_root=plan.scale_root,
        )

    # -- where things are ---------------------------------------------------------------------
    @property
    def root(self) -> Path:
        if self.scale_root:
            return Path(self.scale_root)
        return Path(self.output) / SCALE_DIR

    @property
    def units_dir(self) -> Path:
        return self.root / "units"

    @property
    def parts_dir(self) -> Path:
        return self.root / "parts"

    def unit(self, unit_id: str) -> Unit:
        for unit in self.units:
            if unit.id == unit_id:
                return unit
        raise ConfigError(
            f"{self.path}: no unit {unit_id!r} in this plan ({len(self.units)} units)"
        )

    # -- reading and writing ------------------------------------------------------------------
    def save(self) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        self.units_dir.mkdir(exist_ok=True)
        path = self.root / MANIFEST
        content = {k: v for k, v in asdict(self).items() if k != "path"}
        write_json_atomic(path, content)
        self.path = path
        return path

    @classmethod
    def load(cls, path: str | Path) -> Manifest:
        path = Path(path)
        if path.is_dir():  # a plan folder, or the output (working) folder it belongs to
            choices = [path / SCALE_DIR / MANIFEST, path / MANIFEST]
            choices.append(default_clean_plan_dir(path) / MANIFEST)
            found = [choice for choice in choices if choice.is_file()]
            fallback = choices[1] if path.name == SCALE_DIR else choices[0]
            path = found[0] if found else fallback
        try:
            content = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(
                f"{path}: no plan here; give the manifest a scaled-out run wrote "
                f"(OUT/{SCALE_DIR}/{MANIFEST}) or its output folder"
            ) from None
        except ValueError as exc:  # truncated or not JSON
            raise ConfigError(f"{path}: not a readable plan ({exc}); {PLAN_AGAIN}") from None
        except OSError as exc:
            raise ConfigError(f"{path}: not a readable plan ({exc})") from None
        if not isinstance(content, dict) or content.get("format") != FORMAT:
            found = content.get("format") if isinstance(content, dict) else type(content).__name__
            raise ConfigError(f"{path}: format {found!r}, expected {FORMAT!r}; {PLAN_AGAIN}")
        problem = _plan_problem(content)
        if problem is not None:
            raise ConfigError(f"{path}: {problem}; {PLAN_AGAIN}")
        content["units"] = [Unit(**unit) for unit in content["units"]]
        manifest = cls(**content)
        manifest.path = path
        _check_where(manifest, path)
        return manifest

    # -- unit records -------------------------------------------------------------------------
    def record_path(self, unit_id: str, kind: str) -> Path:
        return self.units_dir / f"{unit_id}.{kind}"

    def read_record(self, unit_id: str, kind: str) -> dict[str, Any] | None:
        try:
            return json.loads(self.record_path(unit_id, kind).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def write_record(self, unit_id: str, kind: str, content: dict[str, Any]) -> None:
        self.units_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.record_path(unit_id, kind), content)

    def state(self, unit_id: str) -> str:
        """``done``, ``failed`` (its last attempt failed), ``running`` (started, not ended) or
        ``pending``."""
        done = self.record_path(unit_id, "done")
        if done.exists():
            return "done"
        started = self.read_record(unit_id, "started")
        failed = self.read_record(unit_id, "failed")
        if failed and (not started or failed.get("attempt", 0) >= started.get("attempt", 0)):
            return "failed"
        if started and _alive(started):
            return "running"
        return "failed" if started else "pending"

    def states(self) -> dict[str, str]:
        return {unit.id: self.state(unit.id) for unit in self.units}

    def not_done(self) -> list[Unit]:
        return [unit for unit in self.units if self.state(unit.id) != "done"]

    def check_options(self) -> None:
        """The stage's own check of the options (``Stage.check_options``): run before any unit
        is started, so that an edited plan is refused once, not by every unit. (Not part of
        ``load``: ``status`` shows any plan it can read.)"""
        try:
            load_stage(self.stage).check_options(self.options)
        except ConfigError as error:
            raise ConfigError(f"{self.path}: {error}; {PLAN_AGAIN}") from None


def _check_where(manifest: Manifest, path: Path) -> None:
    """A plan found in another folder than the output it records (the folder was moved or
    copied since it was planned) is refused: its records and parts would be read, and its
    output written, at the recorded place, not where the user pointed."""
    if manifest.scale_root or path.name != MANIFEST:
        return  # a clean plan has no output folder of its own
    recorded = Path(manifest.output) / SCALE_DIR
    if os.path.realpath(path.parent) == os.path.realpath(recorded):
        return
    where = "moved" if not recorded.exists() else "copied"
    raise ConfigError(
        f"{path}: this plan belongs to {manifest.output}, not to {path.parent.parent} (the "
        f"folder was {where} after it was planned); resume it where it was planned, or plan "
        "the run again into this folder (remove its .data_io_scale and re-run the command "
        "with --executor)"
    )


# The type of each field of a plan and of a unit, as written by ``save``.
_PLAN_TYPES: dict[str, tuple[type, ...]] = {
    "stage": (str,),
    "output": (str,),
    "options": (dict,),
    "units": (list,),
    "inputs": (list,),
    "fingerprint": (dict,),
    "unit_bytes": (int,),
    "created": (int, float),
    "executor": (dict,),
    "format": (str,),
    "scale_root": (str, type(None)),
}
_UNIT_TYPES: dict[str, tuple[type, ...]] = {
    "id": (str,),
    "task": (str,),
    "source": (str,),
    "span": (dict,),
    "index": (int,),
    "count": (int,),
    "bytes": (int,),
}
_REQUIRED = ("stage", "output", "options", "units", "inputs", "fingerprint", "unit_bytes")
# The spans the stages cut their files into (``Stage.plan``), and how messages say them.
SPAN_WORDS = {
    "whole": "whole file",
    "bytes": "bytes",
    "text": "text bytes",
    "parts": "parts",
    "row_groups": "row groups",
}


def _plan_problem(content: dict[str, Any]) -> str | None:
    """What is missing, unknown or mistyped in a plan's fields (None: it can be loaded)."""
    missing = [key for key in _REQUIRED if key not in content]
    if missing:
        return f"missing {', '.join(missing)}"
    unknown = sorted(set(content) - set(_PLAN_TYPES))
    if unknown:
        return f"unknown field(s) {', '.join(unknown)}"
    for key, value in content.items():
        if isinstance(value, bool) or not isinstance(value, _PLAN_TYPES[key]):
            return f"{key} is {type(value).__name__}, not {_PLAN_TYPES[key][0].__name__}"
    if content["stage"] not in STAGES:
        return f"stage {content['stage']!r} is not one of {', '.join(STAGES)}"
    for number, unit in enumerate(content["units"]):
        if not isinstance(unit, dict) or set(unit) != set(_UNIT_TYPES):
            return f"unit {number} is not an object with {', '.join(_UNIT_TYPES)}"
        for key, value in unit.items():
            if isinstance(value, bool) or not isinstance(value, _UNIT_TYPES[key]):
                return f"unit {number}: {key} is {type(value).__name__}"
        # Its id names its record files: a plain name, inside the plan's folder. (A task names
        # a file, whose parts' folder the stage checks: prepare's tasks are absolute paths.)
        if not unit["id"] or "/" in unit["id"] or unit["id"].startswith("."):
            return f"unit {number}: id {unit['id']!r} is not a plain name"
        if unit["span"].get("kind") not in SPAN_WORDS:
            return f"unit {number}: span kind {unit['span'].get('kind')!r} is not one of " + (
                ", ".join(SPAN_WORDS)
            )
    return None


def default_clean_plan_dir(workdir: str | Path) -> Path:
    """The plan folder of ``data_io clean --executor`` run in ``workdir`` (see the module doc)."""
    return cache_plan_dir("clean", workdir)


def _alive(started: dict[str, Any]) -> bool:
    """Whether the process that started a unit still runs: known on its own host (a unit
    started elsewhere is taken to run until its executor says otherwise)."""
    if started.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(started.get("pid", 0)), 0)
    except (OSError, ValueError):
        return False
    return True
