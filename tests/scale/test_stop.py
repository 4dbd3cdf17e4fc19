"""A local-executor run stopped from outside: SIGTERM stops the workers and says how to resume,
SIGKILL takes the workers with it (no process of the run is left behind), and the next run
removes the temporaries that killed processes left in the plan's folder."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from data_io.scale import ExecutorSettings, Manifest, scale_tokenize
from data_io.scale.leftovers import remove_dead_temporaries
from data_io.scale.plan import plan_tokenize
from data_io.scale.processes import owner_gone, process_start_time
from data_io.scale.status import describe, status
from data_io.tokenize import tokenize, tokenize_options
from data_io.util.interrupt import ReportedInterrupt

from .inputs import ROOT, TOKENIZER, tree_bytes, write_inputs

# The runs' children get SIGINT as a terminal's children do (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("python_sigint")

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="reads /proc to find the run's processes"
)

# Loaded by every Python process of the run (PYTHONPATH): each unit sleeps before it starts,
# so that the run is surely in the middle of its units when it is signalled.
_SLOW_UNITS = """
import os, time
if os.environ.get("SLOW_UNIT_SECONDS"):
    from data_io.scale import units

    _real = units._run

    def _slow(*args, **kwargs):
        time.sleep(float(os.environ["SLOW_UNIT_SECONDS"]))
        return _real(*args, **kwargs)

    units._run = _slow
