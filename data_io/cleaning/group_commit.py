"""A cleaner's output files put in place as one group, and what killed runs left undone.

Each file is complete under its temporary name (``<name>.tmp-<pid>@<host>``, written by
:mod:`data_io.cleaning.writers`) before any is renamed. :func:`replace_group` renames them
into place as one: a note listing the files it replaces is written first, each previous file
is set aside, and the note is removed once all stand; a failure among the renames puts every
previous file back. A run killed there leaves the note, and the next run into the folder undoes
the group first (:func:`undo_interrupted_groups`). `tokenize` and `train-tokenizer` refuse a
folder holding a note (``rust/reader/mod.rs``). Temporaries of dead runs of this machine go
(:func:`remove_stale_temporaries`); another machine's are kept (a shared folder).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import time
import uuid
from pathlib import Path

from data_io.errors import OutputError
from data_io.util.fs import write_json_atomic
from data_io.util.stale import OWNER_PATTERN, host_tag, last_written, owner_gone, owner_token


def unlink_quietly(path: Path) -> None:
    """Remove a temporary file, best effort: clean-up must never hide the error that caused it
    (an output under a regular file, say, cannot even be looked up)."""
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)


_TEMPORARY_NAME = re.compile(rf".+\.tmp-{OWNER_PATTERN}(\.part\d+|\.old)?")

# The note a group's renames leave in its folder while they run: the files they replace.
# `tokenize` and `train-tokenizer` refuse a folder holding one (rust/reader/mod.rs).
_GROUP_NOTE = ".data_io-clean-commit-"

# The notes of the groups this process is replacing now. A note of this process's id that is
# not among them is a group whose undo failed earlier in this process, or one a killed process
# of the same id left (PID 1 in every container run): stale, to undo like another's.
_COMMITTING: set[str] = set()


def _set_aside(final: Path, owner: str) -> Path:
    """Where the previous ``final`` waits while the group of ``owner`` (``owner_token``) is
    replaced (not a name the tokenizer reads, and one that :func:`remove_stale_temporaries`
    knows)."""
    return final.with_name(f"{final.name}.tmp-{owner}.old")


def replace_group(ready: list[tuple[Path, Path]], folder: Path) -> None:
    """Rename each complete temporary file of ``ready`` (temporary, final) into place, as one
    group: either every final name holds its new file, or every one its previous file (or
    none). Each previous file is first set aside; a failure among the renames puts them back.
    A run killed there cannot do that, so the note written first (which files had a previous
    one) lets the next run writing to ``folder`` do it (:func:`undo_interrupted_groups`)."""
    owner = owner_token()
    names = {str(final.relative_to(folder)) for _, final in ready}
    # Unique to this group: two cleaners of one process may share a folder (Platypus).
    note = folder / f"{_GROUP_NOTE}{owner}-{uuid.uuid4().hex[:12]}"
    _COMMITTING.add(str(note))
    try:
        # Our note first, then the others': of two runs over one name, at least one sees the
        # other's note and stops (a check before writing would let both pass).
        # Names without a flag (null): none of them touched yet, nothing to undo.
        write_json_atomic(note, dict.fromkeys(names))
        try:
            # Another group over any of these names, left by a run that may still be
            # committing (or whose undo is due only later): committing over it would let
            # that undo revert ours.
            settle_groups_over(folder, names)
        except BaseException:
            unlink_quietly(note)
            raise
        replaced = {str(final.relative_to(folder)): final.exists() for _, final in ready}
        write_json_atomic(note, replaced)
        try:
            for tmp, final in ready:
                if replaced[str(final.relative_to(folder))]:
                    os.replace(final, _set_aside(final, owner))
                os.replace(tmp, final)
        except BaseException:
            _undo_group(folder, replaced, owner, note)
            raise
        note.unlink()  # the commit point: from here on the new files stand
    finally:
        _COMMITTING.discard(str(note))
    for name, existed in replaced.items():
        if existed:
            unlink_quietly(_set_aside(folder / name, owner))


def _undo_group(folder: Path, replaced: dict[str, bool | None], owner: str, note: Path) -> None:
    """Put back what the group of ``owner`` replaced: each previous file set aside returns to its
    name, and a file the group added where there was none is removed. Best effort: the note
    stays when something could not be undone, for the next run to try again."""
    try:
        for name, existed in replaced.items():
            if existed is None:
                continue  # listed before the renames began: untouched
            final = folder / name
            aside = _set_aside(final, owner)
            if not existed:
                final.unlink(missing_ok=True)
            elif aside.exists():
                os.replace(aside, final)
        note.unlink(missing_ok=True)
    except OSError:
        pass  # the error that stopped the group is the one to show


def settle_groups_over(folder: Path, names: set[str]) -> None:
    """Before a group replaces ``names``: another group's note listing any of them is undone
    when its run has ended; a note of a run that may still be committing (its process alive,
    or another machine's note younger than any group's renames) is waited for a few seconds
    (a live group's renames take well under one), then stops this group, since that note's
    later undo would put its previous files back over ours. A note that cannot be read, of a
    run not ended, counts as listing them."""
    deadline = time.monotonic() + _WAIT_FOR_A_LIVE_GROUP
    while True:
        busy = _settle_once(folder, names)
        if busy is None:
            return
        if time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    note, ended = busy
    if ended:  # its run is gone, but its previous files could not be put back
        raise OutputError(
            f"{note} was left by a clean run stopped while it replaced the files of {folder}, "
            "and its previous files could not be put back now either; nothing was written. "
            "Put back each '<name>.tmp-<pid>@<host>.old' file there as '<name>' (or delete "
            "the folder's outputs), remove the note, and run again"
        )
    raise OutputError(
        f"{note} says another clean run is replacing {', '.join(sorted(names)[:3])} or files "
        f"beside them in {folder} (it is still running, or it was stopped on another machine "
        f"less than {_OTHER_HOST_COMMIT_SECONDS / 60:.0f} minutes ago); nothing was written. "
        "Run this cleaner again once that run is done (a stopped run's group is put back "
        "first then)"
    )


# How long a group waits for another live group's renames over its names to finish.
_WAIT_FOR_A_LIVE_GROUP = 5.0


def _settle_once(folder: Path, names: set[str]) -> tuple[Path, bool] | None:
    """One pass of :func:`settle_groups_over`: None when no other note stands in the way, else
    the first that does and whether its run has ended (an undo that failed)."""
    for note in sorted(folder.glob(f"{_GROUP_NOTE}*")):
        owner = _NOTE_OWNER.match(note.name.removeprefix(_GROUP_NOTE))
        if owner is None or str(note) in _COMMITTING:
            continue
        ended = _group_ended(owner, note)
        listed = _listed(note)
        if listed is None:
            if ended or not note.exists():
                continue  # unreadable and over: `undo_interrupted_groups` names it
            return note, False
        if not names & set(listed):
            continue
        if ended:
            _undo_group(folder, listed, owner[0].removesuffix("-"), note)
            if not note.exists():
                continue
        return note, ended
    return None


def _listed(note: Path) -> dict[str, bool | None] | None:
    """The files a group note lists (name -> whether it had a previous file, None while the
    group had not begun its renames); None when the note cannot be read."""
    try:
        replaced = json.loads(note.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(replaced, dict):
        return None
    return {str(k): None if v is None else bool(v) for k, v in replaced.items()}


def undo_interrupted_groups(folder: Path) -> list[Path]:
    """Undo the group renames that a killed run left half done in ``folder`` (its process is
    gone), so that its new files and the previous ones are not taken together as one output;
    returns the notes that could not be undone (unreadable, or an undo that failed again)."""
    left = []
    for note in folder.glob(f"{_GROUP_NOTE}*"):
        owner = _NOTE_OWNER.match(note.name.removeprefix(_GROUP_NOTE))
        if owner is None or str(note) in _COMMITTING:
            continue  # not a note of ours, or a group this process is replacing now
        if not _group_ended(owner, note):
            continue  # another run still committing
        listed = _listed(note)
        if listed is not None:
            _undo_group(folder, listed, owner[0].removesuffix("-"), note)
        if note.exists():
            left.append(note)
    return left


# A note's owner: ``<pid>@<host tag>`` (or a bare pid, a note written before the tag).
_NOTE_OWNER = re.compile(rf"{OWNER_PATTERN}-")

# A group's renames take well under a second; another machine's note older than this is one
# its run left when it was killed (that machine's pid cannot be checked from here).
_OTHER_HOST_COMMIT_SECONDS = 600.0


def _group_ended(owner: re.Match[str], note: Path) -> bool:
    """Whether the group of ``note`` is no longer being replaced: its process is gone (or is
    this one: a note this process is not committing is one whose undo failed); a note of
    another machine, once it is older than any group's renames."""
    pid, host = int(owner[1]), owner[2]
    written = last_written(note)
    if host is not None and host != host_tag():
        return time.time() - written > _OTHER_HOST_COMMIT_SECONDS
    return pid == os.getpid() or owner_gone(pid, written, host)


def remove_stale_temporaries(folder: Path, prefix: str) -> None:
    """Remove temporary files that a killed run left in ``folder`` (their process is gone; a
    temporary of another machine, whose process cannot be checked, is kept)."""
    for path in folder.glob(f"{glob.escape(prefix)}*" if prefix else "*.tmp-*"):
        match = _TEMPORARY_NAME.fullmatch(path.name)
        if match is None or not path.is_file() or not path.name.startswith(prefix):
            continue
        if not owner_gone(int(match[1]), last_written(path), match[2]):
            continue  # ours, a run still writing (another cleaner sharing the folder) or another machine's
        path.unlink(missing_ok=True)
