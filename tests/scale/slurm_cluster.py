"""A throwaway Slurm cluster on localhost for the tests: ``slurmctld`` and ``slurmd`` of
Debian's ``slurm-wlm``, in a fresh folder with its own config and free ports, no munge
(``auth/none``) and no accounting database. Needs root (the daemons switch users) and the
daemons on PATH; ``available()`` says whether both hold.

Both this and the emulation (``slurm_emulation``) offer the same small interface to the tests:
``env`` (what the clients need in the environment), ``array_sizes`` and ``cancel``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

CONFIG = """\
ClusterName=dataio
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmctldPort={controller_port}
SlurmdPort={node_port}
AuthType=auth/none
CredType=cred/none
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,default_queue_depth=1000
DependencyParameters=kill_invalid_depend
MaxArraySize={max_array_size}
MaxJobCount=100000
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={d}/log/jobcomp.txt
InactiveLimit=0
MinJobAge=3600
KillWait=5
Waittime=0
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""
CLIENT_TIMEOUT = 30


def available() -> bool:
    return (
        os.geteuid() == 0
        and all(shutil.which(name) for name in ("slurmctld", "slurmd", "sbatch", "squeue"))
        and os.environ.get("DATA_IO_SLURM_EMULATE") != "1"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalCluster:
    kind = "real"

    def __init__(self, max_array_size: int) -> None:
        self.max_array_size = max_array_size
        self.folder = Path(tempfile.mkdtemp(prefix="data_io_slurm_"))
        self.config = self.folder / "slurm.conf"
        self.env = {"SLURM_CONF": str(self.config)}
        self.daemons: list[subprocess.Popen] = []

    def start(self, ready_within: float = 60) -> LocalCluster:
        d = self.folder
        for sub in ("state", "spool", "log"):
            (d / sub).mkdir()
        self.config.write_text(
            CONFIG.format(
                d=d,
                controller_port=_free_port(),
                node_port=_free_port(),
                max_array_size=self.max_array_size,
                cpus=os.cpu_count() or 1,
            )
        )
        env = {**os.environ, **self.env}
        for command in (
            ["slurmctld", "-D", "-i", "-f", str(self.config)],
            ["slurmd", "-D", "-N", "localhost", "-f", str(self.config)],
        ):
            with open(d / "log" / f"{command[0]}.out", "wb") as log:
                self.daemons.append(
                    subprocess.Popen(
                        command,
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,  # its own group: stopped as one, never by name
                    )
                )
        deadline = time.monotonic() + ready_within
        while self.client("sinfo", "-h", "-o", "%T").stdout.strip() != "idle":
            dead = [p.args[0] for p in self.daemons if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = self.logs()
                self.stop()
                raise RuntimeError(f"the localhost Slurm cluster did not start ({dead}):\n{logs}")
            time.sleep(0.1)
        return self

    def client(self, *command: str) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(
                command, env={**os.environ, **self.env}, capture_output=True, text=True,
                timeout=CLIENT_TIMEOUT,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(command, 124, "", "timed out")

    def logs(self) -> str:
        return "\n".join(
            f"== {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted((self.folder / "log").glob("*"))
        )

    def array_sizes(self, job_ids: list[str]) -> list[int]:
        """The number of tasks of each array job, as the controller holds it."""
        sizes = []
        for job_id in job_ids:
            shown = self.client("scontrol", "-o", "show", "job", job_id).stdout
            tasks = {
                word.split("=", 1)[1]
                for line in shown.splitlines()
                for word in line.split()
                if word.startswith("ArrayTaskId=")
            }
            sizes.append(sum(_count(spec) for spec in tasks))
        return sizes

    def cancel(self, job_ids: list[str]) -> None:
        self.client("scancel", *job_ids)

    def stop(self) -> None:
        """Cancel every job, shut the controller down, then end what is left of the daemons'
        process groups (slurmd may need SIGKILL); the folder goes with them."""
        self.client("scancel", "--full", "--user=root")
        deadline = time.monotonic() + 20
        while self.client("squeue", "-h").stdout.strip() and time.monotonic() < deadline:
            time.sleep(0.2)
        self.client("scontrol", "shutdown")
        for daemon in self.daemons:
            with contextlib.suppress(subprocess.TimeoutExpired):
                daemon.wait(timeout=10)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(daemon.pid, signal.SIGKILL)
            daemon.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def _count(spec: str) -> int:
    """Tasks in an ArrayTaskId spec: ``0-1498``, ``3,5-7`` or ``0-99%4``."""
    total = 0
    for part in spec.split("%")[0].split(","):
        low, _, high = part.partition("-")
        total += int(high or low) - int(low) + 1
    return total
