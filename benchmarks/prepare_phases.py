"""Where ``prepare``'s time goes, by thread count: the reading (the calling thread), the Rust
batch step (``_core.prepare_batch``: parse, clean, hash, encode on the encoder's pool) and the
writing (spool or shards), each thread's busy seconds beside the run's, and what runs before
and after pass 1. On many cores the encoding is short and these decide the speed: a phase
whose busy time nears the run's is the one to shorten.

    .venv/bin/python -m benchmarks.prepare_phases [--corpus DIR] [--text-field response]
        [--tokenizer PATH] [--threads 1,2] [--dedup none,doc] [--rounds 3] [--floor]
        [--baseline DIR] [--batch-mb MB] [--switch-ms MS]

``--floor``: the encoder's null engine too (every step but encoding). ``--baseline DIR``:
another checkout's ``data_io`` (with its built extension) run alike, alternating with this one
round by round, so the two builds are compared side by side. ``--batch-mb`` and ``--switch-ms``
try the reader's batch size and Python's thread switch interval. MB/s counts input bytes.

Each run also samples every thread's CPU seconds (``/proc/self/task``, every 10 ms, so that
threads which end before the run does are counted too), and the table's last column names the
three busiest threads with their CPU seconds as a share of the run's: where one thread's share
nears 100% while the cores are not all used, that thread is the serial step holding the run
back, with no profiler needed (the lent many-core machine has none).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
ROOT = _HERE.parent
# benchmarks/tokenize.py would shadow the standard library's `tokenize`: this folder off the
# import path (the build to measure comes first on it, from PYTHONPATH).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
QWEN = Path.home() / ".cache" / "data_io" / "vocab" / "qwen" / "tokenizer.json"
CORPUS = ROOT / "work" / "race" / "corpus" / "main" / "rows"


class ThreadClock:
    """Every thread's CPU seconds, sampled from ``/proc/self/task`` while a run lasts; Python
    threads named by their ``threading`` name, the others by the kernel's (Rust's threads name
    themselves, e.g. ``data_io-crew-3``). Linux only: elsewhere it records nothing."""

    def __init__(self, every: float = 0.01) -> None:
        import os
        import threading

        self._os, self._threading = os, threading
        self.every = every
        self.seconds: dict[int, float] = {}
        self._before: dict[int, float] = {}
        self.names: dict[int, str] = {}
        self._tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="thread-clock", daemon=True)

    def __enter__(self) -> ThreadClock:
        # A thread's counts run from its start: what each spent before the run (the imports,
        # the interpreter's start) is taken off, so that a share is of the run alone.
        self._sample()
        self._before = dict(self.seconds)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self._sample()

    def _sample(self) -> None:
        python = {t.native_id: t.name for t in self._threading.enumerate()}
        try:
            tasks = self._os.listdir("/proc/self/task")
        except OSError:
            return
        for task in tasks:
            try:
                with open(f"/proc/self/task/{task}/stat") as f:
                    stat = f.read()
                comm = stat[stat.index("(") + 1 : stat.rindex(")")]
                fields = stat[stat.rindex(")") + 2 :].split()
                # utime and stime: fields 14 and 15 of the line, 12 and 13 after the name.
                seconds = (int(fields[11]) + int(fields[12])) / self._tick
            except (OSError, ValueError, IndexError):
                continue  # ended meanwhile
            tid = int(task)
            self.seconds[tid] = seconds
            # Named at each sample: a Python thread's name once it is known to `threading`.
            self.names[tid] = python.get(tid) or comm

    def busiest(self, count: int = 3) -> list[tuple[str, float]]:
        """The ``count`` threads of most CPU seconds, (name, seconds), the clock's own left out."""
        run = {tid: sec - self._before.get(tid, 0.0) for tid, sec in self.seconds.items()}
        ranked = sorted(run.items(), key=lambda item: -item[1])
        named = [(self.names.get(tid, str(tid)), sec) for tid, sec in ranked]
        return [(name, sec) for name, sec in named if name != "thread-clock"][:count]


