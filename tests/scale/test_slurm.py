"""The Slurm executor end to end: job arrays of units and a dependent finalize job give an output
byte-identical to one run; a unit killed with SIGKILL is resubmitted alone by ``data_io resume``
and leaves no trace; a failed unit's record names its file and line; 5,000 units go out in
arrays under MaxArraySize.

Where ``slurmctld`` and ``slurmd`` run (root, Debian's slurm-wlm installed: CI installs it with
``make slurm``) the tests use a real cluster on localhost; elsewhere an emulation that runs the
generated scripts once per array index with Slurm's variables set (``slurm_emulation``). The
first line of the run's output says which (``-rA`` shows it in the summary).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from data_io.cli import main
from data_io.scale import slurm
from data_io.scale.manifest import Manifest, Unit
from data_io.scale.slurm import SlurmError, SlurmOptions, Submission, submit_slurm, wait_slurm
from data_io.scale.status import describe, status
from data_io.tokenize import tokenize
from data_io.tokenizer.train import train_tokenizer

from . import slurm_cluster
from .inputs import TOKENIZER, rows, tree_bytes, write_inputs, write_jsonl
from .slurm_emulation import EmulatedCluster

# Small on purpose: 5,000 units must need several arrays (1,499 tasks at most each).
MAX_ARRAY_SIZE = 1500
WAIT = 180


@pytest.fixture(scope="session")
def slurm_cluster_session():
    """A localhost Slurm cluster for the session (real when it can run here, else emulated),
    stopped after it with every job and daemon."""
    if slurm_cluster.available():
        cluster = slurm_cluster.LocalCluster(MAX_ARRAY_SIZE).start()
    else:
        cluster = EmulatedCluster(MAX_ARRAY_SIZE).start()
    print(f"\nSlurm tests on a {cluster.kind} cluster")
    yield cluster
    cluster.stop()


@pytest.fixture()
def slurm_env(slurm_cluster_session, monkeypatch):
    """The cluster, with the clients' environment (SLURM_CONF, or the emulation's PATH) set."""
    for key, value in slurm_cluster_session.env.items():
        monkeypatch.setenv(key, value)
    return slurm_cluster_session


def _tokenize_args(inputs: Path, out: Path, unit_mb: float, *extra: str) -> list[str]:
    return ["tokenize", str(inputs), "-o", str(out), "--tokenizer-path", str(TOKENIZER),
            "--executor", "slurm", "--unit-mb", str(unit_mb), "-q", *extra]  # fmt: skip


def _local(inputs: Path, out: Path, **options) -> dict[str, bytes]:
    tokenize([inputs], out, tokenizer_path=TOKENIZER, progress=False, check=False, **options)
    return tree_bytes(out)


def _submission(manifest: Manifest, number: int) -> Submission:
    return Submission.load(manifest.root / "submissions" / str(number))


def test_tokenize_on_slurm_is_byte_identical_to_one_run(slurm_env, tmp_path, monkeypatch):
    inputs = write_inputs(tmp_path / "in")
    out = tmp_path / "out"
    # Arrays of 3 tasks: the 7 units need three, so each array's offset into units.txt counts.
    monkeypatch.setattr(slurm, "read_max_array_size", lambda: 4)
    args = _tokenize_args(inputs, out, 0.2, "--wait", "--slurm-opt", "job-name=dio-test")
    assert main(args) == 0
    assert tree_bytes(out) == _local(inputs, tmp_path / "local")

    manifest = Manifest.load(out)
    assert len(manifest.units) == 7
    assert status(manifest).finalized
    submission = _submission(manifest, 1)
    assert [c["count"] for c in submission.chunks] == [3, 3, 1]
    assert [c["offset"] for c in submission.chunks] == [0, 3, 6]
    listed = (submission.folder / "units.txt").read_text().split()
    assert listed == [u.id for u in sorted(manifest.units, key=lambda u: -u.bytes)]
    for unit in manifest.units:  # every unit ran once: no array index was run twice or missed
        assert manifest.read_record(unit.id, "done")["attempt"] == 1
    script = (submission.folder / "array.sbatch").read_text()
    assert "#SBATCH --job-name=dio-test\n" in script and "#SBATCH --cpus-per-task=1\n" in script
    assert "--list" in script and "DATA_IO_UNIT_THREADS" in script
    assert (
        "#SBATCH --job-name=dio-test-finalize\n"
        in (submission.folder / "finalize.sbatch").read_text()
    )
    assert len(list((submission.folder / "logs").glob("unit-*.log"))) == 7
    recorded = manifest.executor["slurm_submissions"]
    assert recorded[0]["array_jobs"] == submission.array_jobs
    assert recorded[0]["finalize_job"] == submission.finalize_job


def test_paths_and_option_values_with_spaces_hashes_and_percents(slurm_env, tmp_path):
    """sbatch splits an #SBATCH line at blanks, ends it at a `#` and expands `%` in log
    names: a folder named so put the logs elsewhere (or nowhere), and a value with a blank
    lost its end."""
    inputs = write_inputs(tmp_path / "in")
    out = tmp_path / "my run #1 at 100%A" / "out"
    args = _tokenize_args(inputs, out, 0.2, "--wait", "--slurm-opt", "comment=a b # c")
    assert main(args) == 0
    assert tree_bytes(out) == _local(inputs, tmp_path / "local")
    submission = _submission(Manifest.load(out), 1)
    logs = sorted(p.name for p in (submission.folder / "logs").iterdir())
    assert len([n for n in logs if n.startswith("unit-")]) == 7
    assert len([n for n in logs if n.startswith("finalize-")]) == 1
    script = (submission.folder / "array.sbatch").read_text()
    assert '#SBATCH --comment="a b # c"\n' in script
    assert '#SBATCH --output="' + str(tmp_path) + "/my run #1 at 100%%A/out/" in script


def _kill_the_first_unit_midway(parts: Path, killed: list[int], deadline: float) -> None:
    """SIGKILL the process of the first unit seen writing its part (``.tmp-<index>-<pid>-*``
    with encoded tokens in it)."""
    while time.monotonic() < deadline:
        for tmp in parts.glob("*/.tmp-*"):
            try:
                writing = any(f.stat().st_size for f in tmp.glob("*.npy"))
            except OSError:  # renamed into place meanwhile
                continue
            if writing:
                pid = int(tmp.name.split("-")[2])
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
        time.sleep(0.005)


def test_a_unit_killed_midway_is_resubmitted_alone_and_leaves_no_trace(slurm_env, tmp_path):
    inputs = tmp_path / "in"
    write_jsonl(inputs / "huge.jsonl", rows(80_000, seed=9))  # two units of ~12 MB
    write_jsonl(inputs / "small.jsonl", rows(40, seed=2))
    out = tmp_path / "out"
    killed: list[int] = []
    watcher = threading.Thread(
        target=_kill_the_first_unit_midway,
        args=(out / ".data_io_scale" / "parts", killed, time.monotonic() + WAIT),
    )
    watcher.start()
    try:
        code = main(_tokenize_args(inputs, out, 12, "--wait"))
    finally:
        watcher.join()
    assert killed, "no unit was caught writing its part"
    assert code == 1  # --wait reports the units left

    manifest = Manifest.load(out)
    left = manifest.not_done()
    assert len(left) == 1 and left[0].task == "huge.jsonl"
    assert "killed" in describe(manifest, status(manifest))
    first = _submission(manifest, 1)
    finalize_log = first.folder / "logs" / f"finalize-{first.finalize_job}.log"
    assert "not done" in finalize_log.read_text() and "data_io resume" in finalize_log.read_text()
    assert not (manifest.root / "finalized.json").exists()

    # `data_io resume` submits the one unit left, on the executor the plan was made for.
    assert main(["resume", str(manifest.path), "-q"]) == 0
    second = _submission(manifest, 2)
    assert (second.folder / "units.txt").read_text().split() == [left[0].id]
    wait_slurm(second, timeout=WAIT)
    assert status(Manifest.load(out)).finalized
    assert manifest.read_record(left[0].id, "done")["attempt"] == 2  # its second run
    assert not list(out.rglob(".tmp-*")), "the killed unit's temporary folder is gone"
    assert tree_bytes(out) == _local(inputs, tmp_path / "local")


def test_a_bad_row_fails_its_array_task_with_the_file_and_line(slurm_env, tmp_path):
    items: list = rows(400, seed=5)
    items[300] = "not json"
    inputs = tmp_path / "in"
    inputs.mkdir()
    with open(inputs / "bad.jsonl", "w", encoding="utf-8") as f:
        for row in items:
            f.write((row if isinstance(row, str) else json.dumps(row, ensure_ascii=False)) + "\n")
    out = tmp_path / "out"
    assert main(_tokenize_args(inputs, out, 0.05, "--wait")) == 1

    manifest = Manifest.load(out)
    failed = [u for u in manifest.units if manifest.state(u.id) == "failed"]
    assert len(failed) == 1 and len(manifest.units) > 1  # the other ranges are done
    error = manifest.read_record(failed[0].id, "failed")["error"]
    assert "bad.jsonl:line 301" in error
    assert "bad.jsonl:line 301" in describe(manifest, status(manifest))
    finalize_log = _submission(manifest, 1).folder / "logs"
    assert "not done" in next(finalize_log.glob("finalize-*.log")).read_text()


def _plan_of(count: int, out: Path) -> Manifest:
    """A plan of ``count`` whole-file units (never run: the jobs are held)."""
    units = [
        Unit(
            id=f"u{k:06d}",
            task=f"f{k}.jsonl",
            source=str(out / f"f{k}.jsonl"),
            span={"kind": "whole"},
            index=0,
            count=1,
            bytes=count - k,
        )
        for k in range(count)
    ]
    manifest = Manifest(stage="tokenize", output=str(out), options={}, units=units, inputs=[],
                        fingerprint={}, unit_bytes=1)  # fmt: skip
    manifest.save()
    return manifest


def test_five_thousand_units_go_out_in_arrays_under_max_array_size(slurm_env, tmp_path):
    manifest = _plan_of(5000, tmp_path / "out")
    earlier = len(slurm_env.calls()) if isinstance(slurm_env, EmulatedCluster) else 0
    submission = submit_slurm(manifest, manifest.units, SlurmOptions({"hold": ""}))
    try:
        assert submission.max_array_size == MAX_ARRAY_SIZE  # read from `scontrol show config`
        counts = [chunk["count"] for chunk in submission.chunks]
        assert counts == [1499, 1499, 1499, 503]
        assert [chunk["offset"] for chunk in submission.chunks] == [0, 1499, 2998, 4497]
        assert slurm_env.array_sizes(submission.array_jobs) == counts  # as the scheduler has it
        assert "#SBATCH --hold\n" in (submission.folder / "array.sbatch").read_text()
        assert len((submission.folder / "units.txt").read_text().split()) == 5000
        if isinstance(slurm_env, EmulatedCluster):
            calls = slurm_env.calls()[earlier:]
            assert [c[:3] for c in calls[:4]] == [
                ["--parsable", f"--array=0-{n - 1}", f"--export=ALL,DATA_IO_UNIT_OFFSET={off}"]
                for n, off in zip(counts, [0, 1499, 2998, 4497], strict=True)
            ]
            assert calls[4][1] == "--dependency=afterany:" + ":".join(submission.array_jobs)
        else:
            shown = slurm_env.client("scontrol", "show", "job", submission.finalize_job).stdout
            for job_id in submission.array_jobs:
                assert f"afterany:{job_id}_*" in shown
        # While these are queued, a second submission of the plan is refused.
        with pytest.raises(SlurmError, match="still has jobs in the queue"):
            submit_slurm(manifest, manifest.units[:1], SlurmOptions({}))
    finally:
        slurm_env.cancel(submission.job_ids)
    wait_slurm(submission, timeout=30)


def test_without_sbatch_the_error_says_what_to_install(tmp_path, monkeypatch):
    manifest = _plan_of(2, tmp_path / "out")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SlurmError, match="sbatch is not on PATH: install slurm-client"):
        submit_slurm(manifest, manifest.units, SlurmOptions({}))


def test_a_refused_submission_reports_sbatch_s_error(tmp_path, monkeypatch):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sbatch").write_text("#!/bin/sh\necho 'sbatch: error: invalid partition: gpu' >&2\n"
                                 "exit 1\n")  # fmt: skip
    (fake / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", str(fake))
    manifest = _plan_of(2, tmp_path / "out")
    options = SlurmOptions({"partition": "gpu"}, max_array_size=10)
    with pytest.raises(SlurmError, match="invalid partition: gpu") as refused:
        submit_slurm(manifest, manifest.units, options)
    assert "No job went out; the scripts named above were removed" in str(refused.value)
    # Nothing went out: no submission folder is left that looks like one (scripts, no jobs).
    assert list((manifest.root / "submissions").iterdir()) == []
    with pytest.raises(SlurmError, match="no room for an array"):
        submit_slurm(manifest, manifest.units, SlurmOptions({}, max_array_size=1))
    assert list((manifest.root / "submissions").iterdir()) == []


@pytest.mark.parametrize(
    ("says", "job"),
    [("Submitted batch job 4242", "4242"), ("Welcome to the cluster! Job accepted.", None)],
)
def test_sbatch_that_exits_0_without_a_parsable_id(tmp_path, monkeypatch, says, job):
    # A wrapper that prints sbatch's sentence (ignoring --parsable) is read; one that prints no
    # id is not called "failed": the job may be queued, and the message says to look first.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sbatch").write_text(f"#!/bin/sh\necho '{says}'\n")
    (fake / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", str(fake))
    manifest = _plan_of(2, tmp_path / "out")
    options = SlurmOptions({}, max_array_size=10)
    if job is not None:
        submission = submit_slurm(manifest, manifest.units, options)
        assert submission.describe().startswith(f"2 units as Slurm array job {job}")
        # status names the queued jobs, where it said only "run what is left with resume".
        from data_io.scale.status import describe, status

        shown = describe(manifest, status(manifest))
        assert f"submitted to Slurm as job(s) {job}, {job} (scripts and logs in" in shown
        assert f"`squeue -j {job},{job}` shows what still waits or runs" in shown
        return
    with pytest.raises(SlurmError) as info:
        submit_slurm(manifest, manifest.units, options)
    message = str(info.value)
    assert message.startswith("sbatch exited 0 but printed no job id") and "failed" not in message
    assert "Welcome to the cluster" in message and "check `squeue --me`" in message


def test_slurm_options_become_sbatch_lines(tmp_path, monkeypatch):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sbatch").write_text("#!/bin/sh\necho 42\n")
    (fake / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", str(fake))
    manifest = _plan_of(2, tmp_path / "out")
    options = SlurmOptions(
        {"partition": "cpu", "exclusive": "", "t": "10"}, threads_per_unit=4, max_array_size=10
    )
    submission = submit_slurm(manifest, manifest.units, options)
    script = (submission.folder / "array.sbatch").read_text()
    for line in ("--partition=cpu", "--exclusive", "--cpus-per-task=4"):
        assert f"#SBATCH {line}\n" in script
    assert "#SBATCH -t 10\n" in script
    assert 'DATA_IO_UNIT_THREADS="${SLURM_CPUS_PER_TASK:-4}"' in script
    assert submission.describe().startswith("2 units as Slurm array job 42, then finalize job 42")
    for reserved in ("array", "dependency"):
        with pytest.raises(SlurmError, match="sets --"):
            submit_slurm(manifest, manifest.units, SlurmOptions({reserved: "1"}))
    with pytest.raises(SlurmError, match="one-line"):
        submit_slurm(manifest, manifest.units, SlurmOptions({"comment": "a\n#SBATCH --x"}))


def test_max_array_size_falls_back_to_slurm_s_default(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no scontrol
    assert slurm.read_max_array_size() == slurm.DEFAULT_MAX_ARRAY_SIZE == 1001


def test_tokenizer_counting_on_slurm_is_byte_identical_to_one_run(slurm_env, tmp_path):
    inputs = write_inputs(tmp_path / "in")
    out = tmp_path / "slurm"
    args = ["train-tokenizer", str(inputs), "-o", str(out / "tokenizer.json"), "--vocab-size",
            "800", "--prefix-config", "none", "--executor", "slurm", "--wait", "-q"]  # fmt: skip
    assert main(args) == 0
    manifest = Manifest.load(out)
    assert status(manifest).finalized and len(manifest.units) == 4
    one = tmp_path / "one" / "tokenizer.json"
    train_tokenizer([inputs], one, vocab_size=800, prefix_config=None, progress=False)
    assert tree_bytes(out) == tree_bytes(one.parent)
