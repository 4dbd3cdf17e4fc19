"""Crash-safe output: staging folder, free-space check, completion marker, publish by rename.

The output is built in ``<parent>/.<name>.tmp-<pid>`` beside the target (same file system, so
the final rename is atomic) and renamed into place only once every file, ``metadata.json``
last, is written. ``metadata.json`` carries a ``data_io`` block (inputs' fingerprint, config,
code version): a folder with a matching block is complete and current, and is reused.
A symbolic link given as ``output_path`` is resolved first (``pipeline.resolve_output``): the
output is built beside the link's target, so the link keeps working and stays a link.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data_io.errors import ConfigError, OutputError
from data_io.util.stale import (
    OWNER_PATTERN,
    Leftover,
    describe_removed,
    entry_size,
    last_written,
    owner_gone,
    owner_token,
    remove,
)
from data_io.util.words import counted

MARKER_KEY = "data_io"
STAGING_INFIX = ".tmp-"
RETIRED_INFIX = ".old-"
# What a sampled output folder may contain; anything else means it is not ours to replace.
_OWN_NAMES = ("tokens.npy", "metadata.json", "analytics.png", "analytics.md")

FreeSpaceProbe = Callable[[Path], int]


def free_bytes(path: Path) -> int:
    """Bytes available to this user on the file system holding ``path``."""
    return shutil.disk_usage(path).free


def code_version() -> str:
    """data_io's version plus a hash of the sampler's own sources (a code change rebuilds)."""
    from data_io import __version__  # noqa: PLC0415  read only when needed (importlib.metadata: ~60 ms)

    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent
    sources = [*sorted(package.glob("*.py")), package.parent / "formats" / "prefix_config.py"]
    for source in sources:
        digest.update(source.name.encode())
        digest.update(source.read_bytes())
    return f"{__version__}+{digest.hexdigest()[:16]}"


def fingerprint_inputs(tokenizer_info_path: Path, task_folders: Iterable[Path]) -> str:
    """A hash over what the sample is built from, without reading the token data.

    Each task file's size and modification time (the tokenizer replaces folders atomically,
    so a re-tokenized task gets new ones), plus the bytes of each task's ``metadata.json``
    (its cache record) and of ``tokenizer_info.json``.
    """
    digest = hashlib.sha256()
    digest.update(tokenizer_info_path.read_bytes())
    for folder in task_folders:
        digest.update(b"\0task\0" + folder.name.encode())
        for entry in sorted(folder.iterdir(), key=lambda item: item.name):
            if not entry.is_file():
                continue
            stat = entry.stat()
            digest.update(f"{entry.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
            if entry.name == "metadata.json":
                digest.update(entry.read_bytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class Marker:
    """The ``data_io`` block of ``metadata.json``: what produced this output."""

    inputs: str
    config: Mapping[str, Any]
    code: str

    def as_dict(self) -> dict[str, Any]:
        return {"inputs": self.inputs, "config": dict(self.config), "code": self.code}


def read_marker(target: Path) -> dict[str, Any] | None:
    """The ``data_io`` block of an existing output, or ``None`` (absent, foreign, unreadable)."""
    try:
        metadata = json.loads((target / "metadata.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    block = metadata.get(MARKER_KEY) if isinstance(metadata, dict) else None
    return block if isinstance(block, dict) else None


def is_reusable(
    target: Path, marker: Marker, expected_files: Iterable[tuple[str, int | None]]
) -> bool:
    """True when ``target`` was built from the same inputs, config and code, and is intact
    (each of ``expected_files``, ``(relative path, size or None)``, is there and that size)."""
    if read_marker(target) != marker.as_dict():
        return False
    for relative, size in expected_files:
        path = target / relative
        if not path.is_file() or (size is not None and path.stat().st_size != size):
            return False
    return True


def looks_like_sampled_output(target: Path) -> bool:
    """True when every entry of ``target`` is one a sampler writes (safe to replace)."""
    for entry in target.iterdir():
        if entry.name in _OWN_NAMES:
            continue
        if entry.is_dir() and entry.name.startswith("epoch_"):
            continue
        return False
    return True


def tree_size(path: Path) -> int:
    if not path.exists():
        return 0
    if path.is_file():
        return path.stat().st_size
    return sum(entry.stat().st_size for entry in path.rglob("*") if entry.is_file())


def prepare_parent(target: Path) -> Path:
    """Create the target's parent folder (checked by :func:`check_parent` first)."""
    check_parent(target)
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create {parent} for output_path: {exc}") from exc
    return parent


