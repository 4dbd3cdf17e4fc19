"""Flat token shards of exactly ``tokens_per_shard`` tokens (formats.md §6), written safely.

A split's shards are ``shard_00000.bin`` (raw, dtype declared in ``dataset_metadata.json``) or
``.npy`` (dtype in the header), numbered from 0, every one full but the last. MyPT numbers its
shards across the splits instead (``train/`` 0-45, then ``val/`` 46-50): ``number_across``
gives a run's new shards those names before they are committed. Shards are written
under hidden temporary names (``.shard_00003.bin.tmp``, which no ``*.bin`` pattern matches) and
renamed by ``commit`` only once the whole run has succeeded; the metadata, written after, is the
run's commit point. A later run continues the last, shorter shard: its tokens are copied as the
prefix of the new version, so the old bytes are unchanged and a rollback only has to truncate.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from numpy.typing import NDArray

from data_io.errors import OutputError
from data_io.util.fs import naming, write_to

__all__ = [
    "FORMATS",
    "ShardRecord",
    "ShardWriter",
    "npy_header",
    "number_across",
    "shard_name",
    "truncate_shard",
]

FORMATS = ("bin", "npy")


@dataclass(frozen=True)
class ShardRecord:
    name: str
    tokens: int
    sha256: str  # of the token bytes (not the .npy header)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "tokens": self.tokens, "sha256": self.sha256}


def shard_name(number: int, fmt: str) -> str:
    return f"shard_{number:05d}.{fmt}"


def npy_header(dtype: np.dtype, tokens: int) -> bytes:
    """The .npy v1.0 header of a 1-D array; numpy pads it for any length to the same size, so
    it can be rewritten in place when the shard grows or is truncated."""
    buffer = io.BytesIO()
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False}
    np.lib.format.write_array_header_1_0(buffer, {**header, "shape": (tokens,)})
    return buffer.getvalue()


def truncate_shard(path: Path, tokens: int, dtype: np.dtype, fmt: str) -> None:
    """Cut a shard back to its first ``tokens`` tokens (rollback of an interrupted run).

    Only ever shortens: a shard shorter than that is an error, never padded (padding would
    invent tokens and hide the damage)."""
    offset = len(npy_header(dtype, tokens)) if fmt == "npy" else 0
    size = path.stat().st_size
    if size < offset + tokens * dtype.itemsize:
        raise OutputError(
            f"{path}: {size} bytes, shorter than the {tokens} {dtype.name} tokens to keep; "
            "a shard is only ever cut back, never padded: restore it from a copy"
        )
    with open(path, "r+b") as f:
        if fmt == "npy":
            f.write(npy_header(dtype, tokens))
        f.truncate(offset + tokens * dtype.itemsize)


class _OpenShard:
    """One shard being written under its temporary name."""

    def __init__(self, final: Path, dtype: np.dtype, fmt: str, prefix: ShardRecord | None):
        self.final = final
        self.temporary = final.with_name(f".{final.name}.tmp")
        self.dtype = dtype
        self.fmt = fmt
        self.tokens = 0
        self.digest = hashlib.sha256()
        self.file: BinaryIO = open(self.temporary, "wb")  # noqa: SIM115 (closed by finish)
        if fmt == "npy":
            write_to(self.file, npy_header(dtype, 0))
        if prefix is not None:
            self._copy_prefix(prefix)

    def _copy_prefix(self, prefix: ShardRecord) -> None:
        """The tokens of the existing shorter shard, checked against their recorded hash."""
        offset = len(npy_header(self.dtype, 0)) if self.fmt == "npy" else 0
        with open(self.final, "rb") as old:
            old.seek(offset)
            remaining = prefix.tokens * self.dtype.itemsize
            while remaining:
                block = old.read(min(remaining, 1 << 22))
                if not block:
                    break
                write_to(self.file, block)  # a failure names the temporary, not the read
                self.digest.update(block)
                remaining -= len(block)
        if remaining or self.digest.hexdigest() != prefix.sha256:
            self.file.close()
            self.temporary.unlink()
            raise OutputError(
                f"{self.final}: the shard differs from what dataset_metadata.json records "
                f"({prefix.tokens} tokens, sha256 {prefix.sha256[:12]}…); it was changed after "
                "it was written: restore it or prepare into a new folder"
            )
        self.tokens = prefix.tokens

    def write(self, ids: NDArray[Any]) -> None:
        # The array's own buffer (cast only when the dtype differs): no copy of every token.
        data = memoryview(np.ascontiguousarray(ids.astype(self.dtype, copy=False))).cast("B")
        with naming(self.temporary):
            self.file.write(data)
        self.digest.update(data)
        self.tokens += len(ids)

    def finish(self) -> ShardRecord:
        with naming(self.temporary):
            if self.fmt == "npy":
                self.file.seek(0)
                self.file.write(npy_header(self.dtype, self.tokens))
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
        return ShardRecord(self.final.name, self.tokens, self.digest.hexdigest())


class ShardWriter:
    """Cuts one split's token stream into shards; ``commit`` publishes them."""

    def __init__(
        self,
        folder: Path,
        tokens_per_shard: int,
        dtype: np.dtype,
        fmt: str,
        existing: list[ShardRecord],
    ) -> None:
        self.folder = folder
        self.tokens_per_shard = tokens_per_shard
        self.dtype = dtype
        self.fmt = fmt
        self.records = list(existing)
        self.written: list[_OpenShard] = []
        # Shards this run started (not the continued last one): their index in ``records``.
        self.started: list[tuple[int, _OpenShard]] = []
        self._continued: _OpenShard | None = None
        self.tokens_added = 0
        self._open: _OpenShard | None = None
        folder.mkdir(parents=True, exist_ok=True)

    def _next(self) -> _OpenShard:
        """The shard to write into: the last one when it is not full yet, else a new one."""
        if self.records and self.records[-1].tokens < self.tokens_per_shard:
            prefix = self.records.pop()
            shard = _OpenShard(self.folder / prefix.name, self.dtype, self.fmt, prefix)
            self._continued = shard
            return shard
        # After the highest number in the split, not its count: MyPT's numbering leaves gaps
        # (train/ 0-45 and 51-55), and a new shard must not take the name, or the temporary
        # name, of one that exists.
        following = max((_number(r.name) for r in self.records), default=-1) + 1
        name = shard_name(following, self.fmt)
        return _OpenShard(self.folder / name, self.dtype, self.fmt, None)

    def add(self, ids: NDArray[Any]) -> None:
        done = 0
        self.tokens_added += len(ids)
        while done < len(ids):
            if self._open is None:
                self._open = self._next()
            room = self.tokens_per_shard - self._open.tokens
            part = ids[done : done + room]
            self._open.write(part)
            done += len(part)
            if self._open.tokens == self.tokens_per_shard:
                self._close()

    def _close(self) -> None:
        assert self._open is not None
        self.records.append(self._open.finish())
        self.written.append(self._open)
        if self._open is not self._continued:
            self.started.append((len(self.records) - 1, self._open))
        self._open = None

    def finish(self) -> list[ShardRecord]:
        """Close the last (shorter) shard; the records of every shard of the split."""
        if self._open is not None:
            self._close()
        return self.records

    def commit(self) -> None:
        """Give every written shard its final name."""
        for shard in self.written:
            os.replace(shard.temporary, shard.final)

    def abandon(self) -> None:
        """Remove the temporary files of a failed run. Closing flushes what the open file
        still buffers: on a full disk that fails again, and the file goes all the same."""
        if self._open is not None:
            with contextlib.suppress(OSError):
                self._open.file.close()
            self.written.append(self._open)
            self._open = None
        for shard in self.written:
            shard.temporary.unlink(missing_ok=True)


def _number(name: str) -> int:
    found = re.fullmatch(r"shard_(\d+)\.\w+", name)
    return int(found.group(1)) if found else -1


def number_across(writers: Sequence[ShardWriter]) -> None:
    """MyPT's numbering, for finished writers not committed yet: the shards this run started
    take the numbers after the highest one in any split, the first writer's first (train, then
    val, as MyPT's ``train/shard_00045.bin`` is followed by ``val/shard_00046.bin``). A
    continued last shard keeps its name; so do the shards of earlier runs."""
    kept = []
    for writer in writers:
        new = {index for index, _ in writer.started}
        kept += [_number(r.name) for i, r in enumerate(writer.records) if i not in new]
    following = max(kept, default=-1) + 1
    for writer in writers:
        for index, shard in writer.started:
            name = shard_name(following, writer.fmt)
            shard.final = writer.folder / name
            writer.records[index] = dataclasses.replace(writer.records[index], name=name)
            following += 1
