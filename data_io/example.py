"""``data_io example``: every stage on the embedded example, in a work folder.

clean (raw inputs in upstream schemas -> rows) -> train a tokenizer -> tokenize (then the same
as units on two worker processes, checked byte-identical) -> sample -> load one batch. The embedded cleaned rows (``example_data/rows``: JSONL and Parquet,
multilingual text, code, special-token strings inside text) join the cleaned rows.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
from pathlib import Path

from rich.console import Console

from data_io.errors import OutputError
from data_io.util.console import summary_console

EXAMPLE_DATA = Path(__file__).resolve().parent / "example_data"
REPO_PREFIX_CONFIG = Path(__file__).resolve().parent.parent / "prefix_config.yaml"
EXAMPLE_VOCAB = 2048
EXAMPLE_CONTEXT = 513
EXAMPLE_EPOCHS = 2
DEFAULT_WORKDIR = Path("work/example")
# Written first into a work folder the example made: only such a folder is cleared on a re-run.
WORKDIR_MARKER = ".data_io-example"
# Everything the example writes in its work folder; a re-run removes these and nothing else.
EXAMPLE_OUTPUTS = (
    "data",
    "data_clustered",
    "trained_tokenizers",
    "data_tokenized_example",
    "data_tokenized_scaled",
    "sampled",
    "shards",
    "analytics.md",
    "prefix_config.yaml",
)

# (cleaner name, raw input under example_data/raw, output relative to the work folder)
EXAMPLE_CLEANERS = (
    ("gsm8k_train", "hub/openai/gsm8k", "data/gsm8k_train.jsonl"),
    ("arb", "Platypus/ARB", "data/Platypus"),
    ("flan", "FLAN", "data_clustered/flan"),
    ("ampsmathematica", "amps.tar.gz", "data_clustered/ampsmathematica"),
)


def run_example(workdir: Path, console: Console | None = None) -> None:
    console = console or summary_console()
    workdir = Path(workdir)
    prepare_workdir(workdir)
    step = 0

    def header(title: str) -> None:
        nonlocal step
        step += 1
        console.rule(f"[bold]{step}. {title}")

    header("clean: raw upstream inputs -> instruction/response rows")
    _clean(workdir, console)
    shutil.copytree(EXAMPLE_DATA / "rows" / "data", workdir / "data", dirs_exist_ok=True)
    shutil.copytree(
        EXAMPLE_DATA / "rows" / "data_clustered", workdir / "data_clustered", dirs_exist_ok=True
    )
    inputs = [workdir / "data", workdir / "data_clustered"]
    files = sorted(p.relative_to(workdir) for d in inputs for p in d.rglob("*") if p.is_file())
    console.print(f"{len(files)} files of rows (cleaned + embedded): " + ", ".join(map(str, files)))

    header("train-tokenizer: byte-level BPE")
    from data_io.tokenizer.train import train_tokenizer  # noqa: PLC0415  CLI start-up: `data_io example` imports each stage when it runs it

    tokenizer = workdir / "trained_tokenizers" / "example" / "tokenizer.json"
    trained = train_tokenizer(
        inputs, tokenizer, vocab_size=EXAMPLE_VOCAB, prefix_config=None, progress=False
    )
    console.print(
        f"{tokenizer} (+ config.json, tokenizer_config.json): vocab {trained.vocab_size:,} from "
        f"{trained.texts_used:,} texts in {trained.seconds:.1f} s"
    )

    header("tokenize: rows -> per-file token arrays, then an incremental re-run")
    from data_io.tokenize import tokenize  # noqa: PLC0415  CLI start-up: `data_io example` imports each stage when it runs it
    from data_io.tokenize.summary import print_summary  # noqa: PLC0415  CLI start-up: `data_io example` imports each stage when it runs it

    tokenized = workdir / "data_tokenized_example"
    print_summary(tokenize(inputs, tokenized, tokenizer_path=tokenizer, progress=False), console)
    again = tokenize(inputs, tokenized, tokenizer_path=tokenizer, progress=False)
    console.print(
        f"re-run: {len(again.with_status('unchanged'))} of {len(again.files)} files "
        f"unchanged, nothing re-tokenized ({again.seconds:.2f} s)"
    )
    _show_decoded_row(tokenizer, tokenized, console)

    header("scale out: the same tokenize as units on 2 local worker processes")
    _scaled_tokenize(inputs, tokenizer, tokenized, workdir / "data_tokenized_scaled", console)

    header("sample: stratified epochs + token pool (Markdown report in analytics.md)")
    from data_io.sampling import parse_overrides, sample  # noqa: PLC0415  CLI start-up: `data_io example` imports each stage when it runs it

    sampled = workdir / "sampled"
    prefix_config = (
        REPO_PREFIX_CONFIG if REPO_PREFIX_CONFIG.is_file() else _empty_prefix_config(workdir)
    )
    report = io.StringIO()
    sampled_result = sample(
        parse_overrides(
            [
                f"tokenized_path={tokenized}",
                f"output_path={sampled}",
                f"prefix_config_path={prefix_config}",
                f"epochs={EXAMPLE_EPOCHS}",
                f"context_size={EXAMPLE_CONTEXT}",
            ]
        ),
        stdout=report,
        progress=False,
        report_dir=workdir,  # the figure is linked relative to analytics.md, saved there
    )
    (workdir / "analytics.md").write_text(report.getvalue(), encoding="utf-8")
    console.print(
        f"{sampled} : {sampled_result.rows_per_epoch} rows per epoch, "
        f"{sampled_result.total_length:,} tokens per epoch; report in {workdir / 'analytics.md'}"
    )

    header("load: one packed prefix-LM batch from epoch 0")
    from data_io.load import SampledDataset, format_batch  # noqa: PLC0415  CLI start-up: `data_io example` imports each stage when it runs it

    dataset = SampledDataset(sampled, epoch=0, batch_max_length=EXAMPLE_CONTEXT - 1)
    console.print(format_batch(next(iter(dataset))), markup=False)

    header("load: a flat-shard mixture of tokenized tasks, with an anneal phase")
    _flat_shard_mixture(tokenized, tokenizer, console)

    header("prepare: raw text -> MyPT-style train/val token shards, then load them")
    _prepare_shards(workdir / "shards", tokenizer, console)
    console.rule("[bold green]example done")


def _prepare_shards(shards: Path, tokenizer: Path, console: Console) -> None:
    """The other seeds' first step: raw text (the embedded FLAN inputs) into train/val shards,
    a re-run that finds nothing to do, the same with near-duplicates and repeated lines
    removed, and the shards
    read by the loader as they are."""
    from data_io.load import MemoryMappedDataset  # noqa: PLC0415  CLI start-up: `data_io example` imports each stage when it runs it
    from data_io.prepare import prepare  # noqa: PLC0415  CLI start-up: `data_io example` imports each stage when it runs it
    from data_io.prepare.summary import print_summary as print_prepare_summary  # noqa: PLC0415  CLI start-up: `data_io example` imports each stage when it runs it

    options = {
        "tokenizer": str(tokenizer),
        "text_field": "inputs",
        "tokens_per_shard": 1024,
        "val_fraction": 0.2,
        "progress": False,
    }
    first = prepare([EXAMPLE_DATA / "raw" / "FLAN"], shards, **options)
    print_prepare_summary(first)
    again = prepare([EXAMPLE_DATA / "raw" / "FLAN"], shards, **options)
    console.print(f"re-run: nothing to do = {again.nothing_to_do}")
    # The same inputs and a page published three times with a word changed each time, under
    # the site's footer.
    copies = shards.with_name("near_copies.jsonl")
    copies.write_text(
        "".join(
            json.dumps({"inputs": _PAGE.replace("Tuesday", day) + _FOOTER}) + "\n"
            for day in ("Tuesday", "Friday", "Sunday")
        )
    )
    inputs = [EXAMPLE_DATA / "raw" / "FLAN", copies]
    exact = prepare(inputs, shards.with_name(shards.name + "_exact"), **options)
    near = prepare(inputs, shards.with_name(shards.name + "_near"), dedup="near", **options)
    lines = prepare(inputs, shards.with_name(shards.name + "_lines"), dedup="line", **options)
    console.print(
        f"with a page published three times: --dedup doc drops {exact.duplicates} documents, "
        f"--dedup near (MinHash LSH over word 5-grams) {near.duplicates}; --dedup line (MyPT's) "
        f"drops {lines.duplicate_lines} repeated lines, {lines.duplicates} documents left empty"
    )
    train = MemoryMappedDataset(shards / "train", 65, file_pattern="*.bin")
    first = train[0]["input_ids"][:12].tolist()
    console.print(f"{len(train)} windows of 64+1 tokens in {shards / 'train'}; first ids {first}")


# A page a crawl finds three times, a word apart (the example's near-duplicates).
_PAGE = (
    "The town library opens its new reading room on Tuesday. The room has forty seats, long "
    "tables with lamps, shelves of local history and a corner for children, and it stays open "
    "until nine in the evening on weekdays. Volunteers will show visitors the archive of old "
    "newspapers, the maps of the valley drawn a century ago and the photographs of the first "
    "railway station. Entry is free, and the librarians ask only that visitors leave their "
    "umbrellas and coats at the desk by the door."
)


_FOOTER = "\nThe town library newsletter | Share | Print | Subscribe"


def _flat_shard_mixture(tokenized: Path, tokenizer: Path, console: Console) -> None:
    """A tokenized task's ``tokens.npy`` is a flat stream of rows, each ending with the
    ``eoa`` token: a flat token shard (formats.md §6). Mix three tasks by weight, anneal onto
    the first from step 3, stop, and resume from the saved state with 2 DataLoader workers."""
    from data_io.load import DataConfig, DatasetSource, LoaderConfig, build_dataloader  # noqa: PLC0415  CLI start-up: `data_io example` imports each stage when it runs it
    from data_io.load.config import TrainSection  # noqa: PLC0415  CLI start-up: `data_io example` imports each stage when it runs it
    from data_io.tokenizer.encoder import TextEncoder  # noqa: PLC0415  CLI start-up: `data_io example` imports each stage when it runs it

    # The three largest tasks, so that a 64-token window fits each of them many times.
    shards = sorted(tokenized.glob("*/tokens.npy"), key=lambda p: (-p.stat().st_size, p))
    tasks = sorted(p.parent for p in shards[:3])
    eoa = TextEncoder.from_file(tokenizer).token_id("<|box_end|>")
    sources = [
        DatasetSource(path=str(t), file_pattern="tokens.npy", name=t.name, weight=i + 1.0)
        for i, t in enumerate(tasks)
    ]
    data = DataConfig(
        datasets=sources,
        pack_sequences=True,
        eos_token_id=eoa,
        num_workers=0,
        anneal_start_step=3,
        anneal_weights={tasks[0].name: 1.0},
        mix_temperature=1.0,
    )
    config = LoaderConfig(data=data, train=TrainSection(batch_size=4, seq_len=64, seed=0))
    loader = build_dataloader(config.validate(), rank=0, world_size=1)
    names = loader.names or []
    batches = iter(loader)
    for step in range(5):
        phase = loader.phase  # the phase of the step about to be drawn
        drawn = ", ".join(names[i] for i in next(batches)["dataset_idx"].tolist())
        console.print(f"step {step} (phase {phase}, lr_scale {loader.lr_scale}): {drawn}")
    console.print(f"tokens per source: {loader.token_counts()}", markup=False)
    state = loader.state_dict()
    config.data.num_workers = 2
    resumed = build_dataloader(config, rank=0, world_size=1)
    resumed.load_state_dict(state)
    following = next(iter(resumed))
    console.print(
        f"resumed at step {state['state']['step']} with 2 workers: batch "
        f"{tuple(following['input_ids'].shape)} from "
        + ", ".join(names[i] for i in following["dataset_idx"].tolist()),
        markup=False,
    )


def prepare_workdir(workdir: Path) -> None:
    """Make ``workdir`` ready for a fresh run without deleting anything the example did not write.

    A new or empty folder is taken over (marked); a folder marked by an earlier run has that
    run's outputs removed; any other folder is refused, since its files are someone else's.
    """
    if workdir.exists() and not workdir.is_dir():
        raise OutputError(
            f"--workdir {workdir}: exists and is not a folder; pass a new or empty folder"
        )
    marker = workdir / WORKDIR_MARKER
    if workdir.is_dir() and not marker.is_file():
        foreign = sorted(entry.name for entry in workdir.iterdir())
        if foreign:
            shown = ", ".join(foreign[:5]) + (", …" if len(foreign) > 5 else "")
            raise OutputError(
                f"--workdir {workdir}: the folder is not empty ({shown}) and was not made by "
                f"`data_io example` (no {WORKDIR_MARKER} file), so the example will not write "
                "into it; pass a new or empty folder, or remove its contents yourself"
            )
    try:
        workdir.mkdir(parents=True, exist_ok=True)
        marker.write_text(
            "This folder was made by `data_io example`; a re-run deletes the example's outputs "
            f"here ({', '.join(EXAMPLE_OUTPUTS)}) and keeps everything else.\n",
            encoding="utf-8",
        )
        for name in EXAMPLE_OUTPUTS:
            _remove(workdir / name)
    except OSError as exc:
        raise OutputError(f"--workdir {workdir}: cannot prepare the folder: {exc}") from exc


def _remove(path: Path) -> None:
    # A link is removed, never followed: what it points to is not the example's.
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _scaled_tokenize(
    inputs: list[Path], tokenizer: Path, reference: Path, out: Path, console: Console
) -> None:
    """``--executor local``: files cut into units (small units, to show the cutting), run on two
    worker processes, finalized; the output is compared with the plain run's, byte for byte."""
    from data_io.scale import ExecutorSettings, scale_tokenize  # noqa: PLC0415  CLI start-up: `data_io example` imports each stage when it runs it
    from data_io.tokenize import tokenize_options  # noqa: PLC0415  CLI start-up: `data_io example` imports each stage when it runs it

    options = tokenize_options(inputs, out, tokenizer_path=tokenizer, progress=False)
    outcome = scale_tokenize(
        options,
        ExecutorSettings(kind="local", workers=2, threads_per_unit=1),
        unit_mb=0.004,
        progress=False,
    )
    split = sum(1 for u in outcome.manifest.units if u.span["kind"] != "whole")
    files = {p.relative_to(out): p for p in out.rglob("*") if p.is_file()}
    same = all(
        (reference / name).read_bytes() == path.read_bytes()
        for name, path in files.items()
        if ".data_io_scale" not in name.parts and name.name != ".data_io.lock"
    )
    console.print(
        f"{len(outcome.manifest.units)} units ({split} of them parts of a cut file) on 2 workers "
        f"-> {out}; byte-identical to the plain run: {'yes' if same else 'NO'}; "
        f"plan and unit records in {outcome.manifest.root}"
    )
    if not same or outcome.unfinished:
        raise OutputError(f"the scaled-out tokenize into {out} differs from the plain run's")


