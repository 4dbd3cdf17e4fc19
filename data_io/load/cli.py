"""The load stage's commands: ``data_io pack CONFIG``, ``data_io export-rows SAMPLED_DIR -o
OUT.parquet`` and ``data_io loader-check CONFIG``.

``pack`` reads an xorl-style YAML (a ``data:`` section with ``datasets``,
``sample_packing_method``, ``sample_packing_sequence_len``, ``dataset_prepared_path``), checks
every row and computes the bin plan into the cache that ``TokenizedRowsDataset`` reads, then
prints what it found. Other top-level sections of the file (model, train, ...) are ignored.
``export-rows`` turns one epoch of a sampled folder into such rows.

The cache goes where ``--dataset-prepared-path`` or the config's ``data.dataset_prepared_path``
says; with neither, under the user's cache folder (:func:`default_prepared_path`), never into
the current folder. ``loader-check`` builds the loader of a job config for one rank and times
its first batches (``check.check_loader``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from data_io.load.check import check_loader, print_report
from data_io.util.args import positive_int

__all__ = ["register"]


def register(subparsers: Any) -> None:
    _register_pack(subparsers)
    _register_check(subparsers)


def _register_pack(subparsers: Any) -> None:
    pack = subparsers.add_parser(
        "pack",
        help="check tokenized rows and precompute (cache) their packing plan",
        description="Read the data: section of an xorl-style YAML, validate every row of its "
        "datasets and write the bin plan to <dataset_prepared_path>/<fingerprint>/, where "
        "TokenizedRowsDataset finds it. Relative paths are relative to the current folder; "
        "without a dataset_prepared_path the plan goes under the user's cache folder, not "
        "the current one.",
    )
    pack.add_argument("config", metavar="CONFIG", help="YAML file with a data: section")
    pack.add_argument(
        "overrides",
        nargs="*",
        help="overrides of config keys: data.sample_packing_sequence_len=4096, or "
        "KempnerForge's --data.sample_packing_sequence_len=4096",
    )
    pack.add_argument(
        "--dataset-prepared-path",
        # Not dataset_prepared_path: cli.py would write the config key as this option in the
        # loader's messages ("[data] keys are ..., --dataset-prepared-path, ...").
        dest="prepared_path",
        metavar="DIR",
        default=None,
        help="cache folder (default: data.dataset_prepared_path, else "
        "$XDG_CACHE_HOME/data_io/prepared_rows, i.e. ~/.cache/data_io/prepared_rows)",
    )
    pack.add_argument(
        "--json",
        action="store_true",
        help="print the full summary as JSON (default: off: a short text summary)",
    )
    # cli.py hands --section.key=value arguments (unknown options to argparse) to this list.
    pack.set_defaults(run=_run_pack, dotted_overrides="overrides")

    export = subparsers.add_parser(
        "export-rows",
        help="export a sampled folder's epoch as tokenized rows (Parquet)",
        description="Write one epoch of a sampled folder as {input_ids, labels} rows, labels "
        "-100 on the instruction (aligned with input_ids, the model shifts them), in epoch order.",
    )
    export.add_argument("sampled_dir", metavar="SAMPLED_DIR", help="output of `data_io sample`")
    export.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="OUT.parquet",
        help="Parquet file to write (required)",
    )
    export.add_argument(
        "--epoch", type=int, default=0, metavar="N", help="epoch to export (default: 0)"
    )
    export.set_defaults(run=_run_export)


def _run_pack(args: argparse.Namespace) -> int:
    from data_io.load.build import tokenized_rows_dataset  # noqa: PLC0415  CLI start-up: the loaders import torch
    from data_io.load.config import load_config  # noqa: PLC0415  CLI start-up: the loaders import torch

    # The loader's own reading of the config: `pack` fills the cache build_dataloader reads.
    config = load_config(Path(args.config), args.overrides)
    overrides = {}
    if args.prepared_path is not None:
        overrides["dataset_prepared_path"] = args.prepared_path
    dataset = tokenized_rows_dataset(config, **overrides)
    summary = dataset.summary()
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0
    for source in summary["sources"]:
        print(
            f"source {source['name']}: {source['rows']} rows, {source['tokens']} tokens, "
            f"{source['truncated_rows']} truncated ({source['truncated_tokens']} tokens cut)"
        )
    method = summary["sample_packing_method"] or "none (one row per item)"
    print(
        f"rows: {summary['rows']}  tokens: {summary['tokens']}  truncated rows: "
        f"{summary['truncated_rows']}  packing: {method}"
    )
    print(
        f"items (bins): {summary['items']} of {summary['item_length']} tokens  fill ratio: "
        f"{summary['fill_ratio']:.4f}"
    )
    state = "reused" if summary["cache_reused"] else "written"
    print(f"cache: {summary['cache']} ({state})")
    return 0


def _run_export(args: argparse.Namespace) -> int:
    from data_io.load.export_rows import export_sampled_rows  # noqa: PLC0415  CLI start-up: the loaders import torch

    done = export_sampled_rows(args.sampled_dir, args.output, epoch=args.epoch)
    print(
        f"wrote {done['output']}: {done['rows']} rows of epoch {done['epoch']}, "
        f"{done['tokens']} tokens, {done['supervised_tokens']} supervised"
    )
    return 0


def _run_check(args: argparse.Namespace) -> int:
    from data_io.load.config import from_job_file, load_config, trainer_overrides  # noqa: PLC0415  CLI start-up: the loaders import torch

    config = load_config(args.config, args.overrides)
    if args.workers is not None:
        config.data.num_workers = args.workers
    with from_job_file(args.config):
        report = check_loader(config, args.rank, args.world_size, args.batches)
    report["trainer_overrides"] = trainer_overrides(args.overrides)
    print_report(report, args.json)
    return 0


def _register_check(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "loader-check",
        help="build the loader of a [data]/[eval] config and time its first batches",
        description="Read a TOML/YAML job config (KempnerForge [data]/[eval]/[train] or xorl "
        "data: datasets:), build the loader for one rank, print the sources, samples per rank, "
        "mixture per phase and eval set, and time the first batches.",
    )
    parser.add_argument("config", type=Path, help="the .toml/.yaml config")
    parser.add_argument(
        "overrides",
        nargs="*",
        help="overrides of config keys: data.num_workers=0, or KempnerForge's "
        "--data.num_workers=0; an unknown key is an error naming it",
    )
    parser.add_argument(
        "--rank", type=int, default=0, help="the rank to build (default: %(default)s)"
    )
    parser.add_argument(
        "--world-size", type=int, default=1, help="ranks in the job (default: %(default)s)"
    )
    parser.add_argument(
        "--batches",
        type=positive_int,
        default=5,
        help="batches to time (at least 1) (default: %(default)s)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="override data.num_workers for this check (default: the config's)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the report as JSON (default: off: as text)"
    )
    # cli.py hands --section.key=value arguments (unknown options to argparse) to this list.
    parser.set_defaults(run=_run_check, dotted_overrides="overrides")
