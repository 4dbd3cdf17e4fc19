"""Provenance of a tokenized folder (data_io/formats/provenance.py) and the sampler's use of it:
tasks of two tokenizer runs are refused before anything is written; consistent folders and
folders of the original pipeline are accepted."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from data_io.errors import InputError
from data_io.formats.provenance import (
    LEGACY,
    Origin,
    TaskOrigin,
    check_provenance,
    info_origin,
    read_task_origin,
    repair_command,
)
from data_io.sampling import parse_overrides, sample
from data_io.sampling.tasks import task_folders
from data_io.tokenize import tokenize

ROOT = Path(__file__).resolve().parents[2]
BPE = ROOT / "trained_tokenizers" / "bpe" / "tokenizer.json"


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory, small_tokenizer: Path):
    """The example rows tokenized twice, by the project's BPE and by a 600-token BPE."""
    from tests.conftest import EXAMPLE_ROWS

    base = tmp_path_factory.mktemp("provenance")
    big = base / "tok_bpe"
    small = base / "tok_small"
    tokenize([EXAMPLE_ROWS], big, tokenizer_path=BPE, progress=False)
    tokenize([EXAMPLE_ROWS], small, tokenizer_path=small_tokenizer, progress=False)
    return big, small


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def _swap_task(into: Path, source: Path, task: str) -> None:
    """Replace one task folder of ``into`` by the one of ``source`` (as a half-done re-run)."""
    shutil.rmtree(into / task)
    shutil.copytree(source / task, into / task)


def _sample(tmp_path: Path, corpus: Path, out: Path | None = None):
    rules = tmp_path / "rules.yaml"
    rules.write_text("- prefix: data__\n  max_per_file: 20\n")
    out = out or tmp_path / "out"
    config = parse_overrides(
        [
            f"tokenized_path={corpus}",
            f"output_path={out}",
            f"prefix_config_path={rules}",
            "epochs=2",
            "plot=false",
        ]
    )
    return sample(config, stdout=io.StringIO(), progress=False)


def _info(corpus: Path) -> dict:
    return json.loads((corpus / "tokenizer_info.json").read_text())


def _write_info(corpus: Path, info: dict) -> None:
    (corpus / "tokenizer_info.json").write_text(json.dumps(info))


def _folders(corpus: Path) -> list[Path]:
    return [folder for folder in task_folders(corpus) if not folder.name.startswith(".")]


def test_consistent_folders_are_accepted(tmp_path: Path, corpora) -> None:
    for corpus in corpora:
        origins = check_provenance(corpus, _info(corpus), _folders(corpus))
        assert len({origin.origin for origin in origins}) == 1
        assert not origins[0].origin.legacy
    result = _sample(tmp_path, corpora[0])
    assert result.rows_per_epoch > 0 and (tmp_path / "out" / "tokens.npy").is_file()


@pytest.mark.parametrize("direction", ["small task in bpe folder", "bpe task in small folder"])
def test_mixed_tokenizers_are_refused_before_writing(
    tmp_path: Path, corpora, direction: str
) -> None:
    big, small = corpora
    host, guest = (big, small) if direction.startswith("small") else (small, big)
    corpus = _copy(host, tmp_path / "tok")
    _swap_task(corpus, guest, "data__arithmetic.jsonl")
    _swap_task(corpus, guest, "data_clustered__facts__primes_low.parquet")
    with pytest.raises(InputError) as info:
        _sample(tmp_path, corpus)
    message = str(info.value)
    assert "mixes tasks of different tokenizer runs" in message
    # Both sides, each with its count and names; the info's side is marked.
    assert "2 tasks: data__arithmetic.jsonl, data_clustered__facts__primes_low.parquet" in message
    assert "4 tasks: data__Platypus__code.jsonl" in message
    info_line = next(line for line in message.splitlines() if "<- the run" in line)
    assert "4 tasks" in info_line and "tokenizer_info.json" in info_line
    # The repair command: the inputs (from the records), the folder, the info's tokenizer.
    host_info = _info(host)
    assert (
        f"data_io tokenize {' '.join(host_info['inputs'])} -o {corpus} "
        f"--tokenizer-path {host_info['tokenizer_path']}\n" in message
    )
    assert not (tmp_path / "out").exists()
    assert not any(entry.name.startswith(".out") for entry in tmp_path.iterdir())