def child(spec: dict) -> dict:
    """One run of ``prepare`` with its phases timed (imported from the build on sys.path)."""
    import data_io.prepare.api as api
    import data_io.prepare.pipeline as pipeline
    from data_io import _core
    from data_io.formats import raw_reading

    busy = dict.fromkeys(("pass_1", "read", "prepare_batch", "write"), 0.0)

    def timed(name: str, work):
        def run(*args, **kwargs):
            began = time.perf_counter()
            try:
                return work(*args, **kwargs)
            finally:
                busy[name] += time.perf_counter() - began

        return run

    class Core:  # the pipeline's `_core`, its batch step timed
        def __getattr__(self, name: str):
            return getattr(_core, name)

    Core.prepare_batch = staticmethod(timed("prepare_batch", _core.prepare_batch))  # type: ignore[attr-defined]
    pipeline._core = Core()  # type: ignore[assignment]
    batches = raw_reading.DocumentReader.batches

    def timed_batches(self, sources):
        produced = batches(self, sources)
        while True:
            began = time.perf_counter()
            try:
                batch = next(produced)
            except StopIteration:
                return
            finally:
                busy["read"] += time.perf_counter() - began
            yield batch

    raw_reading.DocumentReader.batches = timed_batches
    pipeline.ShardSink.append = timed("write", pipeline.ShardSink.append)
    if hasattr(pipeline.ShardSink, "append_split"):  # a baseline may predate it
        pipeline.ShardSink.append_split = timed("write", pipeline.ShardSink.append_split)
    pipeline.Spool.append = timed("write", pipeline.Spool.append)
    # Pass 1 as the run calls it: from prepare.run, or from prepare.api in a baseline that
    # predates that module.
    try:
        import data_io.prepare.run as runner
    except ImportError:
        runner = api
    runner.encode_inputs = timed("pass_1", runner.encode_inputs)

    if spec.get("batch_mb"):  # the reader's batch size (read at each batch)
        raw_reading.BATCH_BYTES = int(spec["batch_mb"] * 2**20)
    if spec.get("switch_ms"):  # how long a thread holding the GIL keeps the others waiting
        sys.setswitchinterval(spec["switch_ms"] / 1000)
    out = Path(spec["out"])
    shutil.rmtree(out, ignore_errors=True)
    clock = ThreadClock()
    began, cpu = time.perf_counter(), time.process_time()
    with clock:
        result = api.prepare(
            [spec["corpus"]],
            out,
            tokenizer=spec["tokenizer"],
            dedup=spec["dedup"],
            text_field=spec["text_field"],
            progress=False,
        )
    seconds = time.perf_counter() - began
    shutil.rmtree(out, ignore_errors=True)
    return {
        "seconds": seconds,
        "cores": (time.process_time() - cpu) / seconds,
        "bytes": result.bytes_read,
        "tokens": sum(result.tokens.values()),
        "busiest_threads": clock.busiest(),
        **busy,
    }


def _run(build: Path, spec: dict, threads: int) -> dict:
    from benchmarks.build_child import run_child  # not in the child, whose path lacks it

    floor = {"DATA_IO_ENCODER": "null"} if spec.get("floor") else {}
    return run_child(__file__, build, spec, threads, env=floor, cwd=build)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--text-field", default="response")
    parser.add_argument("--tokenizer", default=str(QWEN))
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--dedup", default="none,doc")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--floor", action="store_true", help="the null encoder's rows too")
    parser.add_argument("--baseline", type=Path, help="another checkout's data_io, side by side")
    parser.add_argument("--batch-mb", type=float, help="the reader's batch size (default 8 MiB)")
    parser.add_argument("--switch-ms", type=float, help="sys.setswitchinterval (default 5 ms)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    builds = {"this": ROOT} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    work = Path(tempfile.mkdtemp(prefix="prepare_phases."))
    rows = []
    for threads in (int(t) for t in args.threads.split(",")):
        for floor in (False, True) if args.floor else (False,):
            for dedup in args.dedup.split(","):
                spec = {
                    "corpus": str(args.corpus.resolve()),
                    "out": str(work / "out"),
                    "tokenizer": args.tokenizer,
                    "dedup": dedup,
                    "text_field": args.text_field,
                    "floor": floor,
                    "batch_mb": args.batch_mb,
                    "switch_ms": args.switch_ms,
                }
                runs: dict[str, list[dict]] = {name: [] for name in builds}
                for round_ in range(args.rounds):
                    order = list(builds) if round_ % 2 == 0 else list(reversed(builds))
                    for name in order:
                        runs[name].append(_run(builds[name], spec, threads))
                for name, done in runs.items():
                    best = min(done, key=lambda r: r["seconds"])
                    spread = [r["bytes"] / r["seconds"] / 1e6 for r in done]
                    rows.append(
                        (threads, dedup + (" (floor)" if floor else ""), name, best, spread)
                    )
                    print(json.dumps({"threads": threads, "dedup": dedup, "floor": floor,
                                      "build": name, "runs": done}), file=sys.stderr)  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)
    print(f"corpus {args.corpus}; fastest of {args.rounds} rounds (all rounds' MB/s in brackets)\n")
    print("| threads | dedup | build | MB/s | cores used | run s | pass 1 s | read s | "
          "prepare_batch s | write s | outside pass 1 s | busiest threads (CPU % of the run) |")  # fmt: skip
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for threads, dedup, name, best, spread in rows:
        mbs = best["bytes"] / best["seconds"] / 1e6
        others = ", ".join(f"{m:.0f}" for m in sorted(spread))
        print(
            f"| {threads} | {dedup} | {name} | {mbs:.1f} [{others}] | {best['cores']:.2f} | "
            f"{best['seconds']:.3f} | {best['pass_1']:.3f} | {best['read']:.3f} | "
            f"{best['prepare_batch']:.3f} | {best['write']:.3f} | "
            f"{best['seconds'] - best['pass_1']:.3f} | "
            + ", ".join(
                f"{name} {sec / best['seconds'] * 100:.0f}%"
                for name, sec in best.get("busiest_threads", [])
            )
            + " |"
        )
    print("\nmedian MB/s by build: " + ", ".join(
        f"{name} {statistics.median(r[3]['bytes'] / r[3]['seconds'] / 1e6 for r in rows if r[2] == name):.1f}"
        for name in builds))  # fmt: skip


if __name__ == "__main__":
    main()
