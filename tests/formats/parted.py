"""Compressed files made of parts that decode on their own, as parallel compressors write them:
zstd frames (``pzstd``, the seekable format), BGZF gzip members (``bgzip``) and xz streams
(``xz -T`` writes blocks; streams one after the other are found by the same index walk), bzip2
streams (``pbzip2``)."""

from __future__ import annotations

import bz2
import lzma
import struct
import zlib

import zstandard


def bgzf_member(piece: bytes) -> bytes:
    """One BGZF member: a gzip member whose extra field's ``BC`` subfield holds its size - 1."""
    deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
    body = deflate.compress(piece) + deflate.flush()
    size = 12 + 6 + len(body) + 8
    header = bytes([0x1F, 0x8B, 8, 4, 0, 0, 0, 0, 0, 0xFF, 6, 0, ord("B"), ord("C"), 2, 0])
    return (
        header
        + struct.pack("<H", size - 1)
        + body
        + struct.pack("<II", zlib.crc32(piece), len(piece))
    )


def parted(body: bytes, suffix: str, chunk: int) -> bytes:
    """``body`` compressed as ``suffix`` (".zst", ".gz", ".xz" or ".bz2") in parts of ``chunk``
    bytes of text (BGZF ends with its empty member)."""
    pieces = [body[k : k + chunk] for k in range(0, len(body), chunk)] or [b""]
    if suffix == ".zst":
        compressor = zstandard.ZstdCompressor(write_checksum=True)
        return b"".join(compressor.compress(piece) for piece in pieces)
    if suffix == ".gz":
        return b"".join(bgzf_member(piece) for piece in [*pieces, b""])
    if suffix == ".xz":
        return b"".join(lzma.compress(piece) for piece in pieces)
    if suffix == ".bz2":
        return b"".join(bz2.compress(piece, compresslevel=1) for piece in pieces)
    raise ValueError(f"no parts for {suffix!r}")


def gzip_in_blocks(body: bytes, chunk: int) -> bytes:
    """``body`` as one gzip member (not parts: one stream) whose deflate blocks end every
    ``chunk`` bytes of text, within a byte (``Z_BLOCK``, ``Z_PARTIAL_FLUSH``) or at one
    (``Z_SYNC_FLUSH``), as a long file's blocks end every few dozen kilobytes: where the plan
    finds its entry points."""
    deflate = zlib.compressobj(6, zlib.DEFLATED, 31)
    flushes = (zlib.Z_BLOCK, zlib.Z_PARTIAL_FLUSH, zlib.Z_SYNC_FLUSH)
    pieces = [
        deflate.compress(body[at : at + chunk]) + deflate.flush(flushes[k % 3])
        for k, at in enumerate(range(0, len(body), chunk))
    ]
    return b"".join(pieces) + deflate.flush()
