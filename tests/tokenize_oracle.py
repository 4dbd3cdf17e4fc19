"""An independent re-derivation of the tokenized layout (formats.md §3) with the Python
``tokenizers`` package, row by row, and readers that load what data_io wrote."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from tokenizers import Tokenizer

DEFAULT_TAGS = {
    "direct": "<|object_ref_start|>",
    "cot": "<|object_ref_end|>",
    "noisy": "<|quad_start|>",
    "synth": "<|quad_end|>",
}


def read_rows(path: Path) -> list[dict[str, str]]:
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return pq.read_table(path).to_pylist()


def expected_layout(
    tokenizer_path: Path, rows: list[dict[str, str]], tags: dict[str, str] = DEFAULT_TAGS
) -> dict[str, np.ndarray]:
    tok = Tokenizer.from_file(str(tokenizer_path))
    tok.encode_special_tokens = True
    boq, eoq, eoa = (tok.token_to_id(t) for t in ("<|im_start|>", "<|im_end|>", "<|box_end|>"))
    tokens: list[int] = []
    arrays: dict[str, list[int]] = {
        k: [] for k in ("inst_start", "inst_len", "resp_start", "resp_len")
    }
    for row in rows:
        tag_ids = (
            [tok.token_to_id(tags[t]) for t in row["condition"].split(",")]
            if row["condition"]
            else []
        )
        inst = [boq, *tag_ids, *tok.encode(row["instruction"], add_special_tokens=False).ids, eoq]
        resp = [*tok.encode(row["response"], add_special_tokens=False).ids, eoa]
        arrays["inst_start"].append(len(tokens))
        arrays["inst_len"].append(len(inst))
        arrays["resp_start"].append(len(tokens) + len(inst))
        arrays["resp_len"].append(len(resp))
        tokens += inst + resp
    out = {k: np.array(v, dtype=np.uint64) for k, v in arrays.items()}
    out["tokens"] = np.array(tokens, dtype=np.uint64)
    return out


def load_task(folder: Path) -> dict[str, np.ndarray]:
    return {
        name: np.load(folder / f"{name}.npy")
        for name in ("tokens", "inst_start", "inst_len", "resp_start", "resp_len")
    }


def task_metadata(folder: Path) -> dict:
    return json.loads((folder / "metadata.json").read_text())


def other_tokenizer(small_tokenizer: Path, folder: Path) -> Path:
    """Same behaviour, other bytes: another tokenizer hash."""
    folder.mkdir(parents=True)
    data = json.loads(small_tokenizer.read_text())
    data["truncation"] = None
    path = folder / "tokenizer.json"
    path.write_text(json.dumps(data))
    return path
