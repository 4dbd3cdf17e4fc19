"""Build small sampled output folders (formats.md §4) with numpy, for the loader tests.

Each pool row r is ``[BOQ, ROW_TAG + r, ...filler..., EOQ]`` + ``[...filler..., EOA]``, so any
batch can be traced back to the rows it holds: the instruction's second token names the row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BOQ, EOQ, EOA = 6, 7, 11
ROW_TAG = 100  # token id of pool row r's tag is ROW_TAG + r


@dataclass
class Sampled:
    path: Path
    tokens: np.ndarray
    inst: list[list[int]]  # pool row r's instruction tokens
    resp: list[list[int]]
    epochs: list[np.ndarray]  # epoch k -> pool row of every epoch row


def write_sampled(
    folder: Path,
    *,
    n_rows: int = 200,
    epochs: int = 2,
    max_seq_len: int = 65,
    inst_range: tuple[int, int] = (3, 20),
    resp_range: tuple[int, int] = (1, 40),
    dtype: str = "uint16",
    vocab_size: int = 4096,
    seed: int = 0,
    split_response: bool = False,
    repeat: int = 1,
) -> Sampled:
    """Write tokens.npy, epoch_<k>/*.npy and metadata.json; returns what was written.

    ``split_response`` stores every response away from its instruction (at the end of the pool),
    which the sampler never does but the format allows. ``repeat`` lists every row that many
    times per epoch.
    """
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    inst: list[list[int]] = []
    resp: list[list[int]] = []
    for r in range(n_rows):
        il = int(rng.integers(inst_range[0], inst_range[1] + 1))
        rl = int(rng.integers(resp_range[0], resp_range[1] + 1))
        rl = min(rl, max_seq_len - il)
        body = rng.integers(ROW_TAG + n_rows, vocab_size, size=il + rl).tolist()
        inst.append([BOQ, ROW_TAG + r, *body[: il - 3], EOQ][:il] if il >= 3 else [BOQ, EOQ][:il])
        resp.append([*body[il : il + rl - 1], EOA])
    pool: list[int] = []
    inst_at, resp_at = [], []
    for r in range(n_rows):
        inst_at.append(len(pool))
        pool.extend(inst[r])
        if not split_response:
            resp_at.append(len(pool))
            pool.extend(resp[r])
    if split_response:
        for r in range(n_rows):
            resp_at.append(len(pool))
            pool.extend(resp[r])
    tokens = np.asarray(pool, dtype=dtype)
    np.save(folder / "tokens.npy", tokens)
    orders = []
    for k in range(epochs):
        order = rng.permutation(np.repeat(np.arange(n_rows), repeat))
        orders.append(order)
        edir = folder / f"epoch_{k}"
        edir.mkdir(exist_ok=True)
        columns = {
            "inst_start": np.asarray(inst_at)[order],
            "inst_len": np.asarray([len(x) for x in inst])[order],
            "resp_start": np.asarray(resp_at)[order],
            "resp_len": np.asarray([len(x) for x in resp])[order],
        }
        for name, values in columns.items():
            np.save(edir / f"{name}.npy", values.astype("<i8"))
    meta = {
        "tokenizer_info": {"tokenizer_path": "x", "vocab_size": vocab_size},
        "vocab_size": None,
        "max_seq_len": max_seq_len,
        "total_length": int(sum(len(a) + len(b) for a, b in zip(inst, resp, strict=True))),
    }
    (folder / "metadata.json").write_text(json.dumps(meta))
    return Sampled(folder, tokens, inst, resp, orders)
