"""``prepare(...)``: the Python API of ``data_io prepare`` (raw text → train/val token shards)."""

from __future__ import annotations

import functools
import inspect
import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from data_io.errors import ConfigError, InputError
from data_io.formats.raw_text import (
    FOLDER_READ_KEYS,
    INVALID_UTF8_POLICIES,
    ReadOptions,
    Source,
    check_datasets_options_used,
    expand_inputs,
    recorded_read,
)
from data_io.prepare.dedup import (
    ONLINE_ASSUMED_DOCUMENT_BYTES,
    ONLINE_ASSUMED_LINE_BYTES,
    ONLINE_BYTES_PER_BAND,
    ONLINE_BYTES_PER_RECORD,
    DedupOverflow,
    HashDedup,
    NearDedup,
    OnlineDedup,
    dedup_mode,
    parse_memory,
)
from data_io.prepare.identity import PendingDigests, plan_inputs
from data_io.prepare.lines import LineDedup, LineSpool, write_line_shards
from data_io.prepare.normalize import CleanOptions, CleanStats
from data_io.prepare.parts import parts_lookup
from data_io.prepare.pipeline import (
    ShardSink,
    Spool,
    check_dtype,
    check_threads,
    encode_inputs,
    encoder_threads,
    write_shards,
)
from data_io.prepare.progress import ProgressBar
from data_io.prepare.result import PrepareResult
from data_io.prepare.shards import FORMATS, ShardWriter, number_across
from data_io.prepare.split import check_val_fraction
from data_io.prepare.state import (
    FORMAT_VERSION,
    METADATA_FILE,
    PRODUCER,
    SPLITS,
    STATE_DIR,
    DamagedShards,
    begin_run,
    check_same_options,
    end_run,
    exclusive,
    open_output,
    rollback,
    split_records,
    write_metadata,
)
from data_io.prepare.tokenizers import (
    CHAR_STATE_FILE,
    PrepTokenizer,
    load_tokenizer,
    write_state,
)
from data_io.stage import write_finalized
from data_io.util.stale import pid_alive

__all__ = ["DTYPES", "LAYOUTS", "PrepareResult", "RunPlan", "plan_run", "prepare"]

DTYPES = ("auto", "uint8", "uint16", "uint32")
# data_io: shards numbered per split, the smallest dtype. mypt: MyPT's layout (its guide): uint32
# .bin shards numbered across the splits, tokenizer_state.json for gpt2 and char.
LAYOUTS = ("data_io", "mypt")
VAL_SPLIT_RULE = (
    "by document: val when a 64-bit mix of the document's 128-bit content hash and the seed, "
    "as a fraction of 2^64, is below val_fraction; an earlier document never changes split"
)


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return str(value)


def _one_run_per_folder(function: Callable[..., PrepareResult]) -> Callable[..., PrepareResult]:
    """Run ``prepare`` holding its output folder (``state.exclusive``)."""

    @functools.wraps(function)
    def locked(inputs: Any, output: str | os.PathLike[str], **options: Any) -> PrepareResult:
        with exclusive(Path(output).expanduser()):
            return function(inputs, output, **options)

    return locked


