"""The contract between a stage that scales out and the scale layer beneath it.

A scalable stage (``tokenize``, ``prepare``, ``clean``) implements :class:`Stage` in its own
``scaled.py``: it cuts its work into :class:`Unit` s (``plan``), runs one unit on whatever machine
an executor lands it (``run_unit``), assembles the output from the units' parts (``finalize``) and
prints the result (``report``). ``data_io.scale`` runs any of them through this protocol, finds a
stage by the name its plan records (:func:`load_stage`), and never imports a stage: a plan written
by one version resumes under the next as long as the name and the stage's options keep meaning
the same thing.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import os
import socket
import time
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from data_io.errors import ConfigError
from data_io.util.cache import cache_root
from data_io.util.fs import write_json_atomic
from data_io.util.json_kinds import json_kind

# Input per unit unless --unit-mb says otherwise; a bigger file is cut into byte ranges.
DEFAULT_UNIT_MB = 256
# Set by executors that run several units per process with their own thread budget.
THREADS_VARIABLE = "DATA_IO_UNIT_THREADS"
# What a message about a damaged or edited plan says to do.
PLAN_AGAIN = (
    "the plan was damaged or edited: plan the run again (remove the plan folder and re-run "
    "the command with --executor)"
)

# Scalable stages by the name a plan records -> the module whose ``STAGE`` implements them.
STAGES: dict[str, str] = {
    "train-tokenizer": "data_io.tokenizer.scaled",
    "tokenize": "data_io.tokenize.scaled",
    "prepare": "data_io.prepare.scaled",
    "clean": "data_io.cleaning.scaled",
}


@dataclass(frozen=True)
class Unit:
    """One piece of work: ``span`` of ``source`` (``{"kind": "whole"}``, ``{"kind": "bytes",
    "start", "end"}`` or ``{"kind": "row_groups", "start", "end"}``), the ``index``-th of the
    ``count`` spans its file was cut into."""

    id: str
    task: str
    source: str
    span: dict[str, Any]
    index: int
    count: int
    bytes: int


@dataclass(frozen=True)
class Plan:
    """What a stage's ``plan`` returns; the scale layer saves it as the run's manifest.

    ``options`` is everything the units and the finalize step need (JSON-ready: it is written
    once and read on every node); ``inputs`` and ``fingerprint`` describe what was planned, for
    ``status`` and for telling an equal plan from a new one; ``scale_root`` is the plan folder
    when it is not ``OUT/.data_io_scale`` (clean plans)."""

    stage: str
    output: str
    options: dict[str, Any]
    units: list[Unit]
    inputs: list[dict[str, Any]]
    fingerprint: dict[str, Any]
    unit_bytes: int
    scale_root: str | None = None


# Beside a plan's manifest once its output is complete: when, and how (``write_finalized``).
FINALIZED = "finalized.json"


def write_finalized(root: Path, record: dict[str, Any]) -> None:
    """Mark the plan in folder ``root`` finalized: its output is complete (``record``: when,
    how long, which units' work was done by the finalize step itself, by whom)."""
    write_json_atomic(root / FINALIZED, {"time": time.time(), **record})


def unit_record(
    unit: Unit, started: float, *, reused: bool = False, seconds: float | None = None, **work: Any
) -> dict[str, Any]:
    """A unit's completion record as ``status`` reads it: the unit, what it did (``work``:
    ``rows``, ``tokens``, ``outputs``...), when, how long and where."""
    ended = time.time()
    return {
        "unit": unit.id,
        "task": unit.task,
        "bytes": unit.bytes,
        **work,
        "reused": reused,
        "seconds": ended - started if seconds is None else seconds,
        "started": started,
        "ended": ended,
        "host": socket.gethostname(),
    }


def planned_options(
    function: Callable[..., Any], given: dict[str, Any], *, stage: str, leave_out: tuple = ()
) -> dict[str, Any]:
    """Every keyword-only option of ``function`` (the stage's API) but ``leave_out``: ``given``
    over the defaults, so that units and finalize read them all from the plan; an option the
    function does not take is an error."""
    defaults = {
        name: parameter.default
        for name, parameter in inspect.signature(function).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and name not in leave_out
    }
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ConfigError(f"{stage} has no option {', '.join(unknown)}")
    return {**defaults, **given}


def check_planned_options(
    function: Callable[..., Any],
    options: object,
    *,
    stage: str,
    leave_out: tuple = (),
    fields: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``options`` as a saved plan holds them: keyword-only options of ``function`` but
    ``leave_out`` (``planned_options``'s dict; one left out takes its default, as in a plan
    written before the option existed), of the types its signature says, and the plan's own
    ``fields`` (name -> type, required; also an option the plan records in another form than
    the signature's). See ``check_fields``."""
    hints = typing.get_type_hints(function)
    optional = {
        name: hints.get(name, Any)
        for name, parameter in inspect.signature(function).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and name not in leave_out
    }
    fields = fields or {}
    optional = {name: hint for name, hint in optional.items() if name not in fields}
    return check_fields(options, fields, stage=stage, optional=optional)


def check_fields(
    options: object,
    fields: Mapping[str, Any],
    *,
    stage: str,
    optional: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``options`` (read from a plan's JSON) as an object of ``fields`` and, where present,
    ``optional`` fields (name -> type; a path is a string in JSON), none other. Returns it; a
    ConfigError names the first field that is missing, unknown or of another type."""
    if not isinstance(options, dict):
        raise ConfigError(f"{stage}'s options are {json_kind(options)}, not an object")
    missing = [name for name in fields if name not in options]
    if missing:
        raise ConfigError(f"{stage}'s options lack {', '.join(missing)}")
    known = {**(optional or {}), **fields}
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ConfigError(f"{stage} has no option {', '.join(unknown)}")
    for name, value in options.items():
        check_option_type(stage, name, value, known[name])
    return options


def check_option_type(stage: str, name: str, value: object, hint: Any) -> None:
    """A ConfigError when ``value`` (read from JSON) is not of the type ``hint`` says."""
    if not _accepts(hint, value):
        raise ConfigError(
            f"{stage}'s option {name} is {json_kind(value)} ({value!r}), not {_described(hint)}"
        )


def _accepts(hint: Any, value: object) -> bool:
    """Whether ``value``, as JSON gives it, is of type ``hint``; a hint this check does not
    know accepts anything (the stage's own checks judge it)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(arg, value) for arg in args)
    if hint is type(None) or hint is None:
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str or _is_path(hint):
        return isinstance(value, str)
    if origin in (list, tuple, Sequence) or hint in (list, tuple):
        item = args[0] if args else Any
        return isinstance(value, list) and all(_accepts(item, v) for v in value)
    if origin in (dict, Mapping) or hint is dict:
        key, item = args if len(args) == 2 else (Any, Any)
        return isinstance(value, dict) and all(
            _accepts(key, k) and _accepts(item, v) for k, v in value.items()
        )
    return True


def _is_path(hint: Any) -> bool:
    origin = typing.get_origin(hint) or hint
    return isinstance(origin, type) and issubclass(origin, (Path, os.PathLike))


# How a message names a type: as JSON holds it.
_TYPE_WORDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def _described(hint: Any) -> str:
    """``hint`` in words ("an integer or null")."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        words = dict.fromkeys(_described(arg) for arg in typing.get_args(hint))
        return " or ".join(words)
    if hint is type(None) or hint is None:
        return "null"
    if _is_path(hint):
        return "a string"
    args = typing.get_args(hint)
    if origin in (list, tuple, Sequence) or hint in (list, tuple):
        return f"a list of {_plural(args[0])}" if args else "a list"
    if origin in (dict, Mapping) or hint is dict:
        return f"an object of {_plural(args[1])}" if len(args) == 2 else "an object"
    return _TYPE_WORDS.get(hint, getattr(hint, "__name__", str(hint)))


def _plural(hint: Any) -> str:
    """What a list (or an object's values) of ``hint`` holds, in words ("strings")."""
    words = _described(hint)
    for one, many in (("a list", "lists"), ("an object", "objects")):
        if words.startswith(one):
            return many + words[len(one) :]
    return _PLURALS.get(words, f"items each {words}")


_PLURALS = {"a string": "strings", "an integer": "integers", "a number": "numbers",
            "true or false": "booleans"}  # fmt: skip


def numbered(units: list[Unit]) -> list[Unit]:
    """``units`` with their ids, ``u000000`` onwards, in the order given (the plan's order)."""
    return [Unit(**{**u.__dict__, "id": f"u{k:06d}"}) for k, u in enumerate(units)]


@runtime_checkable
class SavedPlan(Protocol):
    """What a stage sees of a saved plan when it runs a unit or finalizes (the scale layer's
    ``Manifest`` is one)."""

    stage: str
    output: str
    options: dict[str, Any]
    units: list[Unit]
    inputs: list[dict[str, Any]]

    @property
    def path(self) -> Path | None: ...

    @property
    def parts_dir(self) -> Path: ...

    def read_record(self, unit_id: str, kind: str) -> dict[str, Any] | None: ...


@dataclass
class Finalized:
    """A stage's finalize: its ``result`` (what ``report`` prints) and what the plan's
    ``finalized.json`` records about it beside the time and the units encoded there."""

    result: Any
    record: dict[str, Any] = field(default_factory=dict)


class Stage(Protocol):
    """A stage the scale layer can run as units (see the module's doc)."""

    name: ClassVar[str]

    def plan(self, request: dict[str, Any], *, unit_bytes: int) -> Plan:
        """Cut the work ``request`` describes (the stage's own options, JSON-ready) into units of
        about ``unit_bytes`` each, deterministically: equal requests give equal plans."""
        ...

    def check_options(self, options: dict[str, Any]) -> None:
        """Raise a ConfigError naming the option when ``options`` (a saved plan's) are not
        what ``plan`` writes (an option missing, unknown, of another type or out of range): a
        damaged or edited plan is refused before any unit runs, not by every unit."""
        ...

    def part_dir(self, plan: SavedPlan, unit: Unit) -> Path | None:
        """Where the unit leaves its part; a unit recorded done whose part is there is not run
        again. None: the unit leaves no part of its own (it is run again when asked)."""
        ...

    def run_unit(self, plan: SavedPlan, unit: Unit, threads: int | None) -> dict[str, Any]:
        """Do one unit into its part (under a temporary name, renamed when complete); return
        its completion record (``rows``, ``tokens``, ``outputs``... as ``status`` shows them).
        Idempotent: a second run leaves one part."""
        ...

    def finalize(self, plan: SavedPlan, *, missing: list[Unit], progress: bool | None) -> Finalized:
        """Write the stage's output from the done units' parts, the ``missing`` units' work
        done here; byte-identical to one run on one machine."""
        ...

    def report(self, result: Any, *, quiet: bool) -> int:
        """Print the finalized ``result`` (nothing when ``quiet``) and return the exit code;
        may raise the result's failures as the stage's error."""
        ...


def cache_plan_dir(stage: str, workdir: str | Path) -> Path:
    """The plan folder of a ``stage`` run in ``workdir`` that has no output folder of its own
    (``clean``: its cleaners write beside their sources): ``$XDG_CACHE_HOME/data_io/scale/
    <stage>-<hash of workdir>`` (``~/.cache/...``), never the working folder itself."""
    resolved = str(Path(workdir).resolve())
    digest = hashlib.sha256(resolved.encode()).hexdigest()[:16]
    return cache_root() / "scale" / f"{stage}-{digest}"


def load_stage(name: str) -> Stage:
    """The stage a plan names, imported on first use."""
    module = STAGES.get(name)
    if module is None:
        raise ConfigError(
            f"no scalable stage is called {name!r}; the stages that run as units are "
            f"{', '.join(sorted(STAGES))} (a plan written by another version of data_io?)"
        )
    stage: Stage = importlib.import_module(module).STAGE
    return stage
