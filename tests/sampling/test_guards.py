"""What the sampler refuses before it writes or deletes anything: ids outside the
vocabulary, empty samples, outputs overlapping the input or sitting on a mount point, and
the previous output kept until the new one exists (or deleted only after every check)."""

from __future__ import annotations

import fcntl
import io
import os
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from data_io.errors import ConfigError, InputError, OutputError
from data_io.sampling import output, pool, sample, tasks
from data_io.sampling.synthetic import SyntheticTask, random_task, write_corpus, write_task
from data_io.tokenize import tokenize
from tests.conftest import mounted_tmpfs, sampler_config

VOCAB = 500


def _corpus(root: Path) -> Path:
    rng = np.random.default_rng(3)
    tasks = {"a.jsonl": random_task(rng, 30), "b__x.parquet": random_task(rng, 12)}
    return write_corpus(root, tasks, vocab_size=VOCAB)


def _config(tmp_path: Path, corpus: Path, *extra: str):
    return sampler_config(tmp_path, corpus, "plot=false", *extra)


def _run(config, **kwargs):
    return sample(config, stdout=io.StringIO(), progress=False, **kwargs)


def _files(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def _add_foreign_task(corpus: Path, name: str = "z.jsonl") -> None:
    """A task whose ids run up to 5,000 in a folder whose tokenizer_info says 500 (another
    tokenizer's output without records to tell: only the ids show it)."""
    # Small: the short-space tests need the new output to fit where the old one was.
    rows = SyntheticTask(inst_len=np.full(20, 5), resp_len=np.full(20, 7))
    write_task(corpus / name, rows, vocab_size=5000, seed=1)


# -- ids outside the vocabulary -----------------------------------------------------------


def test_ids_outside_the_vocabulary_fail_the_run_and_publish_nothing(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "tok")
    _add_foreign_task(corpus)
    with pytest.raises(InputError) as info:
        _run(_config(tmp_path, corpus))
    message = str(info.value)
    assert f"{corpus / 'z.jsonl' / 'tokens.npy'}: task z.jsonl: token " in message
    assert f"not below vocab_size {VOCAB} of tokenizer_info.json" in message
    _assert_honest_advice(message, corpus)
    assert not (tmp_path / "out").exists()
    assert not any(entry.name.startswith(".out") for entry in tmp_path.iterdir())


def _assert_honest_advice(message: str, corpus: Path) -> None:
    """An id past the vocabulary may be a damaged file or another tokenizer's output: the
    message says both, and says to delete the task (the tokenizer's cache would keep it)."""
    assert "either this task's tokens.npy is damaged or the task was tokenized with another" in (
        message
    )
    assert "different (larger)" not in message
    assert f"delete {corpus / 'z.jsonl'} and re-run `data_io tokenize " in message
    assert f"-o {corpus} --tokenizer-path trained_tokenizers/synthetic/tokenizer.json`" in message


# -- empty samples ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("missing/analytics.png", r"the folder .*missing does not exist; create it"),
        ("", r".* is a folder; name the PNG file"),
    ],
)
def test_a_plot_path_that_cannot_be_written_is_refused_before_sampling(
    tmp_path: Path, where: str, message: str
) -> None:
    corpus = _corpus(tmp_path / "tok")
    config = sampler_config(tmp_path, corpus, f"plot_path={tmp_path / where}")
    with pytest.raises(ConfigError, match=rf"config key 'plot_path': {message}"):
        _run(config)
    assert not (tmp_path / "out").exists()
    # No staging folder left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rules.yaml", "tok"]


def test_folder_without_tasks_is_refused_unless_allowed(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "tok", {}, vocab_size=VOCAB)
    with pytest.raises(InputError, match=r"holds no task folders.*allow_empty=true"):
        _run(_config(tmp_path, corpus))
    assert not (tmp_path / "out").exists()
    result = _run(_config(tmp_path, corpus, "allow_empty=true"))
    assert result.rows_per_epoch == 0 and (tmp_path / "out" / "metadata.json").is_file()