def test_refusal_keeps_the_previous_output(tmp_path: Path, corpora) -> None:
    big, small = corpora
    corpus = _copy(big, tmp_path / "tok")
    _sample(tmp_path, corpus)
    before = (tmp_path / "out" / "tokens.npy").read_bytes()
    _swap_task(corpus, small, "data__translations.jsonl")
    with pytest.raises(InputError, match=r"data__translations\.jsonl"):
        _sample(tmp_path, corpus)
    assert (tmp_path / "out" / "tokens.npy").read_bytes() == before


def test_a_failed_retokenize_is_caught(tmp_path: Path, corpora, small_tokenizer: Path) -> None:
    """The issue's case: re-tokenizing with a new tokenizer fails on one file, which keeps
    its old folder; the run's other tasks are new. The sampler must not mix them."""
    from tests.conftest import EXAMPLE_ROWS

    rows = _copy(EXAMPLE_ROWS, tmp_path / "rows")
    corpus = tmp_path / "tok"
    tokenize([rows], corpus, tokenizer_path=BPE, progress=False)
    with (rows / "data" / "arithmetic.jsonl").open("a") as handle:
        handle.write("{not json\n")
    result = tokenize([rows], corpus, tokenizer_path=small_tokenizer, progress=False, check=False)
    assert [failed.task for failed in result.failed] == ["data__arithmetic.jsonl"]
    with pytest.raises(InputError) as info:
        _sample(tmp_path, corpus)
    message = str(info.value)
    assert "1 task: data__arithmetic.jsonl" in message
    assert f"-o {corpus} --tokenizer-path" in message
    assert str(rows) in message  # the input root, derived from the records
    assert not (tmp_path / "out").exists()


def _make_legacy(corpus: Path, tasks: list[str] | None = None) -> None:
    """Rewrite as the original pipeline writes: size+mtime records, info without hashes."""
    for folder in _folders(corpus):
        if tasks is None or folder.name in tasks:
            (folder / "metadata.json").write_text(
                json.dumps({"source_mtime": 1.5, "source_size": 10})
            )
    if tasks is None:
        info = _info(corpus)
        for key in ("tokenizer_blake3", "options_blake3", "tool", "inputs"):
            info.pop(key, None)
        _write_info(corpus, info)


def test_original_pipeline_folder_is_accepted(tmp_path: Path, corpora) -> None:
    corpus = _copy(corpora[0], tmp_path / "tok")
    _make_legacy(corpus)
    origins = check_provenance(corpus, _info(corpus), _folders(corpus))
    assert all(origin.origin == LEGACY for origin in origins)
    assert _sample(tmp_path, corpus).rows_per_epoch > 0


def _strip_hashes(corpus: Path) -> None:
    """tokenizer_info.json as the original pipeline writes it (no hashes)."""
    info = _info(corpus)
    for key in ("tokenizer_blake3", "options_blake3"):
        info.pop(key, None)
    _write_info(corpus, info)


def test_legacy_info_with_one_data_io_run_is_accepted(tmp_path: Path, corpora) -> None:
    corpus = _copy(corpora[0], tmp_path / "tok")
    _strip_hashes(corpus)
    assert _sample(tmp_path, corpus).rows_per_epoch > 0


def test_legacy_and_data_io_tasks_are_not_mixed(tmp_path: Path, corpora) -> None:
    corpus = _copy(corpora[0], tmp_path / "tok")
    _make_legacy(corpus)
    _swap_task(corpus, corpora[0], "data__arithmetic.jsonl")  # a data_io task again
    with pytest.raises(InputError) as info:
        _sample(tmp_path, corpus)
    message = str(info.value)
    assert "no data_io record" in message and "1 task: data__arithmetic.jsonl" in message
    assert "records no tokenizer hash (original pipeline)" in message


