"""Which inputs a run prepares (data_io/prepare/identity.py): the hashes left for later, and the
copies still found by content."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

import data_io.prepare.identity as identity
from data_io.formats.raw_text import ReadOptions, expand_inputs
from data_io.prepare import prepare
from data_io.util.fs import sha256


def _sources(*paths: Path):
    sources, _ = expand_inputs([str(p) for p in paths], ReadOptions())
    return sources


def _hashed_up_front(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files ``plan_inputs`` hashes itself (not in the background thread)."""
    names: list[str] = []

    def counted(path: Path) -> str:
        names.append(Path(path).name)
        return sha256(path)

    monkeypatch.setattr(identity, "file_sha256", counted)
    return names


def test_files_no_other_input_matches_in_size_are_hashed_while_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("first document\n")
    b.write_text("the second, longer document\n")
    hashed = _hashed_up_front(monkeypatch)
    started = threading.Event()
    monkeypatch.setattr(identity.PendingDigests, "_hash", lambda self: started.set())
    new, known, same_as, _ = identity.plan_inputs(_sources(a, b), None)
    assert (known, same_as, hashed) == ([], {}, [])  # no file read before pass 1
    assert [entry["sha256"] for _, entry in new] == [None, None]
    assert started.wait(5)  # their hashes are read in the background thread


def test_pending_digests_fill_in_every_entry_in_the_background(tmp_path: Path):
    files = [tmp_path / f"{i}.txt" for i in range(3)]
    entries = []
    for i, path in enumerate(files):
        path.write_text("x" * (i + 1))
        entries.append({"name": str(path), "sha256": None})
    digests = identity.PendingDigests(list(zip(entries, files, strict=True)))
    digests.wait()
    assert [e["sha256"] for e in entries] == [sha256(p) for p in files]


def test_a_file_gone_before_its_hash_is_read_is_an_error_when_it_is_wanted(tmp_path: Path):
    entry = {"name": "gone", "sha256": None}
    digests = identity.PendingDigests([(entry, tmp_path / "gone.txt")])
    with pytest.raises(FileNotFoundError):
        digests.wait()


def test_same_size_inputs_are_hashed_up_front_and_a_copy_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    a, b, c = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "c.txt"
    a.write_text("same size A\n")
    b.write_text("same size B\n")  # a different text of a's size: hashed, not a copy
    c.write_text("same size A\n")  # a's copy
    hashed = _hashed_up_front(monkeypatch)
    new, known, same_as, later = identity.plan_inputs(_sources(a, b, c), None)
    later.wait()
    assert sorted(hashed) == ["a.txt", "b.txt", "c.txt"]
    assert [s.name for s, _ in new] == [str(a), str(b)] and known == [str(c)]
    assert same_as == {str(c): str(a)}
    assert [e["sha256"] for _, e in new] == [sha256(a), sha256(b)]


def test_a_file_the_size_of_an_earlier_runs_input_is_hashed_up_front(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_tokenizer: Path
):
    a, b = tmp_path / "in" / "a.txt", tmp_path / "in" / "b.txt"
    a.parent.mkdir()
    a.write_text("the first document of the corpus\n")
    out = tmp_path / "out"
    prepare([a], out, tokenizer=str(small_tokenizer), progress=False)
    b.write_bytes(a.read_bytes())  # a copy under a new name, prepared before
    metadata = json.loads((out / "dataset_metadata.json").read_text())
    hashed = _hashed_up_front(monkeypatch)
    new, known, same_as, later = identity.plan_inputs(_sources(a, b), metadata)
    later.wait()
    assert hashed == ["b.txt"]  # a: unchanged size and time, its recorded hash reused
    assert (new, known, same_as) == ([], [str(a), str(b)], {str(b): str(a)})


def test_the_metadata_records_the_hashes_read_in_the_background(
    tmp_path: Path, small_tokenizer: Path
):
    inputs = tmp_path / "in"
    inputs.mkdir()
    files = [inputs / f"{i}.txt" for i in range(3)]
    for i, path in enumerate(files):
        path.write_text(f"document number {i} " + "word " * (i + 3) + "\n")
    out = tmp_path / "out"
    prepare([str(inputs)], out, tokenizer=str(small_tokenizer), progress=False)
    recorded = json.loads((out / "dataset_metadata.json").read_text())["inputs"]
    assert {e["name"]: e["sha256"] for e in recorded} == {str(p): sha256(p) for p in files}


def test_hub_identity_compares_revisions_only_when_both_are_known():
    same = identity.same_content
    assert same("hub:org/set@abc", "hub:org/set@abc")
    assert not same("hub:org/set@abc", "hub:org/set@def")  # the dataset moved on at the Hub
    assert same("hub:org/set", "hub:org/set@abc") and same("hub:org/set@abc", "hub:org/set")
    assert not same("hub:org/set", "hub:org/other@abc")
    assert not same("hub:org/set", "folder:abc") and not same("sha", "other")


def test_hub_revision_is_not_asked_offline(monkeypatch: pytest.MonkeyPatch):
    from data_io.util import hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert identity.hub_revision("org/set") is None
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(hub, "_probe", lambda url: None)  # "reachable"

    class Info:
        sha = "0123abc"

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", lambda self, name, timeout: Info)
    assert identity.hub_revision("org/set") == "0123abc"