def test_context_that_drops_every_row_is_refused_and_keeps_the_old_output(
    tmp_path: Path,
) -> None:
    corpus = _corpus(tmp_path / "tok")
    _run(_config(tmp_path, corpus))
    before = _files(tmp_path / "out")
    # Every instruction has at least 2 tokens: a context of 2 leaves no room for a response.
    with pytest.raises(ConfigError) as info:
        _run(_config(tmp_path, corpus, "context_size=2"))
    message = str(info.value)
    assert "every one of the 42 rows of the 2 tasks" in message
    assert "instruction fills the context (truncate mode): " in message
    assert "context_size=2" in message and "allow_empty=true" in message
    assert _files(tmp_path / "out") == before


def test_drop_mode_dropping_every_row_names_the_reason(tmp_path: Path) -> None:
    rows = SyntheticTask(inst_len=np.full(5, 10), resp_len=np.full(5, 10))
    corpus = write_corpus(tmp_path / "tok", {"a.jsonl": rows}, vocab_size=VOCAB)
    (tmp_path / "rules.yaml").write_text("- prefix: a\n  long_context: drop\n")
    with pytest.raises(ConfigError, match=r"longer than the context \(drop mode\): 5"):
        _run(_config(tmp_path, corpus, "context_size=15"))


def test_rules_that_take_no_row_are_refused(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "tok")
    (tmp_path / "rules.yaml").write_text(
        "- prefix: a\n  max_per_file: 0\n- prefix: b__\n  max_per_file: 0\n"
    )
    with pytest.raises(
        ConfigError, match=r"rules of .*rules\.yaml take none of them \(max_per_file: 0\)"
    ):
        _run(_config(tmp_path, corpus))
    assert _run(_config(tmp_path, corpus, "allow_empty=true")).rows_per_epoch == 0


def test_tasks_without_rows_are_refused(tmp_path: Path) -> None:
    empty = SyntheticTask(inst_len=np.zeros(0), resp_len=np.zeros(0))
    corpus = write_corpus(tmp_path / "tok", {"a.jsonl": empty}, vocab_size=VOCAB)
    with pytest.raises(InputError, match=r"the task in .* holds no rows"):
        _run(_config(tmp_path, corpus))


# -- the previous output ------------------------------------------------------------------


def test_previous_output_stays_until_the_new_one_is_complete(tmp_path: Path, monkeypatch) -> None:
    corpus = _corpus(tmp_path / "tok")
    _run(_config(tmp_path, corpus))
    before = _files(tmp_path / "out")
    seen: list[dict[str, bytes]] = []
    real_copy = pool.copy_tokens

    def watching_copy(*args, **kwargs):
        seen.append(_files(tmp_path / "out"))  # mid-build: the old output is still whole
        real_copy(*args, **kwargs)

    monkeypatch.setattr(pool, "copy_tokens", watching_copy)
    _run(_config(tmp_path, corpus, "seed=4"))
    assert seen == [before]
    assert _files(tmp_path / "out") != before


def _short_of_space(target: Path):
    """A probe that reports room only once the previous output is gone (the sampler asks for
    8 MiB beyond the output's size)."""

    def probe(_path: Path) -> int:
        return (8 << 20) + 1 if target.exists() else 10**12

    return probe


def test_short_space_says_so_before_deleting(tmp_path: Path, capsys) -> None:
    corpus = _corpus(tmp_path / "tok")
    _run(_config(tmp_path, corpus))
    capsys.readouterr()
    result = _run(_config(tmp_path, corpus, "seed=4"), free_space=_short_of_space(tmp_path / "out"))
    assert not result.reused
    log = capsys.readouterr().err
    assert "no room to keep the previous output until the new one is complete" in log
    assert "deleting the previous output" in log