def test_legacy_info_with_disagreeing_data_io_tasks_is_refused(tmp_path: Path, corpora) -> None:
    big, small = corpora
    corpus = _copy(big, tmp_path / "tok")
    _strip_hashes(corpus)
    _swap_task(corpus, small, "data__arithmetic.jsonl")
    with pytest.raises(InputError, match="mixes tasks of different tokenizer runs"):
        _sample(tmp_path, corpus)


def test_hashed_info_refuses_tasks_without_a_record(tmp_path: Path, corpora) -> None:
    corpus = _copy(corpora[0], tmp_path / "tok")
    _make_legacy(corpus, ["data__translations.jsonl"])
    (corpus / "data__arithmetic.jsonl" / "metadata.json").unlink()
    with pytest.raises(InputError) as info:
        _sample(tmp_path, corpus)
    message = str(info.value)
    # The task of the original pipeline's record is listed among the origins (re-run tokenize);
    # the one without metadata.json is named apart, with its own advice (move or delete it).
    assert (
        "no data_io record (original pipeline, or metadata.json absent/unreadable): 1 task: "
        "data__translations.jsonl" in message
    )
    assert "data__arithmetic.jsonl (it has no metadata.json): task arrays without" in message
    assert "move each such folder out of" in message


def test_info_of_a_run_that_matches_no_task(tmp_path: Path, corpora) -> None:
    """tokenizer_info.json rewritten by a newer run whose tasks were all lost."""
    big, small = corpora
    corpus = _copy(big, tmp_path / "tok")
    _write_info(corpus, _info(small))
    with pytest.raises(InputError) as info:
        _sample(tmp_path, corpus)
    message = str(info.value)
    assert "matches none of the tasks" in message and "6 tasks" in message


def test_info_with_only_a_tokenizer_hash_is_checked_on_it(tmp_path: Path, corpora) -> None:
    """An info from before options_blake3 was recorded: the tokenizer hash still decides."""
    big, small = corpora
    corpus = _copy(big, tmp_path / "tok")
    info = _info(corpus)
    info.pop("options_blake3", None)
    _write_info(corpus, info)
    assert _sample(tmp_path, corpus).rows_per_epoch > 0
    _swap_task(corpus, small, "data__arithmetic.jsonl")
    with pytest.raises(InputError, match=r"1 task: data__arithmetic\.jsonl"):
        _sample(tmp_path, corpus)


def test_options_hash_of_the_info_is_checked(tmp_path: Path, corpora) -> None:
    corpus = _copy(corpora[0], tmp_path / "tok")
    record = json.loads((corpus / "data__arithmetic.jsonl" / "metadata.json").read_text())
    info = _info(corpus)
    info["options_blake3"] = record["options_blake3"]
    _write_info(corpus, info)
    assert _sample(tmp_path, corpus).rows_per_epoch > 0
    info["options_blake3"] = "0" * 64  # another layout (e.g. other condition tokens)
    _write_info(corpus, info)
    with pytest.raises(InputError, match="options blake3 000000000000"):
        _sample(tmp_path, corpus)


def test_token_dtype_must_match_the_record(tmp_path: Path, corpora) -> None:
    corpus = _copy(corpora[0], tmp_path / "tok")
    tokens = corpus / "data__arithmetic.jsonl" / "tokens.npy"
    np.save(tokens, np.load(tokens).astype("<u2"))
    with pytest.raises(InputError) as info:
        _sample(tmp_path, corpus)
    message = str(info.value)
    assert "data__arithmetic.jsonl (uint16, record says uint32)" in message
    assert "--tokenizer-path" in message
    assert not (tmp_path / "out").exists()


def _fake_task(corpus: Path, name: str, record: dict | None) -> Path:
    folder = corpus / name
    folder.mkdir(parents=True)
    if record is not None:
        (folder / "metadata.json").write_text(json.dumps(record))
    return folder


