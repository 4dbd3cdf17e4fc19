"""Assembling a scaled-out run's output: ``tokenize`` over the plan's inputs with the units'
parts, which writes every task folder, record and ``tokenizer_info.json`` exactly as one run on
one machine does (the parts are only where the encoded arrays come from)."""

from __future__ import annotations

import shutil
import time
from typing import Any

from data_io.errors import ConfigError
from data_io.fs import write_json_atomic
from data_io.scale.manifest import Manifest


def tokenize_kwargs(options: dict[str, Any]) -> dict[str, Any]:
    """``tokenize``'s keyword arguments from a plan's options (``tokenize_options``'s dict)."""
    kwargs = {k: v for k, v in options.items() if k not in ("inputs", "output", "parts")}
    kwargs["conditions"] = dict(tuple(pair) for pair in options["conditions"])
    return kwargs


def finalize(
    manifest: Manifest, *, encode_missing: bool = False, progress: bool | None = None
) -> Any:
    """Write the stage's output from the done units. Units not done make this an error, unless
    ``encode_missing``: their files are then encoded here, by this process. The parts are
    deleted once the output is complete."""
    from data_io.tokenize import tokenize

    if manifest.stage not in ("tokenize", "clean", "prepare"):
        raise ConfigError(f"{manifest.path}: cannot finalize stage {manifest.stage!r}")
    missing = manifest.not_done()
    if missing and not encode_missing:
        names = ", ".join(f"{u.id} ({u.task})" for u in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise ConfigError(
            f"{len(missing)} of {len(manifest.units)} units are not done: {names}{more}. Run "
            f"`data_io resume {manifest.path}` to run them, `data_io status {manifest.path}` "
            "to see why, or finalize with --encode-missing to encode their files here"
        )
    started = time.time()
    if manifest.stage == "clean":
        # Each cleaner committed its own outputs: nothing to assemble, only to record.
        records = [manifest.read_record(u.id, "done") or {} for u in manifest.units]
        summary = {
            "time": time.time(),
            "seconds": 0.0,
            "units": len(manifest.units),
            "rows": sum(r.get("rows", 0) for r in records),
            "outputs": sorted(p for r in records for p in r.get("outputs", {})),
        }
        write_json_atomic(manifest.root / "finalized.json", summary)
        return summary
    if manifest.stage == "prepare":
        from data_io.prepare.api import prepare

        result = prepare(
            manifest.options["inputs"],
            manifest.output,
            parts=manifest.parts_dir,
            progress=progress,
            **manifest.options["prepare"],
        )
        shutil.rmtree(manifest.parts_dir, ignore_errors=True)
        _record_finalized(manifest, started, missing, {})
        return result
    kwargs = tokenize_kwargs(manifest.options)
    if progress is not None:
        kwargs["progress"] = progress
    result = tokenize(
        manifest.options["inputs"],
        manifest.options["output"],
        parts=manifest.parts_dir,
        check=False,
        **kwargs,
    )
    if not result.failed:
        shutil.rmtree(manifest.parts_dir, ignore_errors=True)
    _record_finalized(manifest, started, missing, {"failed_files": [f.task for f in result.failed]})
    return result


def _record_finalized(
    manifest: Manifest, started: float, missing: list, extra: dict[str, Any]
) -> None:
    """``finalized.json``: when, how long, and which units' files this step encoded itself."""
    write_json_atomic(
        manifest.root / "finalized.json",
        {
            "time": time.time(),
            "seconds": time.time() - started,
            "units": len(manifest.units),
            "encoded_here": [u.id for u in missing],
            **extra,
        },
    )
