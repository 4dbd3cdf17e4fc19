"""Planning a scaled-out run: the stage, found by name, cuts its work into units
(``data_io.stage.Stage.plan``, deterministic: the same inputs and options give the same plan on any
machine); the plan becomes the run's manifest.

``plan_tokenize``, ``plan_clean`` and ``plan_prepare`` are the three stages' requests spelled as
keyword arguments (the scale layer knows their names, not their code).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from data_io.scale.manifest import Manifest
from data_io.stage import DEFAULT_UNIT_MB, load_stage


def plan(stage: str, request: dict[str, Any], unit_bytes: int = DEFAULT_UNIT_MB << 20) -> Manifest:
    """The manifest (not saved yet) of ``stage`` over ``request``, the stage's own options."""
    return Manifest.from_plan(load_stage(stage).plan(request, unit_bytes=unit_bytes))


def plan_tokenize(options: dict[str, Any], unit_bytes: int = DEFAULT_UNIT_MB << 20) -> Manifest:
    """The plan of ``data_io tokenize`` with ``options`` (``tokenize_options``'s dict): units
    of about ``unit_bytes`` of input each."""
    return plan("tokenize", options, unit_bytes)


def plan_clean(
    names: list[str], workdir: str | Path = ".", plan_dir: str | Path | None = None
) -> Manifest:
    """The plan of ``data_io clean NAMES`` run in ``workdir``: one unit per cleaner; the plan
    lives in ``plan_dir`` (default: under the user's cache folder, not the working folder)."""
    request = {
        "names": list(names),
        "workdir": str(workdir),
        "plan_dir": None if plan_dir is None else str(plan_dir),
    }
    return plan("clean", request, 0)


def plan_prepare(
    inputs: list[str],
    output: str | Path,
    kwargs: dict[str, Any],
    unit_bytes: int = DEFAULT_UNIT_MB << 20,
) -> Manifest:
    """The plan of ``data_io prepare INPUTS -o OUTPUT`` with ``prepare``'s keyword arguments
    ``kwargs``: one unit per source not prepared yet, or per range of about ``unit_bytes`` of
    a larger text or JSONL file (a compressed one: of its text, in a few ranges) or Parquet
    file; largest first."""
    request = {"inputs": list(inputs), "output": str(output), "prepare": kwargs}
    return plan("prepare", request, unit_bytes)