def test_many_tasks_are_listed_first_few_plus_count(tmp_path: Path) -> None:
    corpus = tmp_path / "tok"
    folders = [
        _fake_task(corpus, f"t{index:02d}.jsonl", {"tool": "data_io", "tokenizer_blake3": "aa"})
        for index in range(8)
    ]
    folders.append(_fake_task(corpus, "u.jsonl", {"tool": "data_io", "tokenizer_blake3": "bb"}))
    with pytest.raises(InputError) as info:
        check_provenance(corpus, {"tokenizer_blake3": "bb"}, folders)
    message = str(info.value)
    assert "8 tasks: t00.jsonl, t01.jsonl, t02.jsonl, t03.jsonl, t04.jsonl and 3 more" in message
    assert "1 task: u.jsonl  <- the run tokenizer_info.json names" in message
    # Neither inputs nor records with a source: the generic form of the command.
    assert "data_io tokenize <input folders> -o" in message
    assert "--tokenizer-path <tokenizer.json>" in message


def test_unreadable_records_count_as_no_record(tmp_path: Path) -> None:
    corpus = tmp_path / "tok"
    bad_json = _fake_task(corpus, "a.jsonl", None)
    (bad_json / "metadata.json").write_text("{truncated")
    not_object = _fake_task(corpus, "b.jsonl", None)
    (not_object / "metadata.json").write_text("[1, 2]")
    foreign = _fake_task(corpus, "c.jsonl", {"tool": "other", "tokenizer_blake3": "aa"})
    for folder in (bad_json, not_object, foreign):
        assert read_task_origin(folder).origin == LEGACY
    check_provenance(corpus, {"vocab_size": 10}, [bad_json, not_object, foreign])
    with pytest.raises(InputError, match="3 task"):
        check_provenance(corpus, {"tokenizer_blake3": "aa"}, [bad_json, not_object, foreign])


def test_info_origin() -> None:
    assert info_origin({"tokenizer_path": "x"}) is None
    assert info_origin({"tokenizer_blake3": None}) is None
    assert info_origin({"tokenizer_blake3": "a"}) == Origin("a", None)
    assert info_origin({"tokenizer_blake3": "a", "options_blake3": "b"}) == Origin("a", "b")


def test_repair_command_prefers_the_recorded_inputs(tmp_path: Path) -> None:
    info = {"inputs": ["/data/my rows", "/data/clustered"], "tokenizer_path": "/t/tok.json"}
    assert repair_command(tmp_path / "tok", info) == (
        f"data_io tokenize '/data/my rows' /data/clustered -o {tmp_path / 'tok'} "
        f"--tokenizer-path /t/tok.json"
    )
    tasks = [
        TaskOrigin("a__b__c.jsonl", Origin("x"), None, "/r1/a/b/c.jsonl"),
        TaskOrigin("x.parquet", Origin("x"), None, "/r2/x.parquet"),
        TaskOrigin("odd.jsonl", Origin("x"), None, "/r3/not_the_name.jsonl"),  # no root found
    ]
    command = repair_command(Path("/tok"), {"tokenizer_path": "t.json"}, tasks)
    assert command == "data_io tokenize /r1 /r2 -o /tok --tokenizer-path t.json"


# -- damaged tasks: the advice must repair them -------------------------------------------


def _repair(corpus: Path) -> str:
    info = _info(corpus)
    return (
        f"data_io tokenize {' '.join(info['inputs'])} -o {corpus} "
        f"--tokenizer-path {info['tokenizer_path']}"
    )


def _assert_delete_advice(message: str, corpus: Path, task: str) -> None:
    """The tokenizer's cache keeps a damaged folder: the advice deletes it first."""
    assert f"delete {corpus / task} and re-run `{_repair(corpus)}`" in message
    assert "re-run the tokenizer" not in message


def test_edited_lengths_say_delete_then_retokenize(tmp_path: Path, corpora) -> None:
    corpus = _copy(corpora[0], tmp_path / "tok")
    task = corpus / "data__arithmetic.jsonl"
    resp_len = np.load(task / "resp_len.npy")
    resp_len[1] += 1  # row 2 no longer starts where row 1 ends
    np.save(task / "resp_len.npy", resp_len)
    with pytest.raises(InputError) as info:
        _sample(tmp_path, corpus)
    message = str(info.value)
    assert "task data__arithmetic.jsonl: row 2 of" in message and "back to back" in message
    _assert_delete_advice(message, corpus, "data__arithmetic.jsonl")
    assert not (tmp_path / "out").exists()


