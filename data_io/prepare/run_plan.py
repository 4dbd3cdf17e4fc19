"""``plan_run``: the first half of ``prepare``, before any work: the options checked
(``check_options``), the output opened (an interrupted run rolled back) and the sources not
prepared yet found, with their identities (``RunPlan``)."""

from __future__ import annotations

import inspect
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from data_io.errors import ConfigError
from data_io.formats.raw_text import (
    INVALID_UTF8_POLICIES,
    ReadOptions,
    Source,
    check_datasets_options_used,
    expand_inputs,
    recorded_read,
)
from data_io.prepare.dedup import NearDedup, dedup_mode, parse_memory
from data_io.prepare.identity import PendingDigests, plan_inputs
from data_io.prepare.normalize import CleanOptions
from data_io.prepare.options import (
    DTYPES,
    LAYOUTS,
    check_choice,
    check_int,
    mypt_shards,
    read_and_clean_options,
)
from data_io.prepare.pipeline import check_dtype, check_threads
from data_io.prepare.shards import FORMATS
from data_io.prepare.split import check_val_fraction
from data_io.prepare.state import check_same_options, open_output
from data_io.prepare.tokenizers import PrepTokenizer, load_tokenizer


@dataclass
class RunPlan:
    """What a run over ``inputs`` would do, before any work: the checked options, the output's
    state, and the sources not prepared yet with their identities."""

    out: Path
    metadata: dict[str, Any] | None
    rolled_back: list[str]
    read: ReadOptions
    clean: CleanOptions
    tok: PrepTokenizer
    options: dict[str, Any]
    budget: int
    new: list[tuple[Source, dict[str, Any]]]
    known: list[str]
    skipped: list[str]
    same_as: dict[str, str]
    # The new files' content hashes still being computed (identity.py): ``wait`` before
    # reading ``new``'s hashes.
    digests: PendingDigests


