"""Incremental and crash-safe runs (data_io.prepare.state): append, nothing to do, rollback."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import data_io.prepare.run as prepare_run
from data_io.errors import ConfigError, InputError, OutputError
from tests.prepare.helpers import documents, read_split, split_documents, tree_bytes, write_txt
from tests.prepare.test_api import run


@pytest.fixture()
def corpus(tmp_path: Path) -> tuple[Path, Path]:
    docs = documents(600, seed=11, duplicates=60)
    first = write_txt(tmp_path / "in" / "a.txt", docs[:300])
    second = write_txt(tmp_path / "in" / "b.txt", docs[300:] + docs[:20])  # 20 old repeats
    return first, second


def test_same_inputs_again_do_nothing(small_tokenizer: Path, tmp_path: Path, corpus):
    out = tmp_path / "out"
    run(list(corpus), out, small_tokenizer)
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.rglob("*") if p.is_file()}
    again = run(list(corpus), out, small_tokenizer)
    assert again.nothing_to_do and again.new_inputs == []
    assert len(again.known_inputs) == 2
    assert before == {
        p: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.rglob("*") if p.is_file()
    }


def test_touched_but_identical_input_does_nothing(small_tokenizer, tmp_path, corpus):
    out = tmp_path / "out"
    run(list(corpus), out, small_tokenizer)
    os.utime(corpus[0], ns=(1, 1))
    assert run(list(corpus), out, small_tokenizer).nothing_to_do


def test_added_input_appends_and_equals_a_fresh_run(small_tokenizer, tmp_path, corpus):
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    run([corpus[0]], out, small_tokenizer)
    old = tree_bytes(out)
    old_meta = json.loads((out / "dataset_metadata.json").read_text())
    added = run(list(corpus), out, small_tokenizer)
    assert added.new_inputs == [str(corpus[1])] and added.known_inputs == [str(corpus[0])]
    seen = set(corpus[0].read_text().split("\n\n"))
    repeats = 0
    for doc in corpus[1].read_text().strip().split("\n\n"):
        repeats += doc in seen
        seen.add(doc)
    assert added.duplicates == repeats >= 20  # of the first file's documents, and its own
    new = tree_bytes(out)
    for name, data in old.items():  # full shards untouched; the short last one extended
        assert new[name][: len(data)] == data
    full = [
        f"{split}/{s['name']}"
        for split in ("train", "val")
        for s in old_meta["splits"][split]["shards"]
        if s["tokens"] == 500
    ]
    assert full and all(new[name] == old[name] for name in full)
    run(list(corpus), fresh, small_tokenizer)
    assert new == tree_bytes(fresh)  # appending gives what one run over both inputs gives
    meta = json.loads((out / "dataset_metadata.json").read_text())
    assert [r["run"] for r in meta["runs"]] == [0, 1]
    assert [i["run"] for i in meta["inputs"]] == [0, 1]


def test_val_documents_of_earlier_runs_stay_in_val(small_tokenizer, tmp_path, corpus):
    out = tmp_path / "out"
    first = run([corpus[0]], out, small_tokenizer, val_fraction=0.3)
    val_before = split_documents(read_split(out, "val"), first.eos_id)
    run(list(corpus), out, small_tokenizer, val_fraction=0.3)
    val_after = split_documents(read_split(out, "val"), first.eos_id)
    assert val_after[: len(val_before)] == val_before and len(val_after) > len(val_before)


def test_changed_input_is_an_error(small_tokenizer, tmp_path, corpus):
    out = tmp_path / "out"
    run([corpus[0]], out, small_tokenizer)
    write_txt(corpus[0], documents(10, seed=99))
    with pytest.raises(InputError, match=r"a\.txt: changed since run 0 prepared it"):
        run([corpus[0]], out, small_tokenizer)


def test_other_options_are_an_error(small_tokenizer, tmp_path, corpus):
    out = tmp_path / "out"
    run([corpus[0]], out, small_tokenizer)
    with pytest.raises(ConfigError, match=r"other options \(val_fraction: 0.1 then, 0.2 now\)"):
        run(list(corpus), out, small_tokenizer, val_fraction=0.2)
    # The tokenizer by the name each run gave it, not by its recorded content hash.
    with pytest.raises(ConfigError, match=rf"tokenizer: '{small_tokenizer}' then, 'char' now"):
        run(list(corpus), out, "char")
    # Named alike, its file changed: the names with their hashes.
    mine = tmp_path / "tok.json"
    vocab = json.loads(Path(small_tokenizer).read_text())
    mine.write_text(json.dumps(vocab))
    run([corpus[0]], tmp_path / "out2", str(mine))
    vocab["model"]["vocab"]["zzzz_new_piece"] = 10**6
    mine.write_text(json.dumps(vocab))
    said = rf"tokenizer: '{mine}' \(sha256:\w+…\) then, '{mine}' \(sha256:\w+…\) now"
    with pytest.raises(ConfigError, match=said):
        run(list(corpus), tmp_path / "out2", str(mine))


def test_output_holding_another_dataset_is_refused(small_tokenizer, tmp_path, corpus):
    other = tmp_path / "other"
    other.mkdir()
    (other / "shard_00000.bin").write_bytes(b"\x00" * 10)
    with pytest.raises(OutputError, match=r"holds files data_io prepare did not write"):
        run([corpus[0]], other, small_tokenizer)
    (other / "dataset_metadata.json").write_text('{"dtype": "uint16"}')
    with pytest.raises(OutputError, match="holds another dataset"):
        run([corpus[0]], other, small_tokenizer)
    (other / "dataset_metadata.json").write_text("{not json")
    with pytest.raises(OutputError, match="unreadable"):
        run([corpus[0]], other, small_tokenizer)
    assert (other / "shard_00000.bin").read_bytes() == b"\x00" * 10
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(OutputError, match="is a file"):
        run([corpus[0]], file, small_tokenizer)


def test_output_holding_a_tokenize_output_names_its_files_not_its_lock(
    small_tokenizer, tmp_path, corpus
):
    """The refusal lists what the user would recognise: a tokenize's task folders, not its
    ``.data_io.lock`` (data_io's bookkeeping); the lock is named only when it is all there is."""
    tokenized = tmp_path / "tokenized"
    (tokenized / "task.jsonl").mkdir(parents=True)
    (tokenized / "task.jsonl" / "tokens.npy").write_bytes(b"\x00")
    (tokenized / "tokenizer_info.json").write_text("{}")
    (tokenized / ".data_io.lock").touch()
    with pytest.raises(OutputError) as refused:
        run([corpus[0]], tokenized, small_tokenizer)
    assert "did not write (task.jsonl, tokenizer_info.json) and no" in str(refused.value)
    assert ".data_io.lock" not in str(refused.value)
    only_lock = tmp_path / "only_lock"
    only_lock.mkdir()
    (only_lock / ".data_io.lock").touch()
    with pytest.raises(OutputError, match=r"did not write \(\.data_io\.lock\)"):
        run([corpus[0]], only_lock, small_tokenizer)


@pytest.mark.parametrize("earlier", [False, True], ids=["first-run", "second-run"])
def test_stopped_while_marking_its_run_leaves_nothing_in_the_way(
    small_tokenizer, tmp_path, corpus, monkeypatch, earlier
):
    """Ctrl-C as a run marks itself under way (its work folder made, the journal's fsync under
    way; as a scaled run's finalize into the folder holding its plan): the run's own rollback
    removes the work folder. It was left without a journal, and every later run, ``data_io
    resume`` included, was refused: "holds files data_io prepare did not write (.prepare)"."""
    import data_io.prepare.state as state

    out = tmp_path / "out"
    (out / ".data_io_scale").mkdir(parents=True)  # a plan's folder: the output folder exists
    if earlier:
        run([corpus[0]], out, small_tokenizer)
    before = tree_bytes(out)
    real = state.write_json_atomic

    def interrupted(path: Path, content: object) -> None:
        if path.name == state.JOURNAL:
            raise KeyboardInterrupt
        real(path, content)

    monkeypatch.setattr(state, "write_json_atomic", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run([corpus[1]] if earlier else [corpus[0]], out, small_tokenizer)
    monkeypatch.undo()
    assert tree_bytes(out) == before
    assert not list(out.glob(".prepare/work_*")) and not list(out.glob(".prepare/journal*"))
    assert (out / ".prepare").exists() == earlier  # a first run leaves no .prepare behind
    run(list(corpus) if earlier else [corpus[0]], out, small_tokenizer)  # not refused


def assert_redone_cleanly(out: Path, fresh: Path, corpus, tokenizer: Path) -> None:
    """After a run killed before its commit: the next run rolls it back, says so, redoes the
    second input, and the folder equals a fresh run's."""
    assert (out / ".prepare" / "journal.json").is_file()
    redone = run(list(corpus), out, tokenizer)
    assert redone.new_inputs == [str(corpus[1])]
    assert str(out / ".prepare" / "journal.json") in redone.rolled_back
    assert any("/train/shard_" in name for name in redone.rolled_back)  # the uncommitted shards
    run(list(corpus), fresh, tokenizer)
    assert tree_bytes(out) == tree_bytes(fresh)


def killed_before_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the next run die after renaming its shards, before its metadata, and without the
    in-process rollback: what a kill -9 at the worst moment leaves."""

    def die(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(prepare_run, "write_metadata", die)
    monkeypatch.setattr(prepare_run, "rollback", lambda *_args: [])


def test_run_killed_after_renames_is_redone_cleanly(small_tokenizer, tmp_path, corpus, monkeypatch):
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    run([corpus[0]], out, small_tokenizer)
    with monkeypatch.context() as patch:
        killed_before_commit(patch)
        with pytest.raises(KeyboardInterrupt):
            run(list(corpus), out, small_tokenizer)
    assert_redone_cleanly(out, fresh, corpus, small_tokenizer)
    assert sorted(p.name for p in (out / ".prepare").iterdir()) == ["hashes_00001.u64"]


def test_first_run_killed_leaves_a_reusable_folder(small_tokenizer, tmp_path, corpus, monkeypatch):
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    with monkeypatch.context() as patch:
        killed_before_commit(patch)
        with pytest.raises(KeyboardInterrupt):
            run(list(corpus), out, small_tokenizer)
    assert list((out / "train").glob("shard_*.bin"))  # it looks written, but is not committed
    assert run(list(corpus), out, small_tokenizer).rolled_back
    run(list(corpus), fresh, small_tokenizer)
    assert tree_bytes(out) == tree_bytes(fresh)


def test_failed_run_rolls_back_at_once(small_tokenizer, tmp_path, corpus):
    out = tmp_path / "out"
    run([corpus[0]], out, small_tokenizer)
    before = tree_bytes(out)
    (tmp_path / "in" / "c.jsonl").write_text('{"text": 3}\n')
    with pytest.raises(InputError, match=r"c\.jsonl: line 1"):
        run([tmp_path / "in"], out, small_tokenizer)
    assert tree_bytes(out) == before
    assert sorted(p.name for p in (out / ".prepare").iterdir()) == ["hashes_00000.u64"]


def test_char_vocabulary_grows_without_moving_old_ids(tmp_path: Path):
    write_txt(tmp_path / "a.txt", ["abc abc abc abc abc abc abc"])
    write_txt(tmp_path / "b.txt", ["zzz abc xyz and more text here"])
    out = tmp_path / "out"
    run([tmp_path / "a.txt"], out, "char", val_fraction=0.0)
    old = read_split(out, "train").tolist()
    run([tmp_path / "a.txt", tmp_path / "b.txt"], out, "char", val_fraction=0.0)
    state = json.loads((out / "tokenizer_state.json").read_text())
    assert state["chars"][:5] == ["<|endoftext|>", " ", "a", "b", "c"]
    docs = split_documents(read_split(out, "train"), 0)
    assert read_split(out, "train").tolist()[: len(old)] == old
    assert "".join(state["chars"][i] for i in docs[1]) == "zzz abc xyz and more text here"


def test_sigkill_at_the_worst_moment_is_redone_cleanly(small_tokenizer, tmp_path, corpus):
    """A real kill -9 after the shards are renamed and before the metadata is written."""
    import subprocess
    import sys

    from tests.prepare.test_api import REPO

    out, fresh = tmp_path / "out", tmp_path / "fresh"
    run([corpus[0]], out, small_tokenizer)
    script = (
        "import os, signal, sys\n"
        "import data_io.prepare.api as api, data_io.prepare.run as prepare_run\n"
        "prepare_run.write_metadata = lambda *a: os.kill(os.getpid(), signal.SIGKILL)\n"
        "api.prepare(sys.argv[1:3], sys.argv[3], tokenizer=sys.argv[4], tokens_per_shard=500,\n"
        "            progress=False)\n"
    )
    killed = subprocess.run(
        [sys.executable, "-c", script, *map(str, corpus), str(out), str(small_tokenizer)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert killed.returncode == -9, killed.stderr
    assert_redone_cleanly(out, fresh, corpus, small_tokenizer)


def test_moved_or_copied_input_is_known_by_its_content(small_tokenizer, tmp_path, corpus):
    """A renamed or copied file is not prepared again (its documents would be added twice)."""
    out = tmp_path / "out"
    run(list(corpus), out, small_tokenizer)
    before = tree_bytes(out)
    moved = tmp_path / "moved" / "renamed.txt"
    moved.parent.mkdir()
    corpus[0].rename(moved)
    copy = tmp_path / "moved" / "copy.txt"
    copy.write_bytes(corpus[1].read_bytes())
    again = run([moved, corpus[1], copy], out, small_tokenizer)
    assert again.nothing_to_do and again.new_inputs == []
    assert again.same_content_as == {str(moved): str(corpus[0]), str(copy): str(corpus[1])}
    assert tree_bytes(out) == before


def test_two_copies_in_one_run_are_prepared_once(small_tokenizer, tmp_path, corpus):
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    copy = tmp_path / "copy.txt"
    copy.write_bytes(corpus[0].read_bytes())
    result = run([corpus[0], copy], out, small_tokenizer)
    assert result.new_inputs == [str(corpus[0])]
    assert result.same_content_as == {str(copy): str(corpus[0])}
    run([corpus[0]], fresh, small_tokenizer)
    for split in ("train", "val"):
        assert np.array_equal(read_split(out, split), read_split(fresh, split))


def test_cli_lists_inputs_with_known_content(small_tokenizer, tmp_path, corpus, capsys):
    from data_io.cli import main

    out = tmp_path / "out"
    run([corpus[0]], out, small_tokenizer)
    copy = tmp_path / "copy.txt"
    copy.write_bytes(corpus[0].read_bytes())
    code = main(
        [
            "prepare",
            str(copy),
            "-o",
            str(out),
            "--tokenizer",
            str(small_tokenizer),
            "--tokens-per-shard",
            "500",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "nothing to do" in printed
    assert "1 input skipped: same content as an input already prepared" in printed, printed
    assert f"{copy} = {corpus[0]}" in printed.replace("\n", "")


def test_cli_says_an_interrupted_run_was_rolled_back(
    small_tokenizer, tmp_path, corpus, monkeypatch, capsys
):
    from data_io.cli import main

    out = tmp_path / "out"
    with monkeypatch.context() as patch:
        killed_before_commit(patch)
        with pytest.raises(KeyboardInterrupt):
            run([corpus[0]], out, small_tokenizer)
    argv = ["prepare", str(corpus[0]), "-o", str(out), "--tokenizer", str(small_tokenizer)]
    assert main([*argv, "--tokens-per-shard", "500"]) == 0
    assert "rolled back an interrupted run first" in capsys.readouterr().out


def _last_shard(out: Path, split: str = "train") -> Path:
    return sorted((out / split).glob("shard_*.bin"))[-1]


@pytest.mark.parametrize("cut", [2, 1000])
def test_refused_damaged_shard_is_left_exactly_as_it_was(small_tokenizer, tmp_path, corpus, cut):
    """A shorter last shard makes the next run refuse; its rollback must not pad the shard back
    to the recorded length (that would invent tokens where an EOS was and hide the damage)."""
    out = tmp_path / "out"
    run([corpus[0]], out, small_tokenizer)
    shard = _last_shard(out)
    shard.write_bytes(shard.read_bytes()[: max(0, shard.stat().st_size - cut)])
    before = tree_bytes(out)
    with pytest.raises(OutputError, match=r"differs from what dataset_metadata\.json records"):
        run(list(corpus), out, small_tokenizer)
    assert tree_bytes(out) == before


def test_interrupted_run_over_a_damaged_shard_is_refused_not_repaired(
    small_tokenizer, tmp_path, corpus, monkeypatch
):
    """A killed run leaves a journal; if a recorded shard was also changed, the rollback cuts
    nothing it cannot prove was added, names the shard, and keeps the journal for later."""
    out = tmp_path / "out"
    run([corpus[0]], out, small_tokenizer)
    recorded = json.loads((out / "dataset_metadata.json").read_text())["splits"]["train"]
    shard = out / "train" / recorded["shards"][-1]["name"]  # the short one the next run extends
    with monkeypatch.context() as patch:
        killed_before_commit(patch)
        with pytest.raises(KeyboardInterrupt):
            run(list(corpus), out, small_tokenizer)
    data = bytearray(shard.read_bytes())
    data[0] ^= 0xFF  # a flipped byte inside the recorded part
    shard.write_bytes(bytes(data))
    before = tree_bytes(out)
    with pytest.raises(OutputError, match=rf"{shard.name} \(.*not the recorded ones\)"):
        run(list(corpus), out, small_tokenizer)
    after = tree_bytes(out)
    assert {k: v for k, v in after.items() if "/train/" in k or "/val/" in k} == {
        k: v for k, v in before.items() if "/train/" in k or "/val/" in k
    }
    assert (out / ".prepare" / "journal.json").is_file()


def test_extended_shard_with_the_recorded_prefix_is_cut_back(small_tokenizer, tmp_path, corpus):
    """What an interrupted append leaves (the recorded bytes and more) is cut to the record."""
    import data_io.prepare.state as state

    out = tmp_path / "out"
    run([corpus[0]], out, small_tokenizer)
    before = tree_bytes(out)
    shard = _last_shard(out)
    with open(shard, "ab") as f:
        f.write(b"\x07\x00" * 9)
    metadata = json.loads((out / "dataset_metadata.json").read_text())
    assert state.rollback(out, metadata) == [str(shard)]
    assert tree_bytes(out) == before
