"""Progress output of a cleaner when stderr is not a terminal (a log file, a pipe): neither our
bar nor the bars of ``datasets`` / ``huggingface_hub`` are drawn, unless asked for; and the
caller's process is left as it was (a library call does not silence a notebook's bars)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GSM8K = ROOT / "data_io" / "example_data" / "raw" / "hub" / "openai" / "gsm8k"

# Runs one cleaner with stderr a pipe, then reports the switches of the Hub libraries after it.
_CHILD = """
import json, sys
from pathlib import Path
from data_io.cleaning.registry import find
from data_io.cleaning.runner import run_cleaner

progress = {"auto": None, "on": True, "off": False}[sys.argv[3]]
report = run_cleaner(find("gsm8k_train").cleaner, Path(sys.argv[1]), Path(sys.argv[2]),
                     progress=progress)
import datasets.utils, huggingface_hub.utils
print(json.dumps({
    "rows": report.rows_written,
    "datasets_off": datasets.utils.are_progress_bars_disabled(),
    "hub_off": huggingface_hub.utils.are_progress_bars_disabled(),
    "datasets_quiet": datasets.logging.get_verbosity() >= datasets.logging.ERROR,
}))
"""


def _clean(tmp_path: Path, progress: str, **env: str) -> tuple[dict, str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", **env}
    for name in ("HF_DATASETS_DISABLE_PROGRESS_BARS", "HF_HUB_DISABLE_PROGRESS_BARS",
                 "DATASETS_VERBOSITY"):  # fmt: skip
        if name not in env:
            environment.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(GSM8K), str(tmp_path / "out.jsonl"), progress],
        env=environment, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_no_bars_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    state, stderr = _clean(tmp_path, "auto")
    assert state["rows"] > 0
    assert "%|" not in stderr and "\r" not in stderr and "clean gsm8k_train" not in stderr
    assert "Generating" not in stderr
    # Scoped: afterwards the libraries are as the caller had them.
    assert not state["datasets_off"] and not state["hub_off"] and not state["datasets_quiet"]


def test_asked_for_bars_and_the_users_own_setting_are_kept(tmp_path: Path) -> None:
    state, stderr = _clean(tmp_path, "on")
    assert "clean gsm8k_train" in stderr  # our bar, forced onto the pipe
    assert not state["datasets_off"] and not state["hub_off"] and not state["datasets_quiet"]
    state, stderr = _clean(tmp_path, "off", HF_DATASETS_DISABLE_PROGRESS_BARS="1")
    assert state["datasets_off"], "the user's HF_DATASETS_DISABLE_PROGRESS_BARS=1 stays"
    assert "clean gsm8k_train" not in stderr