def check_parent(target: Path) -> None:
    """Refuse a target whose parent cannot be made, before anything is read: a missing
    ``/dev/shm`` (explained, not faked), or a file where one of its folders would go."""
    parent = target.parent
    shm = Path("/dev/shm")
    if (target == shm or shm in target.parents) and not shm.is_dir():
        raise OutputError(
            f"/dev/shm does not exist on this machine, so output_path={str(target)!r} cannot "
            f"be written; pass output_path=<folder> (a RAM disk if you have one, else a local "
            f"disk folder)"
        )
    # The first ancestor that exists must be a folder: under a file, mkdir says only
    # "File exists" or "Not a directory", and not which path is the file.
    for ancestor in (parent, *parent.parents):
        if ancestor.is_dir():
            break
        if ancestor.exists() or ancestor.is_symlink():
            what = "a file, not a folder" if ancestor.is_file() else "not a folder"
            raise OutputError(
                f"output_path {str(target)!r} lies under {str(ancestor)!r}, which is {what}, "
                f"so the output cannot be created there; move or rename "
                f"{str(ancestor)!r}, or pass another output_path"
            )


def check_target(target: Path) -> None:
    """Refuse to replace a folder that the sampler did not write."""
    if target.exists() and (not target.is_dir() or not looks_like_sampled_output(target)):
        raise OutputError(
            f"output_path {str(target)!r} exists and holds files the sampler does not write; "
            f"remove it or choose another output_path"
        )


def ensure_space(
    target: Path,
    needed: int,
    *,
    probe: FreeSpaceProbe = free_bytes,
    log: Callable[[str], None] = lambda message: print(message, file=sys.stderr),
    before_delete: Callable[[], None] = lambda: None,
    parts: str = "",
) -> None:
    """Fail clearly unless the target's file system can hold ``needed`` more bytes.

    The new output is built beside the old one, which stays until the new one is complete.
    Only when the old output alone stands in the way is it deleted first: that is said
    before, and ``before_delete`` runs first (the caller's last checks: once the old output
    is gone, a failing build leaves none). ``parts``: what makes up ``needed``, for the
    message (``tokens.npy 1.2 GiB + 10 epochs of 3.0 MiB``).
    """
    parent = target.parent
    available = probe(parent)
    if available >= needed:
        return
    reclaimable = tree_size(target)
    if target.exists() and available + reclaimable >= needed:
        log(
            f"sample: {parent} has {format_size(available)} free, the new output needs "
            f"{format_size(needed)}: no room to keep the previous output until the new one is "
            f"complete; deleting the previous output {target} ({format_size(reclaimable)}) "
            f"first, once the inputs are checked (if this run then fails, there is no sampled output "
            f"until a run succeeds; free space or pass output_path=<elsewhere> to avoid this)"
        )
        before_delete()
        shutil.rmtree(target)
        available = probe(parent)
        if available >= needed:
            return
    raise OutputError(
        f"not enough space for the sampled output: {parent} has {format_size(available)} "
        f"free, {format_size(needed)} needed{f' ({parts})' if parts else ''}; free space there (e.g. old outputs in /dev/shm) or pass "
        f"output_path=<folder on a larger file system>"
    )


def check_separate(target: Path, tokenized: Path) -> None:
    """Refuse an output that is, holds or sits inside the tokenized input: the build
    would read what it is replacing (or the tokenizer's folder would gain a stray task)."""
    out, source = target.resolve(), tokenized.resolve()
    if out == source:
        relation = "is"
    elif source in out.parents:
        relation = "is inside"
    elif out in source.parents:
        relation = "contains"
    else:
        return
    raise ConfigError(
        f"config key 'output_path': {str(target)!r} {relation} tokenized_path "
        f"{str(tokenized)!r}; the sampled output must be a separate folder (e.g. "
        f"output_path=/dev/shm/sampled)"
    )


