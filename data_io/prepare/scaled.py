"""``prepare`` as a scale-out stage (``data_io.stage.Stage``): pass 1 of each new source (read,
clean, hash, encode) as one unit; the finalize step is ``prepare`` itself, which takes each
source's pass 1 from its part and then de-duplicates, splits and writes the shards exactly as one
run on one machine does.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any, ClassVar

from data_io.errors import ConfigError
from data_io.formats.raw_text import expand_inputs
from data_io.prepare.api import (
    PrepareResult,
    plan_run,
    prepare,
    read_and_clean_options,
    source_identity,
)
from data_io.prepare.parts import write_part
from data_io.prepare.pipeline import encoder_threads
from data_io.prepare.state import exclusive
from data_io.prepare.summary import print_summary
from data_io.prepare.tokenizers import load_tokenizer
from data_io.stage import Finalized, Plan, SavedPlan, Unit, numbered, planned_options, unit_record
from data_io.util.fs import sha256


class PrepareStage:
    name: ClassVar[str] = "prepare"

    def plan(self, request: dict[str, Any], *, unit_bytes: int = 0) -> Plan:
        """``request``: ``inputs``, ``output`` and ``prepare`` (``prepare``'s keyword
        arguments). One unit per source not prepared yet, largest first; ``unit_bytes`` is not
        used (a source's pass 1 is one unit)."""
        kwargs = planned_options(
            prepare, request.get("prepare", {}), stage="prepare", leave_out=("progress", "parts")
        )
        out = Path(request["output"]).expanduser().resolve()
        # Local paths absolute (units run anywhere); anything else is a Hub id.
        inputs = [str(Path(p).resolve()) if Path(p).exists() else str(p) for p in request["inputs"]]
        with exclusive(out):
            plan = plan_run(inputs, out, **kwargs)
        if plan.options["dedup"] in ("near", "line"):
            mode = plan.options["dedup"]
            keeps = "its MinHash bands" if mode == "near" else "its lines' hashes"
            raise ConfigError(
                f"--dedup {mode} is not scaled out yet (a unit's part keeps each document's "
                f"hash, not {keeps}): prepare without --executor, or with --dedup doc"
            )
        if plan.tok.kind == "char":
            raise ConfigError(
                "--tokenizer char builds its vocabulary from the inputs in their order, so its "
                "units cannot run apart: prepare without --executor"
            )
        units = [
            Unit(
                id="",
                task=source.name,
                source=source.name,
                span={"kind": "whole"},
                index=0,
                count=1,
                bytes=source.size,
            )
            for source, _ in plan.new
        ]
        units.sort(key=lambda u: (-u.bytes, u.task))
        return Plan(
            stage=self.name,
            output=str(out),
            options={"inputs": inputs, "prepare": kwargs, "run": plan.options},
            units=numbered(units),
            inputs=[entry for _, entry in plan.new],
            fingerprint={"tokenizer": plan.options["tokenizer"]},
            unit_bytes=0,
        )

    def part_dir(self, plan: SavedPlan, unit: Unit) -> Path:
        """``parts/<unit id>``: pass 1 of one source (``prepare.parts``)."""
        return plan.parts_dir / unit.id

    def run_unit(self, plan: SavedPlan, unit: Unit, threads: int | None) -> dict[str, Any]:
        """Pass 1 of one source into its part (``prepare.parts``)."""
        kwargs = plan.options["prepare"]
        read, clean = read_and_clean_options(**kwargs)
        sources, _ = expand_inputs([unit.source], read)
        source = next((s for s in sources if s.name == unit.source), None)
        if source is None:
            raise ConfigError(f"{unit.source}: not an input any more; plan again")
        tok = load_tokenizer(kwargs["tokenizer"], kwargs["eos_token"], Path(plan.output))
        if tok.fingerprint() != plan.options["run"]["tokenizer"]:
            raise ConfigError(f"{plan.path}: the tokenizer changed since the plan; plan again")
        started = time.time()
        part = self.part_dir(plan, unit)
        with encoder_threads(threads or kwargs.get("threads")):
            record = write_part(
                source,
                read,
                clean,
                tok,
                part,
                {"source": source_identity(source, None), "options": plan.options["run"]},
            )
        return unit_record(
            unit,
            started,
            rows=record["documents"],
            tokens=record["tokens"],
            outputs={p.name: sha256(p) for p in sorted(part.iterdir())},
        )

    def finalize(self, plan: SavedPlan, *, missing: list[Unit], progress: bool | None) -> Finalized:
        result = prepare(
            plan.options["inputs"],
            plan.output,
            parts=plan.parts_dir,
            progress=progress,
            **plan.options["prepare"],
        )
        shutil.rmtree(plan.parts_dir, ignore_errors=True)
        return Finalized(result)

    def report(self, result: PrepareResult, *, quiet: bool) -> int:
        if not quiet:
            print_summary(result)
        return 0


STAGE = PrepareStage()