def _truncate_task(task: Path, rows: int) -> None:
    """Cut every array of ``task`` to its first ``rows`` rows, consistently."""
    arrays = {name: np.load(task / f"{name}.npy") for name in ("inst_start", "inst_len")}
    arrays |= {name: np.load(task / f"{name}.npy") for name in ("resp_start", "resp_len")}
    end = int(arrays["resp_start"][rows - 1] + arrays["resp_len"][rows - 1])
    for name, array in arrays.items():
        np.save(task / f"{name}.npy", array[:rows])
    np.save(task / "tokens.npy", np.load(task / "tokens.npy")[:end])


def test_consistent_truncation_is_caught_by_the_record(tmp_path: Path, corpora) -> None:
    corpus = _copy(corpora[0], tmp_path / "tok")
    task = corpus / "data__translations.jsonl"
    recorded = json.loads((task / "metadata.json").read_text())["rows"]
    assert recorded > 3
    _truncate_task(task, 3)
    with pytest.raises(InputError) as info:
        _sample(tmp_path, corpus)
    message = str(info.value)
    assert f"records {recorded} rows but the arrays of {task} hold 3" in message
    _assert_delete_advice(message, corpus, "data__translations.jsonl")
    assert not (tmp_path / "out").exists()


def test_recorded_token_count_is_checked(tmp_path: Path, corpora) -> None:
    corpus = _copy(corpora[0], tmp_path / "tok")
    record_path = corpus / "data__arithmetic.jsonl" / "metadata.json"
    record = json.loads(record_path.read_text())
    tokens = record["tokens"]
    record_path.write_text(json.dumps({**record, "tokens": tokens + 5}))
    with pytest.raises(InputError, match=f"records {tokens + 5} tokens but the arrays of"):
        _sample(tmp_path, corpus)


def test_damaged_token_header_in_the_dtype_check_says_delete(tmp_path: Path, corpora) -> None:
    corpus = _copy(corpora[0], tmp_path / "tok")
    (corpus / "data__arithmetic.jsonl" / "tokens.npy").write_bytes(b"garbage")
    with pytest.raises(InputError) as info:
        _sample(tmp_path, corpus)
    message = str(info.value)
    assert "tokens.npy is not a valid .npy file" in message
    _assert_delete_advice(message, corpus, "data__arithmetic.jsonl")


@pytest.mark.parametrize("name", ["inst_start.npy", "resp_len.npy"])
def test_an_empty_index_array_says_delete_not_numpys_eof_error(
    tmp_path: Path, corpora, name: str
) -> None:
    corpus = _copy(corpora[0], tmp_path / "tok")
    (corpus / "data__arithmetic.jsonl" / name).write_bytes(b"")
    with pytest.raises(InputError) as info:
        _sample(tmp_path, corpus)
    message = str(info.value)
    assert f"{name} is not a valid .npy file" in message
    _assert_delete_advice(message, corpus, "data__arithmetic.jsonl")


def test_a_source_without_its_task_is_noted_not_lost_in_silence(
    tmp_path: Path, corpora, capsys
) -> None:
    corpus = _copy(corpora[0], tmp_path / "tok")
    _sample(tmp_path, corpus, tmp_path / "whole")
    assert "no task in" not in capsys.readouterr().err  # every source has its task
    shutil.rmtree(corpus / "data__arithmetic.jsonl")  # as when that file's tokenize failed
    _sample(tmp_path, corpus, tmp_path / "partial")
    said = capsys.readouterr().err
    assert "1 row file under the tokenizer's inputs has no task in" in said
    assert "(data__arithmetic.jsonl)" in said and f"-o {corpus}" in said
    # The inputs gone (sampled on another machine): nothing to compare with, no note.
    info = json.loads((corpus / "tokenizer_info.json").read_text())
    (corpus / "tokenizer_info.json").write_text(
        json.dumps({**info, "inputs": [str(tmp_path / "elsewhere")]})
    )
    _sample(tmp_path, corpus, tmp_path / "elsewhere_out")
    assert "no task in" not in capsys.readouterr().err


