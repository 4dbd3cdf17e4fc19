"""``train-tokenizer`` as a scale-out stage (``data_io.stage.Stage``): the counting pass of each
input file is one unit, which leaves the file's word counts in its part
(``rust/train/counts/store.rs``); the finalize step is ``train_tokenizer`` itself, which reads
those counts instead of counting the files again (a file whose unit did not run is counted
there), merges them and runs the merge pass. The counts of a file do not depend on the others,
so the tokenizer is byte-identical to one run on one machine.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any, ClassVar

from data_io import _core
from data_io.errors import ConfigError
from data_io.stage import (
    Finalized,
    Plan,
    SavedPlan,
    Unit,
    check_fields,
    check_planned_options,
    numbered,
    planned_options,
    unit_record,
)
from data_io.tokenizer.summary import print_summary
from data_io.tokenizer.train import TrainResult, core_options, train_tokenizer
from data_io.util.fs import sha256

# train_tokenizer's options a plan does not record: its own business (counts), or what units
# cannot do (raw text is counted in one process).
_NOT_PLANNED = ("progress", "counts_dir", "count_parts", "text_field", "doc_per_line")
# A plan's options, as ``TrainTokenizerStage.plan`` writes them.
_PLAN_FIELDS: dict[str, Any] = {"inputs": list[str], "output": str, "train": dict}


class TrainTokenizerStage:
    name: ClassVar[str] = "train-tokenizer"

    def plan(self, request: dict[str, Any], *, unit_bytes: int = 0) -> Plan:
        """``request``: ``inputs``, ``output`` (the tokenizer JSON) and ``train``
        (``train_tokenizer``'s keyword arguments). One unit per input file, largest first;
        ``unit_bytes`` is not used (a file's counts are one unit: its choice of texts is made
        over the whole file)."""
        kwargs = planned_options(
            train_tokenizer, request.get("train", {}), stage=self.name, leave_out=_NOT_PLANNED
        )
        output = Path(request["output"]).expanduser().resolve()
        inputs = [str(Path(p).resolve()) for p in request["inputs"]]
        options = _core_json(inputs, output, kwargs)
        if options["trainer"] != "rust":
            raise ConfigError(
                "--executor runs the counting pass of the rust trainer as units; the hf trainer "
                "runs in one process: drop --trainer hf (the same file), or --executor"
            )
        tasks = json.loads(_core.train_tasks(_without_trainer(options)))
        units = [
            Unit(
                id="",
                task=task["task"],
                source=task["source"],
                span={"kind": "whole"},
                index=0,
                count=1,
                bytes=task["size"],
            )
            for task in tasks
        ]
        units.sort(key=lambda u: (-u.bytes, u.task))
        return Plan(
            stage=self.name,
            output=str(output.parent),
            options={"inputs": inputs, "output": str(output), "train": kwargs},
            units=numbered(units),
            inputs=[{"task": t["task"], "source": t["source"], "size": t["size"]} for t in tasks],
            fingerprint={"train": kwargs},
            unit_bytes=0,
        )

    def check_options(self, options: dict[str, Any]) -> None:
        """``inputs``, ``output`` and ``train`` (``train_tokenizer``'s keyword arguments, of
        their types, checked as a run checks them, for the rust trainer)."""
        check_fields(options, _PLAN_FIELDS, stage=self.name)
        kwargs = check_planned_options(
            train_tokenizer, options["train"], stage=self.name, leave_out=_NOT_PLANNED
        )
        core = _core_json(options["inputs"], Path(options["output"]), kwargs)
        if core["trainer"] != "rust":
            raise ConfigError(f"{self.name}'s plan is for the rust trainer, not {core['trainer']}")

    def part_dir(self, plan: SavedPlan, unit: Unit) -> Path:
        """``parts/<unit id>``: the word counts of one file (``<task>.words`` and its record)."""
        return plan.parts_dir / unit.id

    def run_unit(self, plan: SavedPlan, unit: Unit, threads: int | None) -> dict[str, Any]:
        """Count one file's texts into its part."""
        kwargs = {**plan.options["train"], "threads": threads or plan.options["train"]["threads"]}
        options = _core_json(plan.options["inputs"], Path(plan.options["output"]), kwargs)
        started = time.time()
        part = self.part_dir(plan, unit)
        stored = json.loads(
            _core.train_count_unit(_without_trainer(options), unit.task, unit.source, str(part))
        )
        return unit_record(
            unit,
            started,
            rows=stored["report"]["rows"],
            texts=stored["report"]["texts_used"],
            words=stored["words"],
            pieces=stored["pieces"],
            outputs={p.name: sha256(p) for p in sorted(part.iterdir())},
        )

    def finalize(self, plan: SavedPlan, *, missing: list[Unit], progress: bool | None) -> Finalized:
        """Train from the units' counts; the files of ``missing`` units are counted here."""
        missing_ids = {u.id for u in missing}
        parts = [
            self.part_dir(plan, u)
            for u in plan.units
            if u.id not in missing_ids and self.part_dir(plan, u).is_dir()
        ]
        result = train_tokenizer(
            plan.options["inputs"],
            plan.options["output"],
            progress=progress,
            count_parts=parts,
            **plan.options["train"],
        )
        shutil.rmtree(plan.parts_dir, ignore_errors=True)
        counting = result.counting
        return Finalized(
            result,
            record={"counted_here": [] if counting is None else _counted_here(result)},
        )

    def report(self, result: TrainResult, *, quiet: bool) -> int:
        if not quiet:
            print_summary(result)
        return 0


def _counted_here(result: TrainResult) -> list[str]:
    """The files the finalize step counted itself (their units had not left counts)."""
    reused = set(result.counting.reused_files) if result.counting else set()
    return [f.task for f in result.files if f.task not in reused]


def _core_json(inputs: list[str], output: Path, kwargs: dict[str, Any]) -> dict[str, Any]:
    return core_options(inputs, output, {**kwargs, "progress": False})


def _without_trainer(options: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in options.items() if k != "trainer"})


STAGE = TrainTokenizerStage()