def test_short_space_checks_the_token_ids_before_deleting(tmp_path: Path, monkeypatch) -> None:
    corpus = _corpus(tmp_path / "tok")
    _run(_config(tmp_path, corpus))
    before = _files(tmp_path / "out")
    _add_foreign_task(corpus)
    copies: list[object] = []
    monkeypatch.setattr(pool, "copy_tokens", lambda *args, **kwargs: copies.append(args))
    with pytest.raises(InputError, match=f"not below vocab_size {VOCAB}") as info:
        _run(_config(tmp_path, corpus), free_space=_short_of_space(tmp_path / "out"))
    _assert_honest_advice(str(info.value), corpus)  # the same words as the copy's
    assert _files(tmp_path / "out") == before  # nothing deleted
    assert copies == []  # and nothing copied


def test_huge_epochs_meet_the_space_check_without_listing_every_file(tmp_path: Path) -> None:
    # The space needed is counted, not summed over a list of every epoch file: 200,000
    # epochs listed took ~100 MB before the check (epochs=1e9 exhausted memory).
    corpus = _corpus(tmp_path / "tok")
    _run(_config(tmp_path, corpus))
    before = _files(tmp_path / "out")
    epoch_bytes = sum(len(data) for name, data in before.items() if name.startswith("epoch_0/"))
    tracemalloc.start()
    try:
        with pytest.raises(OutputError, match="not enough space") as info:
            _run(_config(tmp_path, corpus, "epochs=200000"), free_space=lambda _path: 10 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 << 20
    assert f"epochs=200,000 of {epoch_bytes:,} bytes each: lower epochs" in str(info.value)
    assert _files(tmp_path / "out") == before  # the previous output is untouched
    assert list(tmp_path.glob(".out*")) == []


def test_short_space_with_a_bad_config_deletes_nothing(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "tok")
    _run(_config(tmp_path, corpus))
    before = _files(tmp_path / "out")
    with pytest.raises(ConfigError, match="the sample would be empty"):
        _run(
            _config(tmp_path, corpus, "context_size=2"),
            free_space=_short_of_space(tmp_path / "out"),
        )
    assert _files(tmp_path / "out") == before


# -- a tokenize run writing the input -----------------------------------------------------


def test_a_running_tokenize_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "tok")
    lock = corpus / tasks.TOKENIZE_LOCK
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as `data_io tokenize` holds it
        with pytest.raises(InputError) as info:
            _run(_config(tmp_path, corpus))
    finally:
        os.close(fd)
    assert str(info.value) == (
        f"a data_io tokenize is writing {corpus} now (it holds {lock}): its tasks are being "
        f"replaced; wait for it to finish, then sample again"
    )
    assert not (tmp_path / "out").exists()
    assert list(tmp_path.glob(".out*")) == []
    # Once it is done (the lock file stays), the same command samples.
    assert not _run(_config(tmp_path, corpus)).reused
    assert (tmp_path / "out" / "metadata.json").is_file()


def test_tokenize_cannot_start_while_the_sample_reads(tmp_path: Path, monkeypatch) -> None:
    corpus = _corpus(tmp_path / "tok")
    lock = corpus / tasks.TOKENIZE_LOCK
    lock.touch()
    attempts: list[str] = []
    copy = pool.copy_tokens

    def tokenize_tries_to_start(*args, **kwargs):
        # A second open file, as another process has: the sampler's shared lock blocks it.
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            attempts.append("locked")
        except BlockingIOError:
            attempts.append("refused")
        finally:
            os.close(fd)
        return copy(*args, **kwargs)

    monkeypatch.setattr(pool, "copy_tokens", tokenize_tries_to_start)
    _run(_config(tmp_path, corpus))
    assert attempts and set(attempts) == {"refused"}
    fd = os.open(lock, os.O_RDWR)  # and released when the sample is done
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


