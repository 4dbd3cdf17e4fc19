"""Which inputs a run prepares: each source's identity (name, kind, size, mtime, content hash)
and the check that an input prepared before is unchanged and that a copy is not prepared twice.

The content hash (SHA-256 of the file) costs a read of every new byte, on one core: on 16 cores
it took 0.07-0.12 s of a run whose encoding took 0.17 s (163 MB), all of it before pass 1
began. It is needed before pass 1 only where an input could be a copy of another, and a copy
has the same size: a new file whose size no other input has (in this run or an earlier one) is
hashed in a background thread while pass 1 runs, and its hash is known by the time the metadata
records it (``PendingDigests``).
"""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from data_io.errors import InputError
from data_io.formats.raw_text import Source
from data_io.util.fs import sha256 as file_sha256
from data_io.util.hub import hub_unreachable

__all__ = ["PendingDigests", "hub_revision", "plan_inputs", "same_content", "source_identity"]


class PendingDigests:
    """The content hashes left for later: each entry's ``sha256`` is filled in, in order, by
    one daemon thread (an error before they are wanted does not wait for them at exit)."""

    def __init__(self, pending: list[tuple[dict[str, Any], Path]]) -> None:
        self._pending = pending
        self._done: Future[None] = Future()
        if pending:
            threading.Thread(target=self._hash, daemon=True, name="prepare-digests").start()
        else:
            self._done.set_result(None)

    def _hash(self) -> None:
        try:
            for entry, path in self._pending:
                entry["sha256"] = file_sha256(path)
            self._done.set_result(None)
        except BaseException as error:  # handed to the waiting thread, which raises it
            self._done.set_exception(error)

    def wait(self) -> None:
        """Every entry's hash filled in (an input that went away while it was read raises)."""
        self._done.result()


def plan_inputs(
    sources: list[Source], metadata: dict[str, Any] | None
) -> tuple[list[tuple[Source, dict[str, Any]]], list[str], dict[str, str], PendingDigests]:
    """The sources not prepared yet (with their identity), the names of those that were, the
    sources whose content was prepared under another name (new name -> that name), and the
    content hashes still being computed (their entries' ``sha256`` is None until then).

    A source prepared before must be unchanged: runs only append, they never rewrite shards.
    A file that was moved, renamed or copied is known by its content hash: preparing it again
    would add its documents twice (or, with dedup, read it all to drop every document).
    """
    prior = {entry["name"]: entry for entry in metadata["inputs"]} if metadata else {}
    by_content = {entry["sha256"]: entry["name"] for entry in prior.values()}
    # A copy has its original's size: the sizes a new file must be hashed up front for. An
    # earlier file recorded without its size could be anything's original.
    sizes: set[int] = {entry["size"] for entry in prior.values() if "size" in entry}
    unsized = any(_is_file_entry(entry) and "size" not in entry for entry in prior.values())
    later: dict[int, tuple[dict[str, Any], Path]] = {}  # new files hashed later, by size
    new: list[tuple[Source, dict[str, Any]]] = []
    known: list[str] = []
    same_as: dict[str, str] = {}
    for source in sources:
        old = prior.get(source.name)
        size = _file_size(source)
        if old is None and size is not None and not unsized and size not in sizes:
            entry = _file_identity(source, None, hashed=False)
            later[size] = (entry, Path(source.name))
            sizes.add(size)
            new.append((source, entry))
            continue
        if old is None and size is not None and size in later:  # a new file of the same size
            twin, path = later.pop(size)
            twin["sha256"] = file_sha256(path)
            by_content.setdefault(twin["sha256"], twin["name"])
        entry = source_identity(source, old)
        if size is not None:
            sizes.add(size)
        if old is None:
            earlier = by_content.get(entry["sha256"])
            if earlier is not None:
                known.append(source.name)
                same_as[source.name] = earlier
            else:
                new.append((source, entry))
                by_content[entry["sha256"]] = source.name  # a second copy in this same run
        elif same_content(entry["sha256"], old["sha256"]):
            known.append(source.name)
        else:
            raise InputError(
                f"{source.name}: changed since run {old['run']} prepared it (content sha256 "
                f"{old['sha256'][:12]}… then, {entry['sha256'][:12]}… now); prepare only "
                "appends new inputs: restore the file, give the new content another name, or "
                "prepare into a new folder"
            )
    return new, known, same_as, PendingDigests(list(later.values()))


def _is_file_entry(entry: dict[str, Any]) -> bool:
    """A recorded input that was a file (not a folder or a Hub dataset)."""
    return entry.get("kind") != "datasets" and not str(entry.get("sha256")).startswith("folder:")


def _file_size(source: Source) -> int | None:
    """A file source's size (None for a folder or a Hub dataset: never a file's copy)."""
    if source.kind == "datasets":
        return None
    path = Path(source.name)
    return path.stat().st_size if path.is_file() else None


def same_content(now: str, then: str) -> bool:
    """Equal identities; a Hub dataset whose revision could not be asked (offline) on one of
    the two runs is taken as the same (its id is all there is to compare)."""
    if now == then:
        return True
    if not (now.startswith("hub:") and then.startswith("hub:")):
        return False
    (now_id, _, now_revision), (then_id, _, then_revision) = now.partition("@"), then.partition("@")
    return now_id == then_id and not (now_revision and then_revision)


def hub_revision(name: str) -> str | None:
    """The commit a Hub dataset id points at now, or None offline (then the id alone names it)."""

    if hub_unreachable() is not None:
        return None
    from huggingface_hub import HfApi  # noqa: PLC0415  heavy: huggingface_hub, only when the Hub is asked

    try:
        return HfApi().dataset_info(name, timeout=10).sha
    except Exception:  # unknown id, gated, network trouble: the read itself will say what
        return None


def source_identity(source: Source, old: dict[str, Any] | None) -> dict[str, Any]:
    """Name, kind, size, mtime and content hash; the hash is reused when size and mtime match."""
    entry: dict[str, Any] = {"name": source.name, "kind": source.kind, "sha256": None}
    if source.kind == "datasets" and not Path(source.name).exists():
        revision = hub_revision(source.name)
        entry["sha256"] = f"hub:{source.name}" + (f"@{revision}" if revision else "")
        return entry
    path = Path(source.name)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and ".cache" not in p.parts)
        digest = [f"{p.relative_to(path).as_posix()}:{file_sha256(p)}" for p in files]
        entry["sha256"] = "folder:" + hashlib.sha256("\n".join(digest).encode()).hexdigest()
        return entry
    return _file_identity(source, old, hashed=True)


def _file_identity(source: Source, old: dict[str, Any] | None, *, hashed: bool) -> dict[str, Any]:
    """A file's entry: its hash reused from ``old`` when size and mtime match, else computed
    (``hashed``) or left None for ``PendingDigests``."""
    path = Path(source.name)
    stat = path.stat()
    entry: dict[str, Any] = {"name": source.name, "kind": source.kind, "sha256": None}
    entry.update(size=stat.st_size, mtime_ns=stat.st_mtime_ns)
    same_stat = old is not None and (old.get("size"), old.get("mtime_ns")) == (
        stat.st_size,
        stat.st_mtime_ns,
    )
    if same_stat and old:
        entry["sha256"] = old["sha256"]
    elif hashed:
        entry["sha256"] = file_sha256(path)
    return entry