# -- one source tokenized twice ------------------------------------------------------------


def test_one_source_under_two_task_names_is_refused(tmp_path: Path, corpora) -> None:
    corpus = _copy(corpora[0], tmp_path / "tok")
    # As if `data/` had also been given as an input root: the same file, another name.
    shutil.copytree(corpus / "data__arithmetic.jsonl", corpus / "arithmetic.jsonl")
    record_path = corpus / "arithmetic.jsonl" / "metadata.json"
    source = json.loads(record_path.read_text())
    # The record a run over `data/` would write: its root is `data/`.
    source["source_root"] = str(Path(source["source_path"]).parent)
    record_path.write_text(json.dumps(source))
    with pytest.raises(InputError) as info:
        _sample(tmp_path, corpus)
    message = str(info.value)
    assert "1 source file was tokenized more than once" in message
    source_path = Path(source["source_path"])
    assert (
        f"{source_path}: {corpus / 'arithmetic.jsonl'} (input root {source_path.parent}) and "
        f"{corpus / 'data__arithmetic.jsonl'} (input root {source_path.parent.parent})" in message
    )
    assert _repair(corpus) in message
    assert not (tmp_path / "out").exists()


def test_distinct_sources_with_similar_names_are_accepted(tmp_path: Path) -> None:
    corpus = tmp_path / "tok"
    record = {"tool": "data_io", "tokenizer_blake3": "aa"}
    folders = [
        _fake_task(corpus, "a__x.jsonl", {**record, "source_path": "/r/a/x.jsonl"}),
        _fake_task(corpus, "x.jsonl", {**record, "source_path": "/r/a/x.jsonl.bak"}),
        _fake_task(corpus, "y.jsonl", record),  # no source recorded: nothing to compare
        _fake_task(corpus, "z.jsonl", record),
    ]
    assert len(check_provenance(corpus, {"tokenizer_blake3": "aa"}, folders)) == 4


# -- an interrupted tokenize run ---------------------------------------------------------------


def test_task_moved_aside_and_not_replaced_is_missing(tmp_path: Path, corpora) -> None:
    corpus = _copy(corpora[0], tmp_path / "tok")
    task = "data__Platypus__code.jsonl"
    (corpus / task).rename(corpus / f".data_io-old-{task}-4242")
    with pytest.raises(InputError) as info:
        _sample(tmp_path, corpus)
    message = str(info.value)
    assert "interrupted while replacing 1 task, now missing" in message
    assert f"): {task}; re-run `{_repair(corpus)}`" in message
    assert not (tmp_path / "out").exists()


def test_moved_aside_folder_beside_its_new_task_is_harmless(tmp_path: Path, corpora) -> None:
    """Killed after the new folder was renamed into place, before the old one was deleted."""
    corpus = _copy(corpora[0], tmp_path / "tok")
    task = "data__arithmetic.jsonl"
    shutil.copytree(corpus / task, corpus / f".data_io-old-{task}-4242")
    # A name that is not of the tokenizer's form is not taken for a task either.
    (corpus / ".data_io-old-nopid").mkdir()
    assert _sample(tmp_path, corpus).rows_per_epoch > 0


def test_half_written_folders_are_noted(tmp_path: Path, corpora, capsys) -> None:
    corpus = _copy(corpora[0], tmp_path / "tok")
    (corpus / ".data_io-tmp-data__new.jsonl-77").mkdir()
    assert _sample(tmp_path, corpus).rows_per_epoch > 0
    err = capsys.readouterr().err
    assert "1 half-written folder of an interrupted tokenize run" in err
    assert ".data_io-tmp-data__new.jsonl-77" in err and "next `data_io tokenize` run" in err
