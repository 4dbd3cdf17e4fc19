"""Slurm emulated, for machines where ``slurmctld``/``slurmd`` cannot run (not root, not
installed): ``sbatch``, ``squeue``, ``scancel`` and ``scontrol`` shims on PATH that run the
generated script at once, once per array index, with the variables Slurm sets
(SLURM_ARRAY_TASK_ID, SLURM_ARRAY_JOB_ID, SLURM_JOB_ID, ...) and the ``--export`` ones, its
output in the ``#SBATCH --output`` file. Every sbatch call is recorded (``calls``), a held job
is recorded and not run. Jobs run in submission order, so a dependency is met by the time its
job is submitted. Used only by the tests; the real cluster is ``slurm_cluster``.

Run as a script, the first argument names the command: ``slurm_emulation.py sbatch ARGS``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

STATE_VARIABLE = "DATA_IO_FAKE_SLURM"
COMMANDS = ("sbatch", "squeue", "scancel", "scontrol")


class EmulatedCluster:
    kind = "emulated"

    def __init__(self, max_array_size: int) -> None:
        self.max_array_size = max_array_size
        self.folder = Path(tempfile.mkdtemp(prefix="data_io_fake_slurm_"))
        self.env: dict[str, str] = {}

    def start(self) -> EmulatedCluster:
        bin_dir = self.folder / "bin"
        bin_dir.mkdir()
        for command in COMMANDS:
            shim = bin_dir / command
            shim.write_text(f'#!/bin/sh\nexec {sys.executable} {__file__} {command} "$@"\n')
            shim.chmod(0o755)
        _save(self.folder, {"next_id": 1, "jobs": {}, "max_array_size": self.max_array_size})
        self.env = {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            STATE_VARIABLE: str(self.folder),
        }
        return self

    def calls(self) -> list[list[str]]:
        """The arguments of every sbatch call, in order."""
        state = _load(self.folder)
        return [job["args"] for job in state["jobs"].values()]

    def array_sizes(self, job_ids: list[str]) -> list[int]:
        jobs = _load(self.folder)["jobs"]
        return [len(jobs[job_id]["indices"]) for job_id in job_ids]

    def cancel(self, job_ids: list[str]) -> None:
        _scancel(self.folder, job_ids)

    def stop(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _load(folder: Path) -> dict:
    return json.loads((folder / "state.json").read_text())


def _save(folder: Path, state: dict) -> None:
    (folder / "state.json").write_text(json.dumps(state))


def _sbatch(folder: Path, args: list[str]) -> int:
    options = [a for a in args if a.startswith("-")]
    script = Path(next(a for a in args if not a.startswith("-")))
    given = dict(_option(a) for a in options)
    lines = script.read_text().splitlines()
    directives: dict[str, str] = {}
    for line in lines:
        if not line.startswith("#SBATCH"):
            continue
        arguments = _arguments(line.removeprefix("#SBATCH"))
        if len(arguments) == 2 and re.fullmatch(r"-[A-Za-z]", arguments[0]):
            arguments = [f"{arguments[0]}={arguments[1]}"]  # -t 10
        for argument in arguments:
            if not argument.startswith("-"):
                print(f"sbatch: error: Invalid directive found in batch script: {argument}",
                      file=sys.stderr)  # fmt: skip
                return 255
            directives.update([_option(argument)])
    settings = {**directives, **given}  # the command line wins, as in sbatch
    indices = [None]
    if "array" in settings:
        low, high = (int(x) for x in settings["array"].split("-"))
        state = _load(folder)
        if high >= state["max_array_size"]:
            print("sbatch: error: Batch job submission failed: Invalid job array specification",
                  file=sys.stderr)  # fmt: skip
            return 1
        indices = list(range(low, high + 1))
    state = _load(folder)
    job_id = str(state["next_id"])
    held = "hold" in settings
    state["next_id"] += len(indices) + 1  # task ids follow the array's, as in Slurm
    state["jobs"][job_id] = {
        "args": args, "indices": indices, "state": "PENDING" if held else "COMPLETED",
    }  # fmt: skip
    _save(folder, state)
    print(job_id)
    if held:
        return 0
    exports = {}
    for item in settings.get("export", "ALL").split(",")[1:]:
        key, _, value = item.partition("=")
        exports[key] = value
    for index in indices:
        env = {**os.environ, **exports, "SLURM_JOB_ID": job_id, "SLURM_SUBMIT_DIR": os.getcwd()}
        if index is not None:
            env |= {
                "SLURM_ARRAY_JOB_ID": job_id,
                "SLURM_ARRAY_TASK_ID": str(index),
                "SLURM_ARRAY_TASK_MIN": str(indices[0]),
                "SLURM_ARRAY_TASK_MAX": str(indices[-1]),
                "SLURM_ARRAY_TASK_COUNT": str(len(indices)),
                "SLURM_JOB_ID": str(int(job_id) + 1 + index),
            }
        if "cpus-per-task" in settings:
            env["SLURM_CPUS_PER_TASK"] = settings["cpus-per-task"]
        log = _log_path(settings.get("output", "slurm-%j.out"), job_id, index, env)
        with open(log, "ab") as out:
            subprocess.run(["bash", str(script)], env=env, stdout=out, stderr=out, check=False)
    return 0


def _arguments(line: str) -> list[str]:
    """The arguments of an #SBATCH line as sbatch reads them (``get_argument``): split at
    blanks outside quotes, ``'`` or ``"`` quoting, a backslash keeping the next character (but
    not a blank outside quotes), an unquoted ``#`` ending the line."""
    arguments: list[str] = []
    current: list[str] | None = None
    quote = None
    k = 0
    while k < len(line):
        char = line[k]
        if quote is None and char.isspace():
            if current is not None:
                arguments.append("".join(current))
            current = None
            k += 1
            continue
        if quote is None and char == "#":
            break
        current = [] if current is None else current
        if char == "\\" and k + 1 < len(line) and (quote or not line[k + 1].isspace()):
            current.append(line[k + 1])
            k += 2
            continue
        if char == "\\":
            k += 1
        elif quote is not None and char == quote:
            quote = None
            k += 1
        elif quote is None and char in "'\"":
            quote = char
            k += 1
        else:
            current.append(char)
            k += 1
    if quote is not None:
        raise SystemExit(f"sbatch: fatal: Unmatched `{quote}` in [{line}]")
    if current is not None:
        arguments.append("".join(current))
    return arguments


