"""``tokenize`` and ``sample`` agree on what a task folder is (``rust/layout/cache.rs`` ``inspect``):
a folder tokenize leaves alone is skipped by sample with a note naming it; one holding task
arrays without a record is refused with advice that works (tokenize will not replace it)."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from data_io.errors import InputError
from data_io.sampling import parse_overrides, sample
from data_io.sampling.synthetic import random_task, write_corpus
from data_io.sampling.tasks import not_a_task_reason, read_tasks, select_task_folders
from data_io.tokenize import tokenize
from tests.conftest import EXAMPLE_ROWS
from tests.sampling.test_tasks import RULES

ROOT = Path(__file__).resolve().parents[2]
BPE = ROOT / "trained_tokenizers" / "bpe" / "tokenizer.json"


@pytest.fixture(scope="module")
def tokenized(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example rows tokenized by data_io (a tokenizer_info.json with hashes)."""
    out = tmp_path_factory.mktemp("foreign") / "tok"
    tokenize([EXAMPLE_ROWS], out, tokenizer_path=BPE, progress=False)
    return out


def _sample(tmp_path: Path, corpus: Path, capsys: pytest.CaptureFixture[str]):
    rules = tmp_path / "rules.yaml"
    rules.write_text("- prefix: data__\n  max_per_file: 20\n")
    config = parse_overrides(
        [f"tokenized_path={corpus}", f"output_path={tmp_path / 'out'}",
         f"prefix_config_path={rules}", "epochs=1", "plot=false"]
    )  # fmt: skip
    capsys.readouterr()
    result = sample(config, stdout=io.StringIO(), progress=False)
    return result, capsys.readouterr().err


def _user_folder(corpus: Path) -> Path:
    notes = corpus / "my_notes"
    notes.mkdir()
    (notes / "README.txt").write_text("what I tokenized and why")
    return notes


