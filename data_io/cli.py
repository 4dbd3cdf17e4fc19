"""The ``data_io`` command line: one sub-command per stage, and the one place that composes the
stages with the scale layer.

Each stage's ``cli`` module exposes ``register(subparsers)``, which adds its sub-command and sets
``run`` (a function taking the parsed namespace and returning an exit code) as a default. A stage
that scales out (``data_io.stage.STAGES``) also sets ``scale_request`` (the namespace -> the
stage's plan request); here its command gets ``--executor`` and the rest of the scale-out
options, and a run with ``--executor`` goes to ``data_io.scale`` instead of ``run``. No stage
imports the scale layer, nor the scale layer a stage.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys

# No command calls BLAS, and OpenBLAS's threads spin for ~0.1 CPU-second after numpy is
# imported: one thread (unless the user chose), before any stage imports numpy.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from data_io.errors import ConfigError, DataIoError, os_error_message
from data_io.stage import STAGES
from data_io.util.closed_stdout import exit_quietly_on_closed_stdout, from_closed_stdout
from data_io.util.interrupt import ReportedInterrupt

# Stage modules, in pipeline order, and the sub-commands each one registers. Each one owns its
# sub-command; only the chosen command's module is imported (the others pull in polars,
# pyarrow, omegaconf...: ~1 s of start-up that `data_io tokenize` on one row does not need).
_STAGE_MODULES: dict[str, tuple[str, ...]] = {
    "data_io.cleaning.cli": ("clean",),
    "data_io.tokenizer.cli": ("train-tokenizer",),
    "data_io.tokenize.cli": ("tokenize",),
    "data_io.sampling.cli": ("sample",),
    "data_io.example": ("example",),
    "data_io.load.cli": ("pack", "export-rows", "loader-check"),
    "data_io.prepare.cli": ("prepare",),
    "data_io.inspect": ("inspect",),
    "data_io.scale.cli": ("status", "resume", "scale"),
}


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every sub-command; given the command line ``argv``, only of the command it
    names (when it names a known one), so that only that stage's module is imported."""
    parser = argparse.ArgumentParser(
        prog="data_io",
        description="Data preparation for LLM pretraining: clean, train a tokenizer, "
        "tokenize, sample, load. Each stage is a sub-command; `data_io COMMAND --help` "
        "describes its options and defaults.",
        epilog="Pipeline: clean -> train-tokenizer -> tokenize -> sample -> load (the "
        "data_io.load Python API). `data_io example` runs every stage on the embedded "
        "example data.",
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    subparsers = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", title="commands"
    )
    for name in _modules_for(argv):
        importlib.import_module(name).register(subparsers)
    # Each command's parser, for `_intermixed` (argparse keeps them only in private fields).
    parser.data_io_commands = dict(subparsers.choices)  # type: ignore[attr-defined]
    scalable = [command for command in subparsers.choices if command in STAGES]
    if scalable:
        from data_io.scale.cli import add_executor_arguments  # noqa: PLC0415  CLI start-up: only the scalable stages' commands need it

        for command in scalable:
            add_executor_arguments(subparsers.choices[command])
    return parser


