"""Run the Python fuzz targets: ``python -m fuzz.python.run TARGET [--seconds N]``.

With atheris installed (``.venv/bin/pip install atheris``) the run is coverage-guided
(libFuzzer under the hood: it prints executions and coverage, and writes a crashing input to
``fuzz/artifacts/python-TARGET/``); without it, hypothesis generates inputs for the same time.
Seeds are read from ``fuzz/seeds/python/TARGET/``; new interesting inputs go to the ignored
``fuzz/corpus/python-TARGET/``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
import time
from pathlib import Path

FUZZ = Path(__file__).resolve().parent.parent


def _with_atheris(name: str, seconds: int, extra: list[str]) -> int:
    import atheris

    with atheris.instrument_imports(include=["data_io"]):
        from fuzz.python.targets import MODULES, TARGETS, run_one

        for module in MODULES:  # instrumented only when first imported here
            importlib.import_module(module)
    target = TARGETS[name]
    corpus = FUZZ / "corpus" / f"python-{name}"
    artifacts = FUZZ / "artifacts" / f"python-{name}"
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    argv = [
        sys.argv[0],
        str(corpus),
        str(FUZZ / "seeds" / "python" / name),
        f"-max_total_time={seconds}",
        f"-artifact_prefix={artifacts}/",
        "-print_final_stats=1",
        "-timeout=20",
        *extra,
    ]
    atheris.Setup(argv, lambda data: run_one(target, data))
    atheris.Fuzz()
    return 0


def _with_hypothesis(name: str, seconds: int) -> int:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from fuzz.python.targets import TARGETS, run_one

    target = TARGETS[name]
    seeds = sorted((FUZZ / "seeds" / "python" / name).glob("*"))
    for seed in seeds:
        run_one(target, seed.read_bytes())
    count = 0
    deadline = time.monotonic() + seconds

    @settings(max_examples=10**9, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(st.binary(max_size=4096) | st.sampled_from([s.read_bytes() for s in seeds] or [b""]))
    def one(data: bytes) -> None:
        nonlocal count
        if time.monotonic() > deadline:
            raise _Done
        count += 1
        run_one(target, data)

    with contextlib.suppress(_Done):
        one()
    print(f"{name}: {count:,} executions in {seconds} s (hypothesis, not coverage-guided)")
    return 0


class _Done(Exception):
    """The time budget is spent."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target")
    parser.add_argument("--seconds", type=int, default=60)
    args, extra = parser.parse_known_args()
    try:
        import atheris  # noqa: F401
    except ImportError:
        return _with_hypothesis(args.target, args.seconds)
    return _with_atheris(args.target, args.seconds, extra)


if __name__ == "__main__":
    sys.exit(main())