def plan_run(
    inputs: list[str | os.PathLike[str]] | str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    tokenizer: str = "gpt2",
    tokens_per_shard: int = 10_000_000,
    val_fraction: float = 0.1,
    normalize: bool = True,
    filter: bool = True,
    min_line_chars: int = 2,
    min_doc_chars: int = 20,
    dedup: bool | str = True,
    dedup_memory: str | int = "1GB",
    near_ngram: int = 5,
    near_bands: int = 14,
    near_rows: int = 8,
    text_field: str = "text",
    doc_per_line: bool = False,
    invalid_utf8: str = "replace",
    format: str = "bin",
    dtype: str = "auto",
    seed: int = 0,
    threads: int | None = None,
    eos_token: str | int | None = None,
    split: str = "train",
    hf_config: str | None = None,
    layout: str = "data_io",
) -> RunPlan:
    """Check the options, open the output (an interrupted run is rolled back) and find the new
    sources: the first half of ``prepare``, also what ``data_io.scale`` cuts into units. The
    caller holds the output folder (``state.exclusive``)."""
    # First: the locals are this function's arguments, every keyword one an option to check.
    checked = check_options(**{k: v for k, v in locals().items() if k in _OPTION_DEFAULTS})
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    read, clean, mode, near = checked.read, checked.clean, checked.mode, checked.near
    tokens_per_shard, seed, val_fraction = (
        checked.tokens_per_shard,
        checked.seed,
        checked.val_fraction,
    )
    format, dtype, budget = checked.format, checked.dtype, checked.budget

    out = Path(output).expanduser()
    metadata, rolled_back = open_output(out)
    if near is not None:
        # A folder made before the limit on permutations keeps its bands and rows.
        recorded = (metadata or {}).get("options", {}).get("near_dedup")
        if recorded != asdict(near):
            near.check_permutations()
    sources, skipped = expand_inputs(list(inputs), read)
    check_datasets_options_used(sources, read, held=_held_datasets(metadata))
    _check_output_outside(out, list(inputs), sources)
    # The inputs' content hashes and the tokenizer's load both run without the GIL: side by
    # side. The errors still come in their order: the tokenizer's, the options', the inputs'.
    # A daemon thread: an error before its result is wanted does not wait for every input's
    # hash at exit.
    planned: Future[Any] = Future()
    threading.Thread(
        target=_resolve, args=(planned, plan_inputs, sources, metadata), daemon=True
    ).start()
    tok = load_tokenizer(tokenizer, eos_token, out)
    options = {
        **read.identity(),
        **clean.identity(),
        # True and False as folders written before near-dedup existed record them.
        "dedup": {"doc": True, "none": False, "near": "near", "line": "line"}[mode],
        "val_fraction": val_fraction,
        "seed": seed,
        "tokens_per_shard": tokens_per_shard,
        "format": format,
        "dtype": dtype,
        "tokenizer": tok.fingerprint(),
        "eos_id": tok.eos_id,
    }
    if near is not None:
        options["near_dedup"] = asdict(near)
    if layout != "data_io":  # absent from folders written before layouts existed
        options["layout"] = layout
    if metadata is not None:
        recorded_layout = metadata.get("options", {}).get("layout", "data_io")
        if recorded_layout != layout:
            raise ConfigError(
                f"{out} was prepared in the {recorded_layout} layout, not {layout}; re-run with "
                f"--layout {recorded_layout} to add inputs, or prepare into a new folder"
            )
        check_same_options(out, metadata, options, tokenizer=tok.spec)
    new, known, same_as, digests = planned.result()
    for source, entry in new:
        chosen = read.source_identity(source.kind)
        if chosen:
            entry["read"] = chosen
    _check_known_read_alike(out, metadata, sources, known, same_as, read)
    recorded_dtype = metadata["dtype"] if metadata else None
    growable = tok.kind == "char"
    check_dtype(dtype, tok.vocab_size, recorded_dtype, growable=growable)  # before any work
    return RunPlan(
        out,
        metadata,
        rolled_back,
        read,
        clean,
        tok,
        options,
        budget,
        new,
        known,
        skipped,
        same_as,
        digests,
    )


# ``plan_run``'s options (``prepare``'s but ``progress`` and ``parts``) and their defaults.
_OPTION_DEFAULTS: dict[str, Any] = {
    name: parameter.default
    for name, parameter in inspect.signature(plan_run).parameters.items()
    if parameter.kind is inspect.Parameter.KEYWORD_ONLY
}


@dataclass(frozen=True)
class CheckedOptions:
    """``prepare``'s options checked (``check_options``), as the run uses them."""

    read: ReadOptions
    clean: CleanOptions
    mode: str
    near: NearDedup | None
    tokens_per_shard: int
    seed: int
    val_fraction: float
    format: str
    dtype: str
    budget: int


def check_options(**given: Any) -> CheckedOptions:
    """``prepare``'s options checked, without reading or opening anything (``plan_run``'s
    first step, and what ``data_io.scale`` asks of a saved plan's options); the others of
    ``prepare``'s keyword arguments are ignored."""
    unknown = sorted(set(given) - set(_OPTION_DEFAULTS) - {"progress", "parts"})
    if unknown:
        raise ConfigError(f"prepare has no option {', '.join(unknown)}")
    options = {**_OPTION_DEFAULTS, **given}
    tokenizer, layout, text_field = options["tokenizer"], options["layout"], options["text_field"]
    dtype, format = options["dtype"], options["format"]
    options["tokens_per_shard"] = check_int("tokens_per_shard", options["tokens_per_shard"], 1)
    options["seed"] = check_int("seed", options["seed"], 0)
    options["val_fraction"] = check_val_fraction(options["val_fraction"])
    check_choice("format", format, FORMATS)
    check_choice("dtype", dtype, DTYPES)
    check_choice("invalid_utf8", options["invalid_utf8"], INVALID_UTF8_POLICIES)
    check_choice("layout", layout, LAYOUTS)
    if layout == "mypt":
        dtype, format = mypt_shards(dtype, format)
        if tokenizer not in ("gpt2", "char"):
            raise ConfigError(
                f"MyPT's layout (chosen by MyPT's flags, such as --tokenization, or by --layout "
                f"mypt) is for MyPT's tokenizers gpt2 and char (its trainer knows no other), "
                f"not {tokenizer!r}: pass one of them, or --layout data_io for another tokenizer"
            )
    if not isinstance(text_field, str) or not text_field:
        raise ConfigError(f"text_field must be a non-empty string, got {text_field!r}")
    budget = parse_memory(options["dedup_memory"])
    mode = dedup_mode(options["dedup"])
    near = (
        NearDedup(options["near_ngram"], options["near_bands"], options["near_rows"])
        if mode == "near"
        else None
    )
    check_threads(options["threads"])
    read, clean = read_and_clean_options(**options)
    return CheckedOptions(
        read,
        clean,
        mode,
        near,
        options["tokens_per_shard"],
        options["seed"],
        options["val_fraction"],
        format,
        dtype,
        budget,
    )