def test_a_folder_tokenize_leaves_alone_is_skipped_with_a_note(
    tmp_path: Path, tokenized: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "tok"
    shutil.copytree(tokenized, corpus)
    notes = _user_folder(corpus)
    # tokenize leaves it alone, and says so
    again = tokenize([EXAMPLE_ROWS], corpus, tokenizer_path=BPE, progress=False)
    assert again.left_alone == ["my_notes (it has no metadata.json)"]
    # ... and sample skips it the same way instead of refusing it
    result, err = _sample(tmp_path, corpus, capsys)
    assert result.rows_per_epoch > 0 and notes.is_dir()
    notes_lines = [line for line in err.splitlines() if "my_notes" in line]
    assert notes_lines == [
        f"sample: note: skipping 1 folder of {corpus} that is not a task folder (`data_io "
        "tokenize` leaves it alone too): my_notes (it has no metadata.json)"
    ]
    # Not part of the inputs' fingerprint either: editing it does not rebuild the sample.
    (notes / "README.txt").write_text("edited")
    (corpus / "other").mkdir()
    (corpus / "other" / "metadata.json").write_text('{"tool": "mine"}')
    again, err = _sample(tmp_path, corpus, capsys)
    assert again.reused
    assert (
        "my_notes (it has no metadata.json); other (its metadata.json was not written by "
        "data_io)" in err
    )


def test_task_arrays_without_a_record_get_advice_that_works(
    tmp_path: Path, tokenized: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "tok"
    shutil.copytree(tokenized, corpus)
    copy = corpus / "copy_of_arithmetic"
    shutil.copytree(corpus / "data__arithmetic.jsonl", copy)
    (copy / "metadata.json").unlink()
    with pytest.raises(InputError) as info:
        _sample(tmp_path, corpus, capsys)
    message = str(info.value)
    # One piece of advice: not also "a tokenize run was probably interrupted ... re-run".
    assert "probably interrupted" not in message and len(message.splitlines()) == 1
    advice = message.splitlines()[-1]
    assert advice.startswith(f"{copy} (it has no metadata.json): task arrays without data_io")
    assert f"move each such folder out of {corpus}" in advice
    assert "re-running it alone cannot repair this" in advice
    assert f"re-run `data_io tokenize {EXAMPLE_ROWS} -o {corpus}" in advice
    assert not (tmp_path / "out").exists()
    # The advice works: moved away, the folder is no longer in the way.
    copy.rename(tmp_path / "moved")
    result, _ = _sample(tmp_path, corpus, capsys)
    assert result.rows_per_epoch > 0


def test_not_a_task_reason_follows_tokenize(tmp_path: Path) -> None:
    cases = {
        "absent": (None, "it has no metadata.json"),
        "not_json": ("{truncated", "its metadata.json is not JSON"),
        "array": ("[1, 2]", "its metadata.json was not written by data_io"),
        "other_tool": ('{"tool": "other"}', "its metadata.json was not written by data_io"),
        "half_original": ('{"source_mtime": 1}', "its metadata.json was not written by data_io"),
        "original": ('{"source_mtime": 1, "source_size": 2}', None),
        "original_null": ('{"source_mtime": null, "source_size": null}', None),
        "ours": ('{"tool": "data_io"}', None),
        "binary": (b"\xff\xfe", "it has no metadata.json"),  # not UTF-8: unreadable as text
    }
    for name, (content, expected) in cases.items():
        folder = tmp_path / name
        folder.mkdir()
        if isinstance(content, bytes):
            (folder / "metadata.json").write_bytes(content)
        elif content is not None:
            (folder / "metadata.json").write_text(content)
        assert not_a_task_reason(folder) == expected, name
    (tmp_path / "dir_record" / "metadata.json").mkdir(parents=True)
    assert not_a_task_reason(tmp_path / "dir_record") == "it has no metadata.json"


def test_selection_sorts_tasks_suspects_and_others(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    corpus = write_corpus(tmp_path / "tok", {"a.jsonl": random_task(rng, 3)}, vocab_size=50)
    (corpus / ".a.jsonl.tmp-9").mkdir()
    (corpus / "empty").mkdir()
    (corpus / "half").mkdir()
    np.save(corpus / "half" / "tokens.npy", np.zeros(3, dtype="<u4"))
    selection = select_task_folders(corpus)
    assert selection.folders == [corpus / "a.jsonl", corpus / "half"]
    assert selection.suspect == [(corpus / "half", "it has no metadata.json")]
    assert selection.skipped == [(corpus / "empty", "it has no metadata.json")]
    assert "empty (it has no metadata.json)" in (selection.skipped_note() or "")
    assert select_task_folders(tmp_path / "tok").suspect_advice("X") is not None
    # Read as a task, the suspect folder fails like any damaged one, with the delete advice.
    with pytest.raises(InputError, match=r"task half: .*inst_start\.npy is missing"):
        read_tasks(corpus, RULES, progress=False)
    shutil.rmtree(corpus / "half")
    selection = select_task_folders(corpus)
    assert selection.suspect_advice("X") is None and selection.skipped_note() is not None
    assert [task.name for task in read_tasks(corpus, RULES, progress=False)] == ["a.jsonl"]


def test_a_legacy_folder_without_a_record_is_still_sampled(tmp_path: Path) -> None:
    """The original pipeline's folder (no hashes in tokenizer_info.json) whose task lost its
    metadata.json: sampled as before, as a legacy task."""
    rng = np.random.default_rng(1)
    corpus = write_corpus(tmp_path / "tok", {"a.jsonl": random_task(rng, 4)}, vocab_size=50)
    (corpus / "a.jsonl" / "metadata.json").unlink()
    info = json.loads((corpus / "tokenizer_info.json").read_text())
    assert "tokenizer_blake3" not in info
    assert [task.name for task in read_tasks(corpus, RULES, progress=False)] == ["a.jsonl"]


@pytest.mark.parametrize("metadata", [None, "{truncated"])
def test_a_task_folder_without_a_valid_record_gets_one_advice(
    tmp_path: Path, tokenized: Path, capsys: pytest.CaptureFixture[str], metadata: str | None
) -> None:
    """A task of the folder whose metadata.json is gone or broken: move or delete it, then
    re-run tokenize; not also the mixed-runs message's "a tokenize run was interrupted"."""
    corpus = tmp_path / "tok"
    shutil.copytree(tokenized, corpus)
    task = corpus / "data__arithmetic.jsonl"
    (task / "metadata.json").unlink()
    if metadata is not None:
        (task / "metadata.json").write_text(metadata)
    with pytest.raises(InputError) as info:
        _sample(tmp_path, corpus, capsys)
    message = str(info.value)
    assert "mixes tasks" not in message and "probably interrupted" not in message
    why = "it has no metadata.json" if metadata is None else "its metadata.json is not JSON"
    assert message.startswith(f"{task} ({why}): task arrays without data_io's record")
    assert message.endswith(f"--tokenizer-path {BPE}` and sample again")


def test_a_sampled_output_inside_the_tokenized_folder_is_only_moved_out(
    tmp_path: Path, tokenized: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sample moved or copied into the tokenized folder is not a damaged task: the only
    advice is to move it out (no re-tokenizing, no "interrupted tokenize run")."""
    corpus = tmp_path / "tok"
    shutil.copytree(tokenized, corpus)
    _sample(tmp_path, corpus, capsys)
    sampled = corpus / "sampled"
    (tmp_path / "out").rename(sampled)
    with pytest.raises(InputError) as info:
        _sample(tmp_path, corpus, capsys)
    assert str(info.value) == (
        f"{sampled}: a sampled output (metadata.json with tokenizer_info, epoch_<k>/ folders), "
        f"not a task, inside the tokenized folder {corpus}, whose sub-folders are read as "
        f"tasks: move it out of {corpus} (a sample's output_path must lie outside "
        "tokenized_path), then sample again"
    )
    assert not (tmp_path / "out").exists()
    # With a damaged task beside it, each gets its own advice, once.
    (corpus / "data__arithmetic.jsonl" / "metadata.json").unlink()
    with pytest.raises(InputError) as info:
        _sample(tmp_path, corpus, capsys)
    lines = str(info.value).splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"{sampled}: a sampled output")
    assert lines[1].startswith(f"{corpus / 'data__arithmetic.jsonl'} (it has no metadata.json)")
    # The advice works.
    sampled.rename(tmp_path / "kept_sample")
    shutil.rmtree(corpus / "data__arithmetic.jsonl")
    assert _sample(tmp_path, corpus, capsys)[0].rows_per_epoch > 0