def _clean(workdir: Path, console: Console) -> None:
    from data_io.cleaning import run_cleaner  # noqa: PLC0415  CLI start-up: `data_io example` imports each stage when it runs it
    from data_io.cleaning.registry import find  # noqa: PLC0415  CLI start-up: `data_io example` imports each stage when it runs it

    for name, raw, out in EXAMPLE_CLEANERS:
        report = run_cleaner(
            find(name).cleaner, EXAMPLE_DATA / "raw" / raw, workdir / out, progress=False
        )
        console.print(report.format(), markup=False)


def _show_decoded_row(tokenizer: Path, tokenized: Path, console: Console) -> None:
    import numpy as np  # noqa: PLC0415  CLI start-up: `data_io example` imports each stage when it runs it
    from tokenizers import Tokenizer  # noqa: PLC0415  heavy: tokenizers, only to decode with the HF library

    task = tokenized / "translations.jsonl"
    tokens = np.load(task / "tokens.npy", mmap_mode="r")
    start, inst_len, resp_len = (
        int(np.load(task / f"{k}.npy")[5]) for k in ("inst_start", "inst_len", "resp_len")
    )
    tok = Tokenizer.from_file(str(tokenizer))
    ids = tokens[start : start + inst_len + resp_len].tolist()
    console.print(f"row 5 of {task.name}: {inst_len} instruction + {resp_len} response tokens")
    console.print(f"  ids:     {ids[:24]}{' …' if len(ids) > 24 else ''}", markup=False)
    console.print(
        f"  decoded: {json.dumps(tok.decode(ids, skip_special_tokens=False), ensure_ascii=False)}",
        markup=False,
    )


def _empty_prefix_config(workdir: Path) -> Path:
    path = workdir / "prefix_config.yaml"
    path.write_text("[]\n", encoding="utf-8")
    return path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "example",
        help="run every stage on the embedded example",
        description="Clean the embedded raw inputs, train a tokenizer, tokenize (twice: the "
        "second run is incremental; then as units on two local worker processes), sample two "
        "epochs, load one packed batch and a flat-shard mixture of the tokenized tasks, and "
        "prepare raw text into train/val shards that the loader reads, all inside the work "
        "folder.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--workdir",
        default=DEFAULT_WORKDIR,
        type=Path,
        help="folder for every output; must be new, empty, or made by an earlier run of the "
        f"example (marked by a {WORKDIR_MARKER} file), whose outputs are then replaced while "
        "other files are kept",
    )
    parser.set_defaults(run=lambda args: run_example(args.workdir) or 0)
