"""Write tokenized rows in every accepted format, for the tokenized-row tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

Row = dict[str, Any]


def random_rows(seed: int, n: int, *, longest: int = 30, vocab: int = 1000) -> list[Row]:
    """Rows with a masked prefix (-100) and supervised tail; the first id names the row."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(n):
        length = int(rng.integers(1, longest + 1))
        ids = [10_000 + seed * 1000 + r, *rng.integers(0, vocab, length - 1).tolist()]
        cut = int(rng.integers(0, length + 1))
        rows.append({"input_ids": ids, "labels": [-100] * cut + ids[cut:]})
    return rows


def write_rows(path: Path, rows: list[Row]) -> Path:
    """``rows`` in the format of ``path``'s extension."""
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = path.suffix
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif suffix == ".json":
        path.write_text(json.dumps(rows))
    elif suffix == ".csv":
        # Lists as JSON text in quoted cells, as a spreadsheet export holds them.
        keys = list(rows[0])
        lines = [",".join(keys)]
        for r in rows:
            lines.append(",".join('"' + json.dumps(r[k]) + '"' for k in keys))
        path.write_text("\n".join(lines) + "\n")
    elif suffix in (".parquet", ".arrow"):
        table = pa.Table.from_pylist(rows)
        if suffix == ".parquet":
            pq.write_table(table, path)
        else:
            with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
                w.write_table(table)
    else:
        path.write_text("\n".join(map(json.dumps, rows)))
    return path