@_one_run_per_folder
def prepare(
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
    progress: bool | None = None,
    parts: str | os.PathLike[str] | None = None,
) -> PrepareResult:
    """Prepare ``inputs`` into train/val token shards in ``output`` (see ``data_io prepare -h``).

    Incremental: inputs already prepared into ``output`` (same path, same content) are skipped;
    new ones are appended as new shards, the earlier shards are left as they are. ``parts``: a
    folder where ``data_io.scale`` units left pass 1 of some sources (``prepare.parts``); those
    sources are taken from there (default: the parts an unfinished scaled run left in
    ``output``).
    """
    started = time.perf_counter()
    plan = plan_run(
        inputs,
        output,
        tokenizer=tokenizer,
        tokens_per_shard=tokens_per_shard,
        val_fraction=val_fraction,
        normalize=normalize,
        filter=filter,
        min_line_chars=min_line_chars,
        min_doc_chars=min_doc_chars,
        dedup=dedup,
        dedup_memory=dedup_memory,
        near_ngram=near_ngram,
        near_bands=near_bands,
        near_rows=near_rows,
        text_field=text_field,
        doc_per_line=doc_per_line,
        invalid_utf8=invalid_utf8,
        format=format,
        dtype=dtype,
        seed=seed,
        threads=threads,
        eos_token=eos_token,
        split=split,
        hf_config=hf_config,
        layout=layout,
    )
    out, metadata, new = plan.out, plan.metadata, plan.new
    result = PrepareResult(
        str(out), not new, [s.name for s, _ in new], plan.known, plan.skipped, plan.same_as
    )
    result.rolled_back = plan.rolled_back
    result.val_fraction = float(plan.options["val_fraction"])
    # The parts an unfinished scaled run left here, taken unless other parts are given.
    left_by_plan = parts is None and (out / SCALE_PARTS).is_dir()
    if left_by_plan:
        parts = out / SCALE_PARTS
    lookup = None
    if parts is not None:
        plan.digests.wait()  # a part is matched to its source by content
        find = parts_lookup(Path(parts), {s.name: e for s, e in new}, plan.options)

        def lookup(source: Source) -> Any:
            part = find(source)
            if part is not None:
                result.from_parts.append(source.name)
            return part

    if new:
        sources = [s for s, _ in new]
        # Straight to the shards when nothing is left to decide after pass 1: no dedup, or
        # duplicates (documents, lines, near-duplicates) decided as they arrive while their
        # records fit the budget (a run whose records outgrow it is rolled back and goes again
        # with sorted runs).
        mode = plan.options["dedup"]
        # Bytes of input per record the online set would hold: a line, a document, or one of
        # a document's near-dedup bands.
        bands = plan.options.get("near_dedup", {}).get("bands", 1)
        record = {"line": ONLINE_ASSUMED_LINE_BYTES, "near": ONLINE_ASSUMED_DOCUMENT_BYTES // bands}
        direct = (
            plan.tok.kind != "char"
            and lookup is None
            and (
                mode is False
                or OnlineDedup.fits(
                    sum(s.size for s in sources),
                    plan.budget,
                    record.get(mode, ONLINE_ASSUMED_DOCUMENT_BYTES),
                    ONLINE_BYTES_PER_BAND if mode == "near" else ONLINE_BYTES_PER_RECORD,
                )
            )
        )
        with encoder_threads(threads):
            try:
                _run(out, metadata, sources, [e for _, e in new], plan, progress, result, lookup,
                     direct)  # fmt: skip
                overflowed = False
            except DedupOverflow:
                # Outside the handler: its traceback would keep the first try's set alive.
                overflowed = True
            if overflowed:
                _run(out, metadata, sources, [e for _, e in new], plan, progress, result, lookup,
                     direct=False)  # fmt: skip
    elif metadata is not None:
        result.dtype, result.vocab_size = metadata["dtype"], metadata["vocab_size"]
        result.eos_id = metadata["eos_id"]
        result.dataset_tokens = {s: metadata["splits"][s]["tokens"] for s in SPLITS}
    if left_by_plan:
        result.settled_plan = _settle_scaled_run(out)
    result.seconds = time.perf_counter() - started
    return result


def _settle_scaled_run(out: Path) -> bool:
    """After a plain run that took its sources from the parts an unfinished scaled run left in
    ``out``: when the output now holds every input of that run's plan, each read as the plan
    read it and with the plan's options, and none of its units still runs, the plan's work is
    done as its finalize would have done it: its parts are deleted and it is marked finalized
    (so ``data_io status`` says the output is complete, not that units wait). Whether it was."""
    root = out / SCALE_PARTS.parent
    try:
        plan = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
        metadata = json.loads((out / METADATA_FILE).read_text(encoding="utf-8"))
        made, now = plan["options"]["run"], metadata["options"]

        def identities(entries: list[dict[str, Any]], legacy: dict[str, Any]) -> set[Any]:
            return {(e["name"], e["sha256"], repr(recorded_read(e, legacy))) for e in entries}

        planned = identities(plan["inputs"], made)
        held = identities(metadata["inputs"], now)
    except (OSError, ValueError, KeyError, TypeError):
        return False  # no plan of this stage to settle (or not one this run can read)
    shared = lambda options: {k: v for k, v in options.items() if k not in FOLDER_READ_KEYS}  # noqa: E731
    if plan.get("stage") != "prepare" or not planned <= held or shared(made) != shared(now):
        return False
    if _units_running(root / "units"):
        return False
    shutil.rmtree(out / SCALE_PARTS, ignore_errors=True)
    write_finalized(root, {"units": len(plan.get("units", [])), "by": "a run without --executor"})
    return True


def _units_running(units: Path) -> bool:
    """Whether a unit of the plan may still run: started, not ended, and its process alive on
    this host, or started on another host (whose processes cannot be asked)."""
    for started in units.glob("*.started"):
        unit = started.name.removesuffix(".started")
        if (units / f"{unit}.done").exists() or (units / f"{unit}.failed").exists():
            continue
        try:
            record = json.loads(started.read_text(encoding="utf-8"))
            if record.get("host") != socket.gethostname() or pid_alive(int(record["pid"])):
                return True
        except (OSError, ValueError, KeyError, TypeError):
            return True  # unreadable: taken to run
    return False


# Where a scaled-out prepare's units leave their parts (data_io.scale).
SCALE_PARTS = Path(".data_io_scale") / "parts"


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
    options["tokens_per_shard"] = _check_int("tokens_per_shard", options["tokens_per_shard"], 1)
    options["seed"] = _check_int("seed", options["seed"], 0)
    options["val_fraction"] = check_val_fraction(options["val_fraction"])
    _check_choice("format", format, FORMATS)
    _check_choice("dtype", dtype, DTYPES)
    _check_choice("invalid_utf8", options["invalid_utf8"], INVALID_UTF8_POLICIES)
    _check_choice("layout", layout, LAYOUTS)
    if layout == "mypt":
        dtype, format = _mypt_shards(dtype, format)
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


def _with_reads(old: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The inputs ``old`` records, each with what chose its text (``read``): an input recorded
    before inputs kept theirs gets the folder's options' values, which the options written now
    no longer hold."""
    if old is None:
        return []
    legacy = old.get("options", {})
    upgraded = []
    for entry in old["inputs"]:
        read = recorded_read(entry, legacy)
        upgraded.append({**entry, "read": read} if read and "read" not in entry else entry)
    return upgraded


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


def _mypt_shards(dtype: str, format: str) -> tuple[str, str]:
    """MyPT's shards: raw ``.bin`` of ``uint32``, which its trainer memory-maps without reading
    any metadata (``np.memmap(path, dtype=np.uint32)``)."""
    if dtype not in ("auto", "uint32"):
        raise ConfigError(
            f"layout mypt writes uint32 shards (MyPT's trainer reads them as uint32), not "
            f"{dtype}; leave --dtype unset, or use --layout data_io for {dtype} shards"
        )
    if format != "bin":
        raise ConfigError(
            f"layout mypt writes raw .bin shards (MyPT's), not {format}; leave --format unset, "
            "or use --layout data_io"
        )
    return "uint32", "bin"


def read_and_clean_options(
    *,
    text_field: str = "text",
    doc_per_line: bool = False,
    invalid_utf8: str = "replace",
    split: str = "train",
    hf_config: str | None = None,
    normalize: bool = True,
    filter: bool = True,
    min_line_chars: int = 2,
    min_doc_chars: int = 20,
    **_: Any,
) -> tuple[ReadOptions, CleanOptions]:
    """How sources are read and cleaned, from ``prepare``'s keyword arguments (the others are
    ignored): shared by a run and by ``scale`` units that read one source each."""
    read = ReadOptions(text_field, bool(doc_per_line), invalid_utf8, split, hf_config)
    return read, CleanOptions(bool(normalize), bool(filter), min_line_chars, min_doc_chars)


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


def _run(
    out: Path,
    metadata: dict[str, Any] | None,
    sources: list[Source],
    entries: list[dict[str, Any]],
    plan: RunPlan,
    progress: bool | None,
    result: PrepareResult,
    parts: Callable[[Source], Any] | None = None,
    direct: bool = False,
) -> None:
    """One run over the new sources; on any failure the folder is rolled back.

    ``direct``: pass 1 writes the shards itself (``ShardSink``), duplicates (documents, lines
    or near-duplicates' bands) dropped as they arrive (``OnlineDedup``; ``DedupOverflow`` when
    its records outgrow the budget). Else pass 1 spools the tokens (the cleaned text, under
    ``line``), and pass 2 copies (or rebuilds and encodes) the documents the dedup keeps."""
    tok, options, budget = plan.tok, plan.options, plan.budget
    run = len(metadata["runs"]) if metadata else 0
    writers: dict[str, ShardWriter] = {}
    hashes = metadata.get("dedup_hashes") if metadata else None
    prior = out / STATE_DIR / hashes if hashes else None
    by_lines = options["dedup"] == "line"
    try:
        # Inside the rollback's reach: a run stopped here (Ctrl-C during the journal's fsync)
        # left its work folder without a journal, and the next run took ``.prepare`` for
        # files prepare did not write.
        work = begin_run(out, run)
        online = None
        if direct:
            writers = _writers(out, metadata, options, tok)
            spool: Spool | ShardSink | LineSpool = ShardSink(writers)
            if options["dedup"]:
                near = options.get("near_dedup") if options["dedup"] == "near" else None
                online = OnlineDedup(
                    budget, sum(s.size for s in sources), near["bands"] if near else None
                )
                if prior is not None:
                    online.load_prior(prior)
        else:
            spool = LineSpool(work) if by_lines else Spool(work)
        dedup = HashDedup(work, budget) if options["dedup"] and not direct else None
        lines = LineDedup(online, dedup) if by_lines else None
        if lines is not None:  # the line records go through ``lines``, not the documents'
            online = dedup = None
        bar = ProgressBar(sum(s.size for s in sources), progress)
        try:
            read_stats, clean_stats = encode_inputs(
                sources,
                plan.read,
                plan.clean,
                tok,
                dedup,
                options["seed"],
                options["val_fraction"],
                spool,
                bar,
                parts,
                NearDedup(**options["near_dedup"]) if "near_dedup" in options else None,
                online,
                lines,
            )
        finally:
            spool.close()
            bar.close()
        if spool.documents == 0 and metadata is None:
            raise InputError(_nothing_left(read_stats.documents, clean_stats))
        tok.finish()
        online = lines.online if lines is not None else online
        if online is not None:
            hashes = f"hashes_{run:05d}.u64"
            online.write_kept(out / STATE_DIR / hashes)
            result.duplicates, result.dedup_peak_bytes = online.duplicates, online.peak_bytes
            if lines is not None:
                result.duplicate_lines, result.duplicates = online.duplicates, lines.emptied
        if isinstance(spool, ShardSink):
            result.documents = spool.per_split
        elif isinstance(spool, LineSpool):
            assert lines is not None and lines.after is not None
            keep = np.zeros(0, dtype=np.bool_)
            if spool.lines:  # (none new: the earlier runs' hashes file stays as it is)
                hashes = f"hashes_{run:05d}.u64"
                keep, result.duplicate_lines = lines.after.keep_mask(
                    spool.lines, prior, out / STATE_DIR / hashes
                )
                result.dedup_peak_bytes = lines.after.peak_bytes
                result.dedup_runs = lines.after.spilled
            writers = _writers(out, metadata, options, tok)
            sink = ShardSink(writers)
            result.duplicates = write_line_shards(spool, keep, tok, sink)
            result.documents = sink.per_split
        else:
            keep = None
            if dedup is not None and spool.documents:
                hashes = f"hashes_{run:05d}.u64"
                keep, result.duplicates = dedup.keep_mask(
                    spool.documents, prior, out / STATE_DIR / hashes
                )
                result.dedup_peak_bytes, result.dedup_runs = dedup.peak_bytes, dedup.spilled
            writers = _writers(out, metadata, options, tok)
            result.documents = write_shards(spool, keep, tok, writers)
        dtype = next(iter(writers.values())).dtype
        records = {s: w.finish() for s, w in writers.items()}
        mypt = options.get("layout") == "mypt"
        if mypt:
            number_across([writers[s] for s in SPLITS])
        for writer in writers.values():
            writer.commit()
        tokenizer_files = tok.save(out)
        if mypt and tok.spec == "gpt2":
            # MyPT's trainer rebuilds its tokenizer from this file (token_kind, chars).
            write_state(out, {"token_kind": "gpt2", "chars": None})
            tokenizer_files.append(CHAR_STATE_FILE)
        for s, w in writers.items():
            result.tokens[s] = w.tokens_added
            result.shards_written[s] = [shard.final.name for shard in w.written]
        result.documents_read = read_stats.documents
        result.bytes_read = sum(s.size for s in sources)
        result.text_chars = read_stats.text_chars
        result.invalid_utf8 = read_stats.invalid_utf8_lines
        result.skipped_files.extend(f"{name} (no documents)" for name in read_stats.empty_sources)
        result.cleaning = clean_stats.as_dict()
        result.dtype, result.vocab_size, result.eos_id = dtype.name, tok.vocab_size, tok.eos_id
        plan.digests.wait()  # the new files' hashes, read while pass 1 ran
        new_metadata = _metadata(
            metadata, run, records, options, tok, tokenizer_files, hashes, entries, result
        )
        result.dataset_tokens = {s: new_metadata["splits"][s]["tokens"] for s in SPLITS}
        write_metadata(out, new_metadata)
        old_hashes = metadata.get("dedup_hashes") if metadata else None
        if old_hashes and old_hashes != hashes:  # merged into the new file: no longer referenced
            (out / STATE_DIR / old_hashes).unlink(missing_ok=True)
    except BaseException as error:
        for writer in writers.values():
            try:
                writer.abandon()
            except OSError as failed:  # the others, and the rollback, still run
                error.add_note(f"while removing this run's shards: {failed}")
        try:
            rollback(out, metadata)
        except DamagedShards as damaged:  # left untouched; the run's own error comes first
            error.add_note(str(damaged))
        raise
    end_run(out, work)


def _writers(
    out: Path, metadata: dict[str, Any] | None, options: dict[str, Any], tok: PrepTokenizer
) -> dict[str, ShardWriter]:
    """The train and val shard writers, in the dtype of the vocabulary (or of earlier runs)."""
    dtype = check_dtype(
        options["dtype"],
        tok.vocab_size,
        metadata and metadata["dtype"],
        growable=tok.kind == "char",
    )
    return {
        s: ShardWriter(
            out / s,
            options["tokens_per_shard"],
            dtype,
            options["format"],
            split_records(metadata, s),
        )
        for s in SPLITS
    }


def _nothing_left(read: int, stats: CleanStats) -> str:
    dropped = ", ".join(f"{count} {why.replace('_', ' ')}" for why, count in stats.dropped.items())
    return (
        f"no document is left to prepare: {read} read, all dropped ({dropped}); pass "
        "--no-filter or a lower --min-doc-chars, or inputs with more text"
    )


def _metadata(
    old: dict[str, Any] | None,
    run: int,
    records: dict[str, list[Any]],
    options: dict[str, Any],
    tok: PrepTokenizer,
    tokenizer_files: list[str],
    hashes: str | None,
    entries: list[dict[str, Any]],
    result: PrepareResult,
) -> dict[str, Any]:
    splits = {}
    for s in SPLITS:
        before = old["splits"][s]["documents"] if old else 0
        splits[s] = {
            "tokens": sum(r.tokens for r in records[s]),
            "documents": before + result.documents[s],
            "shards": [r.as_dict() for r in records[s]],
        }
    this_run = {
        "run": run,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "inputs": [e["name"] for e in entries],
        "documents_read": result.documents_read,
        "cleaning": result.cleaning,
        "invalid_utf8_replaced": result.invalid_utf8,
        "duplicates": result.duplicates,
        **({"duplicate_lines": result.duplicate_lines} if options["dedup"] == "line" else {}),
        "documents": result.documents,
        "tokens": result.tokens,
        "shards_written": result.shards_written,
    }
    return {
        "producer": PRODUCER,
        "format_version": FORMAT_VERSION,
        "dtype": result.dtype,
        "vocab_size": tok.vocab_size,
        "eos_id": tok.eos_id,
        "shard_format": options["format"],
        "tokens_per_shard": options["tokens_per_shard"],
        "tokenization": tok.spec,  # MyPT's name for the tokenizer kind
        "tokenizer": {
            "spec": tok.spec,
            "kind": tok.kind,
            "fingerprint": tok.fingerprint(),
            "files": tokenizer_files,
        },
        "options": options,
        "val_split": VAL_SPLIT_RULE,
        "splits": splits,
        "total_tokens": sum(split["tokens"] for split in splits.values()),
        "train_tokens": splits["train"]["tokens"],
        "val_tokens": splits["val"]["tokens"],
        "num_train_shards": len(splits["train"]["shards"]),
        "num_val_shards": len(splits["val"]["shards"]),
        # MyPT's keys (its prepare_dataset.py), for its tools and scripts that read them.
        "total_shards": sum(len(split["shards"]) for split in splits.values()),
        "train_shards": len(splits["train"]["shards"]),
        "val_shards": len(splits["val"]["shards"]),
        "input_files": [e["name"] for e in (old["inputs"] if old else [])]
        + [e["name"] for e in entries],
        "inputs": _with_reads(old) + [{**e, "run": run} for e in entries],
        "runs": (old["runs"] if old else []) + [this_run],
        "dedup_hashes": hashes,
    }