def is_mount_point(path: Path) -> bool:
    return os.path.ismount(path)


def check_not_mount_point(target: Path) -> None:
    """Refuse a target that is a mount point (``/dev/shm``, a tmpfs mounted there): the
    output is built beside the target and renamed into place, and a mount point can be
    neither renamed nor replaced (the build beside it would also be on another file system)."""
    if target.exists() and is_mount_point(target):
        raise ConfigError(
            f"config key 'output_path': {str(target)!r} is a mount point; the sampler builds "
            f"the output beside it and renames it into place, which a mount point cannot be. "
            f"Pass a folder inside it, e.g. output_path={str(target / 'sampled')!r}"
        )


def format_size(count: int) -> str:
    """Bytes for a message, precise enough that two sizes that differ look different:
    GiB with two decimals from 1 GiB on, MiB with one decimal below it (``0.01 GiB free,
    needs 0.01 GiB`` hid a gap of megabytes), whole bytes below 1 MiB."""
    if count >= 2**30:
        return f"{count / 2**30:.2f} GiB"
    if count >= 2**20:
        return f"{count / 2**20:.1f} MiB"
    return counted(count, "byte")


def staging_path(target: Path) -> Path:
    return target.parent / f".{target.name}{STAGING_INFIX}{owner_token()}"


def remove_stale_staging(target: Path, log: Callable[[str], None]) -> list[Leftover]:
    """Delete the staging and retired folders (``.<name>.tmp-<owner>``, ``.<name>.old-<owner>``,
    ``owner_token``) that sampler runs into ``target`` left when they were killed: those whose
    process is gone (no process has the pid, or the one that has it started after the folder
    was last written: the pid was reused). A live run's folder, this process's included, stays,
    and so does another machine's (a shared file system). Says what went in one line; returns
    it."""
    owner = re.compile(OWNER_PATTERN)
    removed = []
    for infix in (STAGING_INFIX, RETIRED_INFIX):
        for entry in sorted(target.parent.glob(f".{glob.escape(target.name)}{infix}*")):
            found = owner.fullmatch(entry.name[len(f".{target.name}{infix}") :])
            if not found or not owner_gone(int(found[1]), last_written(entry), found[2]):
                continue
            folder = entry.is_dir() and not entry.is_symlink()
            removed.append(Leftover(entry, int(found[1]), entry_size(entry), folder))
            remove_entry(entry)
    if removed:
        log(f"sample: {describe_removed(removed)}")
    return removed


def remove_entry(path: Path) -> None:
    """Remove a leftover of the sampler, whatever it is: a symbolic link (an earlier version
    renamed a linked output_path aside) is unlinked, never followed; a folder is deleted.
    Best effort: a leftover that cannot go is announced again by the next run."""
    remove(path)


def make_staging(target: Path) -> Path:
    staging = staging_path(target)
    if staging.exists() or staging.is_symlink():
        remove_entry(staging)
    try:
        staging.mkdir()
    except OSError as exc:
        raise OutputError(f"cannot create the staging folder {staging}: {exc}") from exc
    return staging


def write_json_atomic(path: Path, payload: Mapping[str, Any]) -> None:
    """Write JSON to ``path`` via a temporary name in the same folder."""
    temporary = path.with_name(f".{path.name}{STAGING_INFIX}{os.getpid()}")
    temporary.write_text(json.dumps(payload, separators=(",", ":")), encoding="utf-8")
    os.replace(temporary, path)


def publish(staging: Path, target: Path) -> None:
    """Move the complete ``staging`` folder to ``target``, replacing an old output.

    A folder cannot be renamed over a non-empty one, so the old output is first renamed
    aside, then the new one into place, then the old one deleted: at every instant ``target``
    is either absent or a complete output.
    """
    retired = None
    if target.exists():
        retired = target.parent / f".{target.name}{RETIRED_INFIX}{owner_token()}"
        os.rename(target, retired)
    os.rename(staging, target)
    if retired is not None:
        remove_entry(retired)
