"""Temporaries of dead processes (``data_io.util.stale``): whose they are, and which go."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from data_io.util.stale import (
    host_tag,
    owner_gone,
    owner_token,
    remove_dead_siblings,
    temporary_prefix,
)


def _a_dead_pid() -> int:
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(child.stdout)


def _another_host() -> str:
    return "00000000" if host_tag() != "00000000" else "11111111"


def test_the_owner_in_a_name_is_this_process_on_this_machine():
    assert owner_token() == f"{os.getpid()}@{host_tag()}"
    assert len(host_tag()) == 8 and int(host_tag(), 16) >= 0
    assert temporary_prefix("out") == f".out.tmp-{os.getpid()}@{host_tag()}-"


def test_a_process_of_another_machine_is_never_taken_for_gone():
    dead = _a_dead_pid()
    assert owner_gone(dead, 0.0)  # no host: this machine's, as names before the tag
    assert owner_gone(dead, 0.0, host_tag())
    assert not owner_gone(dead, 0.0, _another_host())
    assert not owner_gone(os.getpid(), 0.0)


def test_dead_siblings_of_this_machine_go_and_another_machines_stay(tmp_path: Path, capsys):
    dead = _a_dead_pid()
    old_style = tmp_path / f".out.tmp-{dead}-abc"
    ours = tmp_path / f".out.tmp-{dead}@{host_tag()}-abc"
    theirs = tmp_path / f".out.tmp-{dead}@{_another_host()}-abc"
    live = tmp_path / f"{temporary_prefix('out')}abc"
    other_name = tmp_path / f".other.tmp-{dead}@{host_tag()}-abc"
    for path in (old_style, ours, theirs, live, other_name):
        path.write_bytes(b"partial")
    removed = remove_dead_siblings(tmp_path, "out", "partial export")
    assert sorted(item.path.name for item in removed) == sorted([old_style.name, ours.name])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [theirs.name, live.name, other_name.name]
    )
    assert "removed 2 partial export files left by a killed run" in capsys.readouterr().err