class _VersionAction(argparse.Action):
    """``--version``, reading the version only when asked (importlib.metadata costs ~0.1 s)."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0,
                         help=help)  # fmt: skip

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from data_io import __version__  # noqa: PLC0415  read only when asked (importlib.metadata: ~60 ms)

        print(f"{parser.prog} {__version__}")
        parser.exit()


def _modules_for(argv: list[str] | None) -> list[str]:
    """The stage modules to register: the one owning the command in ``argv``, or all of them
    (no command, an unknown one, or ``--help``: the help and the error list every command)."""
    command = next((arg for arg in argv or [] if not arg.startswith("-")), None)
    owners = [module for module, commands in _STAGE_MODULES.items() if command in commands]
    return owners or list(_STAGE_MODULES)


def main(argv: list[str] | None = None) -> int:
    return exit_quietly_on_closed_stdout(lambda: _run(argv))


def parse_command_line(argv: list[str]) -> argparse.Namespace:
    """``argv`` as the command it names reads it (argparse's usage error and exit otherwise)."""
    parser = build_parser(argv)
    args, unknown = parser.parse_known_args(argv)
    if "--" in unknown or any(not arg.startswith("-") for arg in unknown):
        args, unknown = _intermixed(parser, args, argv, unknown)
    if unknown:
        _take_dotted_overrides(parser, args, argv, unknown)
    command = getattr(parser, "data_io_commands", {}).get(getattr(args, "command", None))
    args.option_names = _option_names(command, argv) if command is not None else {}
    return args


def _option_names(command: argparse.ArgumentParser, argv: list[str]) -> dict[str, str]:
    """Each option's Python name (``val_fraction``) and how the command line spells it
    (``--val-fraction``), for messages of the API, which name its parameters: the spelling
    the user typed where an option has several (MyPT's ``--val_fraction``)."""
    typed = {arg.split("=", 1)[0] for arg in argv if arg.startswith("--")}
    names = {}
    for action in command._actions:  # argparse keeps them only in this field
        long = [o for o in action.option_strings if o.startswith("--")]
        if long and action.dest not in (argparse.SUPPRESS, "help"):
            used = [o for o in long if o in typed]
            names[action.dest] = used[0] if used else max(long, key=len)
    # A spelling of another option's that the user typed instead (MyPT's --val_fraction for
    # --val-fraction, declared as an option of its own).
    for dest, option in names.items():
        alias = next((o for o in typed if o != option and o.replace("_", "-") == option), None)
        if alias is not None:
            names[dest] = alias
    return names


def _in_option_words(message: str, names: dict[str, str]) -> str:
    """An API message in the command line's words, the option as its ``--help`` spells it:
    ``val_fraction must be ...`` is ``--val-fraction must be ...``. A parameter name with an
    underscore is replaced where it stands as a word (not inside a path, before ``=`` or before
    a file name's suffix: ``prefix_config.yaml``); a one-word name only where it opens the
    message (``seed must be ...``) or an entry of a list of options that differ
    (``(dedup: 'line' then, 'doc' now; ...``)."""
    for dest, option in names.items():
        if "_" in dest:
            message = re.sub(rf"(?<![\w/.-]){re.escape(dest)}(?![\w/=]|\.\w)", option, message)
        else:
            if message.startswith(f"{dest} "):
                message = option + message[len(dest) :]
            # An entry of a list of options that differ: "(dedup: 'line' then, 'doc' now; ...".
            message = re.sub(rf"(?:(?<=\()|(?<=; )){re.escape(dest)}(?=: )", option, message)
    return message


def _run(argv: list[str] | None) -> int:
    try:
        # Reading the command line imports its stage (polars, pyarrow...: most of start-up).
        args = parse_command_line(sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt:
        print("data_io: interrupted while starting", file=sys.stderr)
        return 130
    try:
        return int(_stage_run(args) or 0)
    except DataIoError as exc:
        if from_closed_stdout(exc):
            raise  # not an error of the stage: the reader went away
        said = str(exc)
        if isinstance(exc, ConfigError):
            said = _in_option_words(said, getattr(args, "option_names", {}))
        print(f"data_io {args.command}: error: {said}", file=sys.stderr)
        return 1
    except OSError as exc:  # disk full, read-only, permissions: one line, not a traceback
        if from_closed_stdout(exc):
            raise
        print(f"data_io {args.command}: error: {os_error_message(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interrupt:
        if not isinstance(interrupt, ReportedInterrupt):  # else the run said where it stopped
            print(f"data_io {args.command}: interrupted", file=sys.stderr)
        return 130


def _stage_run(args: argparse.Namespace) -> int:
    """The command, or with ``--executor`` its stage planned and run as units."""
    if getattr(args, "executor", None) is None:
        return args.run(args)
    from data_io.scale.cli import run_scaled  # noqa: PLC0415  CLI start-up: only runs with --executor need it

    return run_scaled(args.command, args.scale_request(args), args)


def _intermixed(
    parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str], unknown: list[str]
) -> tuple[argparse.Namespace, list[str]]:
    """Positional arguments typed after an option (``data_io prepare a.txt -o out b.txt``,
    ``data_io sample epochs=2 -q seed=1``): argparse fills a list positional once, from the
    arguments before the first option, and leaves the later ones unknown. The command's own
    parser reads its arguments again with options and positionals intermixed."""
    command = getattr(parser, "data_io_commands", {}).get(args.command)
    if command is None or args.command not in argv:
        return args, unknown
    rest = argv[argv.index(args.command) + 1 :]
    try:
        again, left = command.parse_known_intermixed_args(rest)
    except TypeError:  # a parser that intermixed parsing cannot read (none of ours today)
        return args, unknown
    return argparse.Namespace(**{**vars(args), **vars(again)}), left


def _take_dotted_overrides(
    parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str], unknown: list[str]
) -> None:
    """KempnerForge's ``--section.key=value`` overrides, for the commands that read a loader
    config (they set ``dotted_overrides`` to the name of their overrides list): argparse takes
    them for unknown options. Anything else unknown is the usual argparse error."""
    target = getattr(args, "dotted_overrides", None)
    # After an option argparse does not know, it leaves the plain key=value ones unparsed too.
    dotted = [a for a in unknown if "." in a.split("=", 1)[0] and not a.startswith("---")]
    if target is None or len(dotted) != len(unknown):
        hint = (
            "; a config override is --section.key=value (loader-check, pack)"
            if any(a.startswith("--") and "." in a for a in unknown)
            else ""
        )
        # The command's own usage, not the top level's list of commands.
        command = getattr(parser, "data_io_commands", {}).get(getattr(args, "command", None))
        takes_pairs = command is not None and any(
            action.metavar == "key=value" for action in command._actions
        )
        if takes_pairs and not hint:  # `sample --epochs=2`: the original's key=value spelling
            from data_io.sampling.config import dashed_settings_hint  # noqa: PLC0415  only sample's error path; the CLI starts cheap

            hint = dashed_settings_hint(unknown, argv)
        (command or parser).error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
    given = set(getattr(args, target)) | set(dotted)
    # In the order they were typed: a later override of the same key wins.
    setattr(args, target, [a for a in argv if a in given])


if __name__ == "__main__":
    sys.exit(main())
