"""One measurement of a given build of data_io, in a process of its own: the build's checkout
first on ``PYTHONPATH``, the encoder's pool sized by ``RAYON_NUM_THREADS``, the child's
report the last line of its output (JSON). For the benchmarks that alternate two builds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def run_child(
    script: str | Path,
    build: Path,
    spec: dict,
    threads: int,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> dict:
    """``python SCRIPT --child SPEC`` with ``build`` first on the path; its report."""
    environment = {
        **os.environ,
        "RAYON_NUM_THREADS": str(threads),
        "OPENBLAS_NUM_THREADS": "1",
        # The build first; what else the caller's path holds (packages installed beside) after.
        "PYTHONPATH": os.pathsep.join(filter(None, [str(build), os.environ.get("PYTHONPATH")])),
        **(env or {}),
    }
    done = subprocess.run(
        [sys.executable, str(Path(script).resolve()), "--child", json.dumps(spec)],
        env=environment,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{build}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
