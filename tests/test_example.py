"""``data_io example``: it runs end to end, and never deletes what it did not write."""

from __future__ import annotations

from pathlib import Path

import pytest

from data_io.cli import main
from data_io.errors import OutputError
from data_io.example import EXAMPLE_OUTPUTS, WORKDIR_MARKER, prepare_workdir


def test_rerun_in_its_own_folder_keeps_other_files(tmp_path: Path, capsys) -> None:
    workdir = tmp_path / "work" / "example"
    assert main(["example", "--workdir", str(workdir)]) == 0
    printed = " ".join(capsys.readouterr().out.split())  # undo the console's line wrapping
    assert "example done" in printed
    # The train-tokenizer line names both files written beside tokenizer.json.
    assert "(+ config.json, tokenizer_config.json): vocab" in printed
    trained = workdir / "trained_tokenizers" / "example"
    assert (trained / "config.json").is_file() and (trained / "tokenizer_config.json").is_file()
    assert (workdir / WORKDIR_MARKER).is_file()
    assert (workdir / "sampled" / "metadata.json").is_file()
    # Written in the work folder (not the current one): the figure is linked from there.
    assert "](sampled/analytics.png)" in (workdir / "analytics.md").read_text()
    # The user keeps notes in the example's folder and adds a file to one of its outputs.
    notes = workdir / "my_notes.txt"
    notes.write_text("keep me")
    stale = workdir / "sampled" / "stale.bin"
    stale.write_bytes(b"x")
    assert main(["example", "--workdir", str(workdir)]) == 0
    assert "example done" in capsys.readouterr().out
    assert notes.read_text() == "keep me"
    assert not stale.exists()  # the example's own outputs are rebuilt from scratch
    assert (workdir / "sampled" / "metadata.json").is_file()


def test_help_names_every_part_of_the_run(capsys) -> None:
    """--help says what the run does (the README's list): the scaled-out tokenize, the mixture
    loader and prepare's shards too, not only clean, train, tokenize, sample and one batch."""
    with pytest.raises(SystemExit):
        main(["example", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for part in ("tokenize (twice", "worker processes", "sample two epochs", "packed batch"):
        assert part in text
    for part in ("flat-shard mixture", "prepare raw text into train/val shards"):
        assert part in text


def test_foreign_non_empty_folder_is_refused_untouched(tmp_path: Path, capsys) -> None:
    workdir = tmp_path / "mine"
    workdir.mkdir()
    (workdir / "thesis.tex").write_text("years of work")
    (workdir / "data").mkdir()  # even a name the example uses is not taken over
    (workdir / "data" / "rows.jsonl").write_text("{}\n")
    assert main(["example", "--workdir", str(workdir)]) == 1
    err = capsys.readouterr().err
    assert "data_io example: error: --workdir" in err
    assert "not empty (data, thesis.tex)" in err and WORKDIR_MARKER in err
    assert "pass a new or empty folder" in err
    assert sorted(p.name for p in workdir.iterdir()) == ["data", "thesis.tex"]
    assert (workdir / "data" / "rows.jsonl").read_text() == "{}\n"


def test_prepare_new_and_empty_folders(tmp_path: Path) -> None:
    new = tmp_path / "a" / "b"
    prepare_workdir(new)
    assert [p.name for p in new.iterdir()] == [WORKDIR_MARKER]
    empty = tmp_path / "empty"
    empty.mkdir()
    prepare_workdir(empty)
    assert (empty / WORKDIR_MARKER).is_file()


def test_prepare_marked_folder_removes_only_example_outputs(tmp_path: Path) -> None:
    workdir = tmp_path / "w"
    prepare_workdir(workdir)
    for name in EXAMPLE_OUTPUTS:
        (workdir / name).mkdir()
        (workdir / name / "f").write_text("old")
    (workdir / "extra").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("p")
    (workdir / "sampled").rename(workdir / "gone")
    (workdir / "sampled").symlink_to(outside)  # a link is removed, its target kept
    prepare_workdir(workdir)
    assert sorted(p.name for p in workdir.iterdir()) == sorted([WORKDIR_MARKER, "extra", "gone"])
    assert (outside / "precious").read_text() == "p"


def test_prepare_refuses_a_file_and_lists_at_most_five_names(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("")
    with pytest.raises(OutputError, match="exists and is not a folder"):
        prepare_workdir(file)
    crowded = tmp_path / "crowded"
    crowded.mkdir()
    for i in range(7):
        (crowded / f"f{i}").write_text("")
    with pytest.raises(OutputError, match=r"not empty \(f0, f1, f2, f3, f4, …\)"):
        prepare_workdir(crowded)
    assert len(list(crowded.iterdir())) == 7