def test_a_tokenize_refused_while_a_sample_reads_names_both(tmp_path: Path) -> None:
    rows = tmp_path / "rows"
    rows.mkdir()
    (rows / "a.jsonl").write_text('{"condition": "direct", "instruction": "q", "response": "a"}\n')
    out = tmp_path / "tok"
    out.mkdir()
    fd = os.open(out / tasks.TOKENIZE_LOCK, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # as a running sample holds it
        with pytest.raises(OutputError, match=r"or a data_io sample is reading it .*wait for it"):
            tokenize([rows], out, progress=False)
    finally:
        os.close(fd)
    assert sorted(p.name for p in out.iterdir()) == [tasks.TOKENIZE_LOCK]


# -- where the output goes ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("output_path", "relation"),
    [("tok", "is"), ("tok/sampled", "is inside"), (".", "contains"), ("link", "is")],
)
def test_output_overlapping_the_input_is_refused(
    tmp_path: Path, output_path: str, relation: str
) -> None:
    corpus = _corpus(tmp_path / "tok")
    (tmp_path / "link").symlink_to(corpus)
    before = _files(corpus)
    target = tmp_path / output_path
    with pytest.raises(ConfigError) as info:
        _run(_config(tmp_path, corpus, f"output_path={target}"))
    message = str(info.value)
    assert f"output_path': {str(target)!r} {relation} tokenized_path {str(corpus)!r}" in message
    assert _files(corpus) == before
    assert not (corpus / "sampled").exists()


def test_output_beside_the_input_with_a_common_prefix_is_fine(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "tok")
    _run(_config(tmp_path, corpus, f"output_path={tmp_path / 'tok_sampled'}"))
    assert (tmp_path / "tok_sampled" / "tokens.npy").is_file()


def test_mount_point_output_is_refused(tmp_path: Path, monkeypatch) -> None:
    corpus = _corpus(tmp_path / "tok")
    mount = tmp_path / "out"
    mount.mkdir()
    monkeypatch.setattr(output, "is_mount_point", lambda path: path == mount)
    with pytest.raises(ConfigError) as info:
        _run(_config(tmp_path, corpus))
    message = str(info.value)
    assert f"{str(mount)!r} is a mount point" in message
    assert f"output_path={str(mount / 'sampled')!r}" in message
    assert list(mount.iterdir()) == []
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["out", "rules.yaml", "tok"]


def test_dev_shm_itself_is_refused(tmp_path: Path) -> None:
    if not os.path.ismount("/dev/shm"):
        pytest.skip("/dev/shm is not a mount point here (the fake mount test covers it)")
    corpus = _corpus(tmp_path / "tok")
    with pytest.raises(ConfigError, match=r"'/dev/shm' is a mount point.*/dev/shm/sampled"):
        _run(_config(tmp_path, corpus, "output_path=/dev/shm"))


def test_real_tmpfs_at_the_output_path_is_refused(tmp_path: Path) -> None:
    # test_mount_point_output_is_refused fakes the mount where this cannot run.
    with mounted_tmpfs(tmp_path / "out", "64m") as mount:
        corpus = _corpus(tmp_path / "tok")
        with pytest.raises(ConfigError, match="is a mount point"):
            _run(_config(tmp_path, corpus))
        assert list(mount.iterdir()) == []
        # A folder inside it works.
        _run(_config(tmp_path, corpus, f"output_path={mount / 'sampled'}"))
        assert (mount / "sampled" / "tokens.npy").is_file()


@pytest.mark.parametrize("under", ["somefile/out", "somefile/deeper/out"])
def test_an_output_path_under_a_file_names_the_file(tmp_path: Path, under: str) -> None:
    """mkdir says only "File exists" or "Not a directory": the message names the file, and
    before the inputs are read (here they would fail: their tokenizer_info.json is gone)."""
    corpus = _corpus(tmp_path / "tok")
    (corpus / "tokenizer_info.json").unlink()
    blocker = tmp_path / "somefile"
    blocker.write_text("mine")
    target = tmp_path / under
    with pytest.raises(OutputError) as info:
        _run(_config(tmp_path, corpus, f"output_path={target}"))
    assert str(info.value) == (
        f"output_path {str(target)!r} lies under {str(blocker)!r}, which is a file, not a "
        f"folder, so the output cannot be created there; move or rename {str(blocker)!r}, "
        "or pass another output_path"
    )
    assert blocker.read_text() == "mine"
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["rules.yaml", "somefile", "tok"]
