"""``metadata_after_run``: the output folder's ``dataset_metadata.json`` once a run is done
(its shards, inputs, runs and options, with MyPT's keys)."""

from __future__ import annotations

import time
from typing import Any

from data_io.formats.raw_text import recorded_read
from data_io.prepare.result import PrepareResult
from data_io.prepare.state import FORMAT_VERSION, PRODUCER, SPLITS
from data_io.prepare.tokenizers import PrepTokenizer

VAL_SPLIT_RULE = (
    "by document: val when a 64-bit mix of the document's 128-bit content hash and the seed, "
    "as a fraction of 2^64, is below val_fraction; an earlier document never changes split"
)


def metadata_after_run(
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