"""


def _dead_pid() -> int:
    """A pid no process has (a child that has ended and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _children(pid: int) -> set[int]:
    """The live processes whose parent is ``pid`` (from /proc; zombies count as ended)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid and fields[0] not in "ZX":
            found.add(int(entry.name))
    return found


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] not in "ZX"


def _descendants(pid: int) -> set[int]:
    found, frontier = set(), {pid}
    while frontier:
        children = set().union(*(_children(p) for p in frontier)) - found
        found |= children
        frontier = children
    return found


def _start_run(
    tmp_path: Path,
    workers: int = 2,
    executor: tuple[str, ...] = ("local",),
    *,
    new_session: bool = False,
) -> tuple[subprocess.Popen, Path]:
    """``data_io tokenize --executor local`` on many small files, each unit slowed to 30 s;
    returns once every worker has started a unit. Its output goes to files: a pipe would be
    held open by workers that outlive it, and reading it would wait for them."""
    inputs = tmp_path / "in"
    for k in range(8):
        (inputs / f"f{k}.jsonl").parent.mkdir(parents=True, exist_ok=True)
        rows = [
            {"condition": "direct", "instruction": f"q{k}.{i}", "response": "a"} for i in range(5)
        ]
        (inputs / f"f{k}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(_SLOW_UNITS)
    env = {
        **os.environ,
        "PYTHONPATH": f"{hooks}{os.pathsep}{ROOT}",
        "SLOW_UNIT_SECONDS": "30",
        "RAY_AUTH_MODE": "disabled",
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    env.pop("RAY_ADDRESS", None)
    out = tmp_path / "out"
    with open(tmp_path / "stdout", "w") as stdout, open(tmp_path / "stderr", "w") as stderr:
        run = subprocess.Popen(
            [sys.executable, "-m", "data_io", "tokenize", str(inputs), "-o", str(out),
             "--tokenizer-path", str(TOKENIZER), "--executor", *executor, "--workers",
             str(workers), "--threads-per-unit", "1"],
            env=env, stdout=stdout, stderr=stderr, start_new_session=new_session,
        )  # fmt: skip
    units = out / ".data_io_scale" / "units"
    deadline = time.monotonic() + 120
    while len(list(units.glob("*.started")) if units.is_dir() else []) < workers:
        assert run.poll() is None, (tmp_path / "stderr").read_text()
        assert time.monotonic() < deadline, "the workers never started their units"
        time.sleep(0.05)
    return run, out


def _workers_of(run: subprocess.Popen, out: Path) -> set[int]:
    """The run's worker processes: its children, and the pids its unit records name."""
    started = {
        json.loads(p.read_text())["pid"]
        for p in (out / ".data_io_scale" / "units").glob("*.started")
    }
    found = _children(run.pid) | started
    assert started and started <= found, (started, found)
    return found


def _wait_gone(pids: set[int], seconds: float = 10.0) -> set[int]:
    """The processes of ``pids`` still running after ``seconds``; they are then killed, so
    that a failing test leaves nothing behind either."""
    deadline = time.monotonic() + seconds
    while (alive := {pid for pid in pids if _running(pid)}) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in alive:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return alive


def test_sigterm_stops_the_workers_says_how_to_resume_and_exits_143(tmp_path: Path) -> None:
    run, out = _start_run(tmp_path)
    try:
        workers = _workers_of(run, out)
        run.send_signal(signal.SIGTERM)
        run.wait(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
    stderr = (tmp_path / "stderr").read_text()
    assert run.returncode == 128 + signal.SIGTERM, stderr
    assert _wait_gone(workers) == set(), "worker processes outlived the run"
    plan = out / ".data_io_scale" / "manifest.json"
    lines = [line for line in stderr.splitlines() if line.startswith("stopped by SIGTERM")]
    assert lines == [f"stopped by SIGTERM: 0 units done, 8 left; `data_io resume {plan}` continues"]
    assert "Traceback" not in stderr
    # The units it cut short say so in the plan (not "killed", as if a worker had died).
    manifest = Manifest.load(plan)
    failures = status(manifest).failed
    assert failures and all(
        f["error"] == "stopped by SIGTERM while it ran; `data_io resume` runs it again"
        for f in failures
    )
    # Nothing to fix: status says only how to go on (not "fix what the failed units name").
    hint = describe(manifest, status(manifest)).splitlines()[-1]
    assert hint == f"run what is left with `data_io resume {plan}`"
    # The command it names does continue the run.
    done = subprocess.run(
        [sys.executable, "-m", "data_io", "resume", str(plan), "--quiet"],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (out / "f0.jsonl" / "tokens.npy").is_file()


@pytest.mark.parametrize("slow", [True, False], ids=["workers-in-units", "workers-between-units"])
def test_ctrl_c_to_the_whole_group_stops_the_run_and_exits_130(tmp_path: Path, slow: bool) -> None:
    """A terminal's Ctrl-C reaches the workers too. One interrupted between units, inside the
    pool's queue, died holding its lock, and the run, having said "interrupted", then waited
    forever at exit (many quick units keep the workers there often)."""
    if slow:
        run, out = _start_run(tmp_path, new_session=True)
    else:
        inputs = tmp_path / "in"
        inputs.mkdir()
        for k in range(3000):
            row = {"condition": "direct", "instruction": f"q{k}", "response": "a"}
            (inputs / f"f{k:04d}.jsonl").write_text(json.dumps(row) + "\n")
        out = tmp_path / "out"
        with open(tmp_path / "stderr", "w") as stderr:
            run = subprocess.Popen(
                [sys.executable, "-m", "data_io", "tokenize", str(inputs), "-o", str(out),
                 "--tokenizer-path", str(TOKENIZER), "--executor", "local", "--workers", "2",
                 "--threads-per-unit", "1", "--unit-mb", "1"],
                env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                stderr=stderr, start_new_session=True,
            )  # fmt: skip
        units = out / ".data_io_scale" / "units"
        deadline = time.monotonic() + 120
        while len(list(units.glob("*.done")) if units.is_dir() else []) < 20:
            assert run.poll() is None, (tmp_path / "stderr").read_text()
            assert time.monotonic() < deadline, "no unit finished"
            time.sleep(0.02)
    try:
        workers = _workers_of(run, out)
        os.killpg(run.pid, signal.SIGINT)  # as a terminal sends it: to the process group
        run.wait(timeout=60)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    stderr = (tmp_path / "stderr").read_text()
    assert run.returncode == 130, stderr
    assert _wait_gone(workers) == set(), "worker processes outlived the run"
    assert re.search(r"stopped by Ctrl-C: \d+ units done, \d+ left", stderr), stderr
    assert "Traceback" not in stderr
    # One message: the command line adds no "data_io tokenize: interrupted" below it.
    assert "interrupted" not in stderr, stderr
    if not slow:
        return
    # Nothing a reader would take as finished; status says where it stands, and resume
    # finishes it as one plain run writes it.
    assert sorted(p.name for p in out.iterdir()) == [".data_io_scale"]
    plan = out / ".data_io_scale" / "manifest.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    said = subprocess.run([sys.executable, "-m", "data_io", "status", str(out)], env=env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert "stopped by Ctrl-C while it ran" in said.stdout, said.stdout + said.stderr
    assert said.stdout.splitlines()[-1] == f"run what is left with `data_io resume {plan}`"
    done = subprocess.run([sys.executable, "-m", "data_io", "resume", str(out), "--quiet"],
                          env=env, capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    tokenize([tmp_path / "in"], tmp_path / "plain", tokenizer_path=TOKENIZER, progress=False)
    assert tree_bytes(out) == tree_bytes(tmp_path / "plain")


def test_sigkill_takes_the_workers_with_it(tmp_path: Path) -> None:
    run, out = _start_run(tmp_path)
    try:
        workers = _workers_of(run, out)
        run.kill()
        run.wait(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
    assert _wait_gone(workers) == set(), "worker processes outlived the killed run"
    # The plan says where the run stands: the killed units are failed ("killed"), none done.
    manifest = Manifest.load(out)
    assert not any(state == "done" for state in manifest.states().values())


# Ray's own agents: after a SIGKILL of the driver they notice their raylet is gone at once but
# then spend Ray's GCS reconnect timeout (60 s) trying to report it before they exit.
_RAY_AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_ray_cluster_started_here_goes_with_the_run(tmp_path: Path, sig: int) -> None:
    """--executor ray without an address starts a local cluster: its processes (and the
    workers running units) must not outlive the run, however it is stopped."""
    pytest.importorskip("ray")
    run, out = _start_run(tmp_path, workers=1, executor=("ray",))
    try:
        processes = _descendants(run.pid)
        commands = {pid: _command(pid) for pid in processes}
        assert any("data_io unit" in c for c in commands.values()), "no unit is running"
        run.send_signal(sig)
        run.wait(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    agents = {pid for pid, c in commands.items() if c.startswith(_RAY_AGENTS)}
    if sig == signal.SIGKILL:  # Ray's agents are Ray's to end (about a minute later)
        processes -= agents
    try:
        assert _wait_gone(processes, 30) == set(), "processes of the Ray cluster outlived the run"
    finally:
        _wait_gone(agents, 0)
    if sig == signal.SIGTERM:
        stderr = (tmp_path / "stderr").read_text()
        assert run.returncode == 128 + signal.SIGTERM, stderr
        plan = out / ".data_io_scale" / "manifest.json"
        assert f"units done, 8 left; `data_io resume {plan}` continues" in stderr


def test_slurm_wait_stopped_by_sigterm_says_the_jobs_run_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Slurm runs nothing here: stopping ``--wait`` leaves the jobs to the cluster, and says
    so (SIGTERM used to end the command without a word)."""
    from data_io.scale import run, slurm

    manifest = _planned(tmp_path, kind="slurm")
    submission = slurm.Submission(
        number=1, folder=tmp_path / "submissions" / "1", manifest=manifest.path, units=3,
        chunks=[{"job_id": "41", "offset": 0, "count": 3}], finalize_job="42",
    )  # fmt: skip
    monkeypatch.setattr(slurm, "submit_slurm", lambda *_args: submission)

    def wait(_submission: object) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)  # interrupted by the signal at once
        raise AssertionError("SIGTERM did not stop the wait")

    monkeypatch.setattr(slurm, "wait_slurm", wait)
    settings = ExecutorSettings(kind="slurm", slurm_wait=True)
    before = signal.getsignal(signal.SIGTERM)
    started = time.monotonic()
    with pytest.raises(SystemExit) as stopped:
        run.execute(manifest, manifest.units, settings, progress=False)
    assert stopped.value.code == 128 + signal.SIGTERM and time.monotonic() - started < 10
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"stopped by SIGTERM while waiting: the jobs of {submission.folder} run on (scancel 41 "
        f"42 stops them); follow them with `data_io status {manifest.path}`"
    )
    assert signal.getsignal(signal.SIGTERM) is before, "the handler is put back"


# -- temporaries of killed processes ------------------------------------------------------------
def _planned(tmp_path: Path, kind: str = "local") -> Manifest:
    inputs = write_inputs(tmp_path / "in")
    options = tokenize_options([inputs], tmp_path / "out", tokenizer_path=TOKENIZER)
    manifest = plan_tokenize(options, int(0.1 * (1 << 20)))
    manifest.executor = {"kind": kind}
    manifest.save()
    return manifest


def _temporary(folder: Path, name: str, size: int = 1000, mtime: float | None = None) -> Path:
    path = folder / name
    path.mkdir(parents=True)
    (path / "tokens.npy").write_bytes(b"\0" * size)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def test_dead_temporaries_go_live_and_foreign_ones_stay(tmp_path: Path) -> None:
    manifest = _planned(tmp_path)
    unit = manifest.units[0]
    task_parts = manifest.parts_dir / unit.task
    dead = _dead_pid()
    gone = _temporary(task_parts, f".tmp-{unit.index}-{dead}-77", size=5000)
    record = manifest.units_dir / f".{unit.id}.done.{dead}.tmp"
    record.write_text("{")
    live = _temporary(task_parts, f".tmp-{unit.index}-{os.getpid()}-78")
    # A pid taken since by another process (started after the temporary was last written).
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        reused = _temporary(task_parts, f".tmp-{unit.index}-{sleeper.pid}-79", mtime=1e9)
        assert process_start_time(sleeper.pid) is not None
        removed = remove_dead_temporaries(manifest)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert sorted(item.path for item in removed) == sorted([gone, record, reused])
    assert not gone.exists() and not record.exists() and not reused.exists()
    assert live.is_dir() and (live / "tokens.npy").is_file()
    assert {item.pid for item in removed} == {dead, sleeper.pid}
    assert sum(item.size for item in removed) == 5000 + 1 + 1000


def test_temporaries_of_other_hosts_stay(tmp_path: Path) -> None:
    """On Ray or Slurm a unit runs on another node: its pid means nothing here."""
    manifest = _planned(tmp_path, kind="slurm")
    unit = manifest.units[0]
    dead = _dead_pid()
    manifest.write_record(unit.id, "started", {"unit": unit.id, "host": "node-7", "pid": dead,
                                               "attempt": 1, "time": time.time()})  # fmt: skip
    elsewhere = _temporary(manifest.parts_dir / unit.task, f".tmp-{unit.index}-{dead}-1")
    unknown = _temporary(manifest.parts_dir / unit.task, f".tmp-{unit.index}-{dead + 1}-1")
    other = manifest.units[1]
    manifest.write_record(other.id, "started", {"unit": other.id, "host": socket.gethostname(),
                                                "pid": dead, "attempt": 1, "time": time.time()})  # fmt: skip
    here = _temporary(manifest.parts_dir / other.task, f".tmp-{other.index}-{dead}-1")
    assert [item.path for item in remove_dead_temporaries(manifest)] == [here]
    assert elsewhere.is_dir() and unknown.is_dir() and not here.exists()


def test_a_run_removes_them_and_says_so(tmp_path: Path, capsys) -> None:
    inputs = write_inputs(tmp_path / "in")
    out = tmp_path / "out"
    dead = _dead_pid()
    # Where a killed unit of the plan below would have left its part.
    leftover = _temporary(out / ".data_io_scale" / "parts" / "small.jsonl", f".tmp-0-{dead}-5",
                          size=3 << 20)  # fmt: skip
    settings = ExecutorSettings(kind="local", workers=1, threads_per_unit=1)
    opts = tokenize_options([inputs], out, tokenizer_path=TOKENIZER, progress=False)
    outcome = scale_tokenize(opts, settings, unit_mb=0.1, progress=False)
    assert outcome.unfinished == [] and not leftover.exists()
    lines = [line for line in capsys.readouterr().err.splitlines() if "removed" in line]
    assert lines == [
        f"removed 1 temporary folder left by a killed run (pid {dead}, 3.0 MiB): {leftover}"
    ]


def test_owner_gone_rules() -> None:
    assert not owner_gone(os.getpid(), 0.0), "this process is never gone"
    assert owner_gone(_dead_pid(), time.time())
    assert not owner_gone(os.getppid(), time.time()), "alive, started before the write"
    assert owner_gone(os.getppid(), 1e9) or process_start_time(os.getppid()) is None


def test_ctrl_c_while_finalizing_says_how_to_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C after the units, while finalize assembles the output: the run said only
    "interrupted"; it says the units are done and which command finishes."""
    from data_io.scale import run

    manifest = _planned(tmp_path)

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "finalize", interrupted)
    with pytest.raises(ReportedInterrupt) as stopped:  # a KeyboardInterrupt, said already
        run.execute(manifest, [], ExecutorSettings(kind="local"), progress=False)
    said = (
        f"stopped by Ctrl-C while finalizing: {len(manifest.units)} units done; "
        f"`data_io resume {manifest.path}` finalizes"
    )
    assert capsys.readouterr().err.splitlines()[-1] == said == str(stopped.value)


def test_the_command_line_adds_interrupted_only_where_nothing_was_said(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A scaled-out run stopped by Ctrl-C says where it stands and how to go on: the command
    line then printed "data_io tokenize: interrupted" too. A plain Ctrl-C still gets it."""
    from data_io import cli

    for interrupt, said in [(ReportedInterrupt("stopped by Ctrl-C: ..."), ""),
                            (KeyboardInterrupt(), "data_io status: interrupted\n")]:  # fmt: skip

        def stage_run(_args: object, interrupt: BaseException = interrupt) -> int:
            raise interrupt

        monkeypatch.setattr(cli, "_stage_run", stage_run)
        assert cli.main(["status", "nowhere"]) == 130
        assert capsys.readouterr().err == said


def test_status_of_a_stopped_run_promises_no_time_left(tmp_path: Path) -> None:
    """A run stopped with units left: nothing runs, so no "about 4 s left" (status said so
    as if work went on); it says nothing runs, and its last line how to go on. While a unit
    runs, the estimate is there."""
    from data_io.scale.units import record_failure, run_unit

    manifest = _planned(tmp_path)
    first, cut, *_ = manifest.units
    run_unit(manifest, first.id, threads=1)
    here = socket.gethostname()
    manifest.write_record(cut.id, "started", {"unit": cut.id, "host": here, "pid": _dead_pid(),
                                              "attempt": 1, "time": time.time()})  # fmt: skip
    record_failure(manifest, cut, "stopped by SIGTERM while it ran; `data_io resume` runs it "
                   "again", "Stopped", here, 1)  # fmt: skip
    report = status(manifest)
    assert report.counts["running"] == 0 and report.counts["pending"] > 0 and report.throughput
    lines = describe(manifest, report).splitlines()
    throughput = next(line for line in lines if line.startswith("throughput:"))
    assert " left" not in throughput and throughput.endswith("; nothing is running now")
    assert lines[-1] == f"run what is left with `data_io resume {manifest.path}`"
    # A unit running (its process alive on this host): the estimate is back.
    running = manifest.units[2]
    manifest.write_record(running.id, "started", {"unit": running.id, "host": here,
                                                  "pid": os.getpid(), "attempt": 1,
                                                  "time": time.time()})  # fmt: skip
    report = status(manifest)
    assert report.counts["running"] == 1
    throughput = next(line for line in describe(manifest, report).splitlines()
                      if line.startswith("throughput:"))  # fmt: skip
    assert re.fullmatch(r"throughput: [\d.,]+ MB/s, about \d+ (s|min) left", throughput), throughput


# Loaded by every Python process of the run (PYTHONPATH): finalize waits before it starts, and
# says when it does (a file), so that the run is surely finalizing when it is signalled.
_SLOW_FINALIZE = """
import os, pathlib, time
if os.environ.get("FINALIZE_MARK"):
    from data_io.scale import run

    _real = run.finalize

    def _slow(*args, **kwargs):
        pathlib.Path(os.environ["FINALIZE_MARK"]).touch()
        time.sleep(30)
        return _real(*args, **kwargs)

    run.finalize = _slow
"""


def test_sigterm_while_finalizing_says_how_to_finish_and_exits_143(tmp_path: Path) -> None:
    """All units done, the output being assembled: SIGTERM ended the process without a word
    (no handler was set any more). It unwinds as Ctrl-C does, says which command finishes,
    and exits 143; that command does."""
    inputs = write_inputs(tmp_path / "in")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(_SLOW_FINALIZE)
    mark, out = tmp_path / "finalizing", tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": f"{hooks}{os.pathsep}{ROOT}", "FINALIZE_MARK": str(mark)}
    with open(tmp_path / "stderr", "w") as stderr:
        run = subprocess.Popen(
            [sys.executable, "-m", "data_io", "tokenize", str(inputs), "-o", str(out),
             "--tokenizer-path", str(TOKENIZER), "--executor", "local", "--workers", "1",
             "--threads-per-unit", "1", "--unit-mb", "0.1"],
            env=env, stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not mark.exists():
            assert run.poll() is None, (tmp_path / "stderr").read_text()
            assert time.monotonic() < deadline, "finalize never started"
            time.sleep(0.05)
        run.send_signal(signal.SIGTERM)
        run.wait(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    stderr = (tmp_path / "stderr").read_text()
    assert run.returncode == 128 + signal.SIGTERM, stderr
    manifest = Manifest.load(out)
    assert all(state == "done" for state in manifest.states().values())
    assert stderr.splitlines()[-1] == (
        f"stopped by SIGTERM while finalizing: {len(manifest.units)} units done; "
        f"`data_io resume {manifest.path}` finalizes"
    ), stderr
    assert "Traceback" not in stderr
    assert sorted(p.name for p in out.iterdir()) == [".data_io_scale"]
    done = subprocess.run([sys.executable, "-m", "data_io", "resume", str(out), "--quiet"],
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    tokenize([inputs], tmp_path / "plain", tokenizer_path=TOKENIZER, progress=False)
    assert tree_bytes(out) == tree_bytes(tmp_path / "plain")


def test_sigterm_during_scale_finalize_names_the_command_that_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``data_io scale finalize`` (what a Slurm finalize job runs: its time limit sends
    SIGTERM) says the same, naming itself, and puts the SIGTERM handler back."""
    from data_io import cli
    from data_io.scale import run

    manifest = _planned(tmp_path)

    def terminated(*_args: object, **_kwargs: object) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)  # interrupted by the signal at once
        raise AssertionError("SIGTERM did not stop finalize")

    monkeypatch.setattr(run, "finalize", terminated)
    before = signal.getsignal(signal.SIGTERM)
    started = time.monotonic()
    with pytest.raises(SystemExit) as stopped:
        cli.main(["scale", "finalize", str(manifest.path), "--encode-missing"])
    assert stopped.value.code == 128 + signal.SIGTERM and time.monotonic() - started < 10
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"stopped by SIGTERM while finalizing: 0 units done; `data_io scale finalize "
        f"{manifest.path} --encode-missing` finalizes"
    )
    assert signal.getsignal(signal.SIGTERM) is before, "the handler is put back"


def test_sigterm_raises_once_lets_the_unwinding_finish() -> None:
    """While finalize rolls back after a SIGTERM, a second one is ignored (it would cut the
    rollback short); out of the block, SIGTERM is what it was."""
    from data_io.scale.processes import Stopped, sigterm_raises

    before = signal.getsignal(signal.SIGTERM)
    unwound = False
    with pytest.raises(Stopped), sigterm_raises(once=True):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # a second one, while unwinding
            time.sleep(0.2)
            unwound = True
    assert unwound
    assert signal.getsignal(signal.SIGTERM) is before
