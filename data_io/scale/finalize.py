"""Assembling a scaled-out run's output: the stage's own finalize (``data_io.stage.Stage``), which
writes exactly what one run on one machine writes (the units' parts are only where the work comes
from), then ``finalized.json``: when, how long, and which units' work was done here."""

from __future__ import annotations

import time
from typing import Any

from data_io.errors import ConfigError
from data_io.scale.manifest import Manifest
from data_io.stage import load_stage, write_finalized


def finalize(
    manifest: Manifest, *, encode_missing: bool = False, progress: bool | None = None
) -> Any:
    """Write the stage's output from the done units. Units not done make this an error, unless
    ``encode_missing``: their work is then done here, by this process. The parts are deleted
    once the output is complete."""
    manifest.check_options()
    stage = load_stage(manifest.stage)
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
    done = stage.finalize(manifest, missing=missing, progress=progress)
    write_finalized(
        manifest.root,
        {
            "seconds": time.time() - started,
            "units": len(manifest.units),
            "encoded_here": [u.id for u in missing],
            **done.record,
        },
    )
    return done.result