def _check_known_read_alike(
    out: Path,
    metadata: dict[str, Any] | None,
    sources: list[Source],
    known: list[str],
    same_as: dict[str, str],
    read: ReadOptions,
) -> None:
    """An input already in ``out`` (by its name, or a copy of one by content) is skipped; given
    with another text field, split or configuration than it was read with, it is refused:
    skipping it would leave out the text that was asked for."""
    if metadata is None or not known:
        return
    prior = {entry["name"]: entry for entry in metadata["inputs"]}
    legacy = metadata.get("options", {})
    kinds = {source.name: source.kind for source in sources}
    for name in known:
        now = read.source_identity(kinds.get(name, ""))
        recorded = prior.get(same_as.get(name, name))
        then = (recorded_read(recorded, legacy) if recorded else None) or {}
        # A choice the record lacks (a key added since) is taken as the same.
        differ = [f"{key} {then.get(key)!r} then, {value!r} now" for key, value in now.items()
                  if then.get(key, value) != value]  # fmt: skip
        if differ:
            copy = f" (the same content as {same_as[name]})" if name in same_as else ""
            raise ConfigError(
                f"{name}{copy} is in {out} already, read with other options "
                f"({'; '.join(differ)}); an input is prepared once: leave it out of this run, "
                "or prepare its other text into a new folder"
            )


def _held_datasets(metadata: dict[str, Any] | None) -> frozenset[tuple[str, str | None]]:
    """The (split, configuration) of each datasets input ``metadata`` records."""
    if metadata is None:
        return frozenset()
    legacy = metadata.get("options", {})
    reads = [
        recorded_read(e, legacy) or {} for e in metadata["inputs"] if e.get("kind") == "datasets"
    ]
    return frozenset((r.get("split", "train"), r.get("hf_config")) for r in reads)


def _resolve(future: Future[Any], work: Callable[..., Any], *args: Any) -> None:
    """``future`` given ``work(*args)``'s result or exception (run in a thread)."""
    try:
        future.set_result(work(*args))
    except BaseException as error:  # handed to the waiting thread, which raises it
        future.set_exception(error)


def _check_output_outside(out: Path, given: list[Any], sources: list[Source]) -> None:
    """The output must not be inside an input folder (a re-run would walk it), nor hold one."""
    resolved = out.resolve()
    folders = [Path(g).resolve() for g in given if Path(g).is_dir()]
    for folder in folders:
        if folder == resolved or folder in resolved.parents:
            raise ConfigError(
                f"the output folder {out} is inside the input folder {folder}; pass an output "
                "folder outside the inputs"
            )
    for source in sources:
        if source.kind != "datasets" and resolved in Path(source.name).parents:
            raise ConfigError(
                f"the output folder {out} holds the input {source.name}; pass an output folder "
                "outside the inputs"
            )
