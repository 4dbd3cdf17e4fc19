"""The ``data_io`` command line: one sub-command per stage.

Each stage module exposes ``register(subparsers)``, which adds its sub-command and sets
``run`` (a function taking the parsed namespace and returning an exit code) as a default.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Stage modules, in pipeline order. Each one owns its sub-command.
_STAGE_MODULES = (
    "data_io.cleaning.cli",
    "data_io.train_tokenizer",
    "data_io.tokenize",
    "data_io.sampling",
    "data_io.example",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="data_io",
        description="Data preparation for LLM pretraining: clean, train a tokenizer, "
        "tokenize, sample, load.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _STAGE_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    from data_io.errors import DataIoError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except DataIoError as exc:
        print(f"data_io {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"data_io {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