def _option(text: str) -> tuple[str, str]:
    key, _, value = text.strip().lstrip("-").partition("=")
    return key, value


def _log_path(pattern: str, job_id: str, index: int | None, env: dict[str, str]) -> str:
    values = {"A": job_id, "a": str(index), "j": env["SLURM_JOB_ID"], "%": "%"}
    return re.sub(r"%([Aaj%])", lambda m: values[m.group(1)], pattern)


def _squeue(folder: Path, args: list[str]) -> int:
    wanted = None
    for k, arg in enumerate(args):
        if arg == "-j":
            wanted = set(args[k + 1].split(","))
    for job_id, job in _load(folder)["jobs"].items():
        if job["state"] == "PENDING" and (wanted is None or job_id in wanted):
            print(job_id)
    return 0


def _scancel(folder: Path, job_ids: list[str]) -> int:
    state = _load(folder)
    for job_id in job_ids:
        if job_id in state["jobs"]:
            state["jobs"][job_id]["state"] = "CANCELLED"
    _save(folder, state)
    return 0


def _scontrol(folder: Path, args: list[str]) -> int:
    if args[:2] == ["show", "config"]:
        print(f"MaxArraySize            = {_load(folder)['max_array_size']}")
        return 0
    print(f"scontrol: emulated only for `show config`, not {args}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    state_folder = Path(os.environ[STATE_VARIABLE])
    command, arguments = sys.argv[1], sys.argv[2:]
    handlers = {"sbatch": _sbatch, "squeue": _squeue, "scancel": _scancel, "scontrol": _scontrol}
    sys.exit(handlers[command](state_folder, arguments))
