"""Temporary outputs that become finished ones: made private by ``tempfile``, published with
the permissions the user's umask gives ordinary files and folders."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _umask() -> int:
    # The umask can only be read by setting it; set it straight back.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def publish_mode(path: str | os.PathLike[str]) -> None:
    """Give ``path`` (made by mkdtemp/mkstemp, 0700/0600) the mode a plain mkdir/open would
    have, so others sharing a cache or output folder can read it once it is renamed in place."""
    target = Path(path)
    base = 0o777 if target.is_dir() else 0o666
    os.chmod(target, base & ~_umask())


def write_json_atomic(path: Path, content: Any) -> None:
    """Write ``content`` as JSON to ``path`` through a temporary name (unique to this process,
    so that two writers never share one), flushed to disk before the rename: readers see the
    old file or the whole new one."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with removed_on_failure(temporary), naming(temporary):
        with open(temporary, "w", encoding="utf-8") as f:
            json.dump(content, f, indent=1, ensure_ascii=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)


def write_to(file: Any, data: Any) -> None:
    """``file.write(data)``, a failure (a full disk) naming the file (``naming``)."""
    with naming(file.name):
        file.write(data)


def close_named(files: Any) -> None:
    """Close every file of ``files``, all of them even when one fails; the first failure (a
    full disk's flush) is raised then, naming its file (``naming``)."""
    first: OSError | None = None
    for file in files:
        try:
            with naming(file.name):
                file.close()
        except OSError as err:
            first = first or err
    if first is not None:
        raise first


@contextlib.contextmanager
def removed_on_failure(temporary: Path) -> Iterator[None]:
    """Remove ``temporary`` (a file written under a temporary name) when the block fails: a
    full disk must leave no half-written file behind for the next run to trip over."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def naming(path: str | os.PathLike[str]) -> Iterator[None]:
    """Give an ``OSError`` raised inside without a file name (Python names the file when it
    opens it, not when a write, flush or fsync on it fails: a full disk's ENOSPC) ``path``, so
    that the message says which file could not be written."""
    try:
        yield
    except OSError as err:
        if err.filename is not None or err.errno is None:
            raise
        raise OSError(err.errno, err.strerror, os.fspath(path)) from err


def sha256(path: Path) -> str:
    """The hex SHA-256 of a file's bytes (``hashlib.file_digest``: read into one reused buffer,
    the GIL released; a quarter faster than reading new 4 MiB blocks, which fault in fresh
    pages each time)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def try_flock(fd: int, *, shared: bool = False) -> bool:
    """An advisory ``flock`` on the open file or folder ``fd``, without waiting: False when
    another process holds a lock that conflicts, True when this one holds it now (released
    when ``fd`` is closed). Where the file system has no ``flock`` (Lustre mounted without
    ``-o flock``: ENOSYS; NFS: ENOLCK, or EBADF for an exclusive lock on a folder opened
    read-only), also True: the caller runs unguarded, as it did before it took a lock, rather
    than not at all."""
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        return True
    return True
