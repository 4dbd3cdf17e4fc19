"""``data_io clean``: list the cleaners, run some of them, or run all whose sources are present."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from data_io.cleaning.registry import Entry, entries, find
from data_io.cleaning.runner import INTERRUPTED, add_run_arguments, run_and_report
from data_io.cleaning.sources import HubDataset
from data_io.errors import ConfigError
from data_io.util.words import counted


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "clean",
        help="raw datasets -> cleaned rows (data/*.jsonl, data_clustered/**/*.parquet)",
        description="Run the dataset cleaners (python -m pipe.clean_* does the same for one).",
    )
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="cleaners to run: names or module paths, see --list (default: none; name some or "
        "pass --all)",
    )
    parser.add_argument(
        "--list",
        action="store_true",
        help="list the cleaners, their sources and outputs, and stop (default: off)",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="run every cleaner whose local source is present (raw_data/..., "
        "raw_data/hub/<repo>) (default: off)",
    )
    add_run_arguments(parser)
    parser.add_argument(
        "--plan-dir",
        metavar="DIR",
        default=None,
        help="with --executor: the folder of the plan and its unit records, which `data_io "
        "status` and `data_io resume` read; on Slurm it must be on a file system the nodes "
        "share (default: $XDG_CACHE_HOME/data_io/scale/clean-<hash of this folder>, i.e. under "
        "~/.cache; `data_io status .` finds it there)",
    )
    parser.set_defaults(run=run, scale_request=scale_request)


def _listing(rows: list[Entry]) -> str:
    lines = []
    for entry in rows:
        if entry.cleaner is None:
            lines.append(f"{entry.name:<24} {entry.module}  (not written yet)")
            continue
        source = entry.cleaner.source
        if source.present():
            state = f"present: {source.default}"
        elif isinstance(source, HubDataset):
            state = f"no local copy at {source.default}: streams from the Hub"
        else:
            state = f"missing: {source.default}"
        lines.append(f"{entry.name:<24} {entry.module}")
        lines.append(f"{'':<24}   source: {source.describe()}  [{state}]")
        lines.append(f"{'':<24}   output: {entry.cleaner.output.describe()}")
    return "\n".join(lines)


def _chosen(args: argparse.Namespace) -> list[Entry]:
    """The cleaners the command line names (or --all of those whose source is present)."""
    if args.all == bool(args.names):
        raise ConfigError("name the cleaners to run, or pass --all (or --list to see them)")
    if args.all:
        if args.source or args.out:
            raise ConfigError("--source and --out apply to one cleaner: name exactly one")
        chosen = [e for e in entries() if e.cleaner is not None and e.cleaner.source.present()]
        if not chosen:
            raise ConfigError("no cleaner has its source present; see `data_io clean --list`")
    else:
        chosen = _once_each(args.names, quiet=args.quiet)
        if (args.source or args.out) and len(chosen) != 1:
            raise ConfigError("--source and --out apply to one cleaner: name exactly one")
        missing = [e.name for e in chosen if e.cleaner is None]
        if missing:
            raise ConfigError(f"cleaner(s) not written yet: {', '.join(missing)}")
    return chosen


def _once_each(names: list[str], *, quiet: bool) -> list[Entry]:
    """The cleaners ``names`` name, each once, in the order first named: a cleaner named
    twice (``arb arb``, or its name and its module path) would clean the same data twice."""
    chosen: dict[str, Entry] = {}
    spellings: dict[str, list[str]] = {}
    for name in names:
        entry = find(name)
        chosen.setdefault(entry.module, entry)
        spellings.setdefault(entry.module, []).append(name)
    for module, typed in spellings.items():
        if len(typed) > 1 and not quiet:
            print(
                f"clean: note: {chosen[module].name} is named {len(typed)} times "
                f"({', '.join(typed)}); it runs once",
                file=sys.stderr,
            )
    return list(chosen.values())


def scale_request(args: argparse.Namespace) -> dict[str, Any]:
    """What ``--executor`` plans (``data_io.cleaning.scaled``): one unit per chosen cleaner,
    run in this folder."""
    if args.list:
        raise ConfigError("--list does not combine with --executor: drop one of them")
    chosen = _chosen(args)
    if args.source or args.out:
        raise ConfigError("--source and --out do not combine with --executor")
    return {"names": [entry.name for entry in chosen], "workdir": ".", "plan_dir": args.plan_dir}


def run(args: argparse.Namespace) -> int:
    if args.list:
        print(_listing(entries()))
        return 0
    chosen = _chosen(args)
    if args.plan_dir is not None:
        raise ConfigError(
            "--plan-dir applies to --executor runs: add --executor local (or drop it)"
        )
    failed, done = [], []
    for entry in chosen:
        assert entry.cleaner is not None
        code = run_and_report(entry.cleaner, args.source, args.out, quiet=args.quiet)
        if code == INTERRUPTED:
            # Ctrl-C stops the run, not only the cleaner it reached.
            finished = ", ".join(done) or "none"
            print(
                f"clean: stopped by Ctrl-C at {entry.name}; {len(done)} of "
                f"{counted(len(chosen), 'cleaner')} finished before it ({finished}), the rest "
                "not run",
                file=sys.stderr,
            )
            return INTERRUPTED
        (failed if code != 0 else done).append(entry.name)
    if failed:
        print(
            f"clean: {len(failed)} of {counted(len(chosen), 'cleaner')} failed: {', '.join(failed)} "
            "(their errors are above)",
            file=sys.stderr,
        )
        return 1
    return 0
